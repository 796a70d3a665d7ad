/**
 * Group commit for the PostgreSQL journal store (DESIGN §21.6, "Group commit of the fleet store"),
 * with the rules of the SQLite store's (`journal/sqlite-batch.ts`). The writes the journal asks
 * for while one batch of promise continuations runs (the `SENT` records of 64 keyed calls started
 * together, the completions of the answers one read delivered) share one transaction on one pooled
 * connection: `BEGIN`, each write in its own `SAVEPOINT`, `COMMIT`, sent as one string when they
 * can be (`pg-group.ts`: one round trip for records, two with receipts).
 *
 * - Each write resolves only after the `COMMIT` that holds it returned, so a call is still sent
 *   only once its own `SENT` record is committed.
 * - A write that fails (a statement error, a damaged row) is rolled back to its savepoint and fails
 *   alone; a lost compare-and-set is that write's answer. A failure of the connection, a timeout,
 *   a serialization failure or a deadlock is the group's: it fails (or is retried) whole.
 * - The receipts of a group are chained in order under one lock of the chain-head row, taken by
 *   the first of them and held to the commit (a write rolled back to its savepoint gives back what
 *   it took: the head it chained from is used again, and the lock again if it took it).
 * - A group that failed provably before `COMMIT` is retried whole ({@link PgHandle.tx}); a write
 *   whose caller cancelled meanwhile is dropped before the next attempt, with nothing written.
 *   A commit whose outcome is unknown fails every write of the group with that same
 *   `commit-unknown` error.
 * - Each write keeps its caller's signal: when it fires, that write rejects at once (a timeout or
 *   `ABORTED`, "may or may not have been made", as a lone write's); when every write of a group
 *   was given up, the group's connection is destroyed as a lone write's was.
 *
 * A lone write (a sequential caller) is a group of one and runs without a savepoint after one
 * `process.nextTick` hop.
 */
import { onAbort, StepbindError } from '@stepbind/binding/internal';
import type { DatabaseClock } from './db-clock.js';
import { runGroup, type GroupWrite, type HeadCache, type Outcome } from './pg-group.js';
import { sqlStateOf } from './pg-driver.js';
import { isConnectionError, isTimeout, type PgHandle } from './pg.js';

export { inlined, sqlLiteral } from './pg-literals.js';
export type { GroupWrite } from './pg-group.js';

interface PendingWrite {
  readonly what: string;
  readonly write: GroupWrite;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  /** Set once its promise settled (its caller gave up, or its group ended). */
  settled: boolean;
  stop: () => void;
  /** Told when its caller gives up, by the group running it. */
  gaveUp: (() => void) | undefined;
}

/**
 * Groups committing at once, each on its own pooled connection. Writes that arrive meanwhile wait
 * for one to end and form the next group, so a busy store makes larger groups, not more commits.
 */
const MAX_GROUPS_IN_FLIGHT = 2;

/** Collects the writes of one turn and commits them together; see the file comment. */
export class FleetGroupCommit {
  /** Committed transactions (a group is one), for benchmarks. */
  commits = 0;
  /** Writes committed, for benchmarks. */
  writes = 0;
  /** The most writes one transaction held, for benchmarks. */
  largestGroup = 0;
  /** False: every write is its own transaction (the one-commit-per-write side of a benchmark). */
  grouping = true;
  readonly #pg: PgHandle;
  readonly #clock: DatabaseClock;
  #pending: PendingWrite[] = [];
  /** Groups committing now; at most {@link MAX_GROUPS_IN_FLIGHT}. */
  #inFlight = 0;
  #scheduled = false;
  /** The head this store's last group left (its next group chains after it, checked). */
  readonly #head: HeadCache = { head: undefined };

  constructor(pg: PgHandle, clock: DatabaseClock) {
    this.#pg = pg;
    this.#clock = clock;
  }

  /** Queues a write; the returned promise settles after the commit that holds it. */
  add<T>(what: string, signal: AbortSignal | undefined, spec: GroupWrite): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const write: PendingWrite = {
        what,
        write: spec,
        settled: false,
        resolve: (value) => {
          if (write.settled) return;
          write.settled = true;
          write.stop();
          resolve(value as T);
        },
        reject: (error) => {
          if (write.settled) return;
          write.settled = true;
          write.stop();
          reject(error instanceof Error ? error : new Error(String(error)));
        },
        stop: () => undefined,
        gaveUp: undefined,
      };
      if (signal !== undefined) {
        write.stop = onAbort(signal, () => {
          write.reject(this.#pg.abandoned(what, signal.reason));
          write.gaveUp?.();
        });
      }
      if (!this.grouping) {
        void this.#commit([write]);
        return;
      }
      this.#pending.push(write);
      this.#schedule();
    });
  }

  /** Flushes after the continuations ready now ran, unless the groups in flight are at the bound. */
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= MAX_GROUPS_IN_FLIGHT) return;
    this.#scheduled = true;
    process.nextTick(() => {
      this.#scheduled = false;
      if (this.#pending.length === 0) return;
      const group = this.#pending;
      this.#pending = [];
      this.#inFlight++;
      void this.#commit(group).finally(() => {
        this.#inFlight--;
        // What arrived while it committed is the next group.
        if (this.#pending.length > 0) this.#schedule();
      });
    });
  }

  async #commit(group: PendingWrite[]): Promise<void> {
    let live = group.filter((write) => !write.settled);
    if (live.length === 0) return;
    // Every caller gone: the group's connection is destroyed, as a lone write's was.
    const abandon = new AbortController();
    const check = (): void => {
      if (live.every((write) => write.settled)) abandon.abort(new Error('every caller gave up'));
    };
    for (const write of live) write.gaveUp = check;
    const what = live.length === 1 ? live[0]!.what : `commit ${live.length} writes`;
    let outcomes: Outcome[];
    try {
      outcomes = await this.#pg.tx(
        what,
        async (client, commit) => {
          // A retried group drops the writes whose callers cancelled meanwhile: nothing of them is written.
          live = live.filter((write) => !write.settled);
          if (live.length > this.largestGroup) this.largestGroup = live.length;
          if (live.length === 0) {
            // Nothing was sent: no transaction to end.
            commit.committed = true;
            return [];
          }
          return runGroup(
            this.#pg,
            client,
            commit,
            live.map((write) => write.write),
            {
              clock: this.#clock,
              cache: this.#head,
              isGroup: isGroupFailure,
              own: (i, error) => this.#own(live[i]!, error),
            },
          );
        },
        // The group's BEGIN and COMMIT travel with its statements (pg-group.ts).
        { signal: abandon.signal, deferBegin: true, deferCommit: true },
      );
    } catch (error) {
      for (const write of live) write.reject(error);
      return;
    }
    this.commits++;
    live.forEach((write, i) => {
      const outcome = outcomes[i];
      if (outcome === undefined) return;
      if (outcome.ok) {
        this.writes++;
        write.resolve(outcome.value);
      } else write.reject(outcome.error);
    });
  }

  /** A write's own failure, as it would have failed alone. */
  #own(write: PendingWrite, error: unknown): unknown {
    if (StepbindError.isInstance(error)) return error;
    return this.#pg.failure(write.what, 'query', error);
  }
}

/** A failure that is the group's, not one write's: the group fails or is retried whole. */
function isGroupFailure(error: unknown): boolean {
  if (isConnectionError(error) || isTimeout(error)) return true;
  const code = sqlStateOf(error);
  // Serialization failure, deadlock, a transaction already aborted.
  return code === '40001' || code === '40P01' || code === '25P02';
}

interface PendingRead<R> {
  readonly key: string;
  readonly resolve: (row: R | undefined) => void;
  readonly reject: (error: Error) => void;
  settled: boolean;
  stop: () => void;
  gaveUp: (() => void) | undefined;
}

/**
 * The reads by key of one turn (the record reads of 64 keyed calls started together) in one
 * query, so their writes become ready together and form one group. Each read keeps its caller's
 * signal as {@link FleetGroupCommit}'s writes do; a batch all of whose callers gave up is
 * abandoned (its connection destroyed).
 */
export class BatchedReads<R> {
  /** Queries made, for benchmarks. */
  queries = 0;
  readonly #pg: PgHandle;
  readonly #what: string;
  readonly #run: (keys: string[], signal: AbortSignal) => Promise<ReadonlyMap<string, R>>;
  #pending: PendingRead<R>[] = [];

  constructor(
    pg: PgHandle,
    what: string,
    run: (keys: string[], signal: AbortSignal) => Promise<ReadonlyMap<string, R>>,
  ) {
    this.#pg = pg;
    this.#what = what;
    this.#run = run;
  }

  /** The row of `key`, read with the other reads of this turn. */
  get(key: string, signal: AbortSignal | undefined): Promise<R | undefined> {
    return new Promise<R | undefined>((resolve, reject) => {
      const read: PendingRead<R> = {
        key,
        settled: false,
        resolve: (row) => {
          if (read.settled) return;
          read.settled = true;
          read.stop();
          resolve(row);
        },
        reject: (error) => {
          if (read.settled) return;
          read.settled = true;
          read.stop();
          reject(error);
        },
        stop: () => undefined,
        gaveUp: undefined,
      };
      if (signal !== undefined) {
        read.stop = onAbort(signal, () => {
          read.reject(this.#pg.abandoned(this.#what, signal.reason));
          read.gaveUp?.();
        });
      }
      if (this.#pending.length === 0) process.nextTick(() => void this.#flush());
      this.#pending.push(read);
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#pending.filter((read) => !read.settled);
    this.#pending = [];
    if (batch.length === 0) return;
    const abandon = new AbortController();
    const check = (): void => {
      if (batch.every((read) => read.settled)) abandon.abort(new Error('every caller gave up'));
    };
    for (const read of batch) read.gaveUp = check;
    this.queries++;
    try {
      const rows = await this.#run([...new Set(batch.map((read) => read.key))], abandon.signal);
      for (const read of batch) read.resolve(rows.get(read.key));
    } catch (error) {
      const reason = error instanceof Error ? error : new Error(String(error));
      for (const read of batch) read.reject(reason);
    }
  }
}
