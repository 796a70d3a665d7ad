/**
 * Group commit for the PostgreSQL journal store (DESIGN §21.6, "Group commit of the fleet store"),
 * with the rules of the SQLite store's (`journal/sqlite-batch.ts`). The writes the journal asks
 * for while one batch of promise continuations runs (the `SENT` records of 64 keyed calls started
 * together, the completions of the answers one read delivered) share one transaction on one pooled
 * connection: `BEGIN`, each write in its own `SAVEPOINT`, `COMMIT`.
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
import type { ChainAnchor, ReceiptBody, ReceiptEntry } from '@stepbind/binding/internal';
import { chainReceipt, onAbort, StepbindError } from '@stepbind/binding/internal';
import { DB_NOW_SQL, type DatabaseClock } from './db-clock.js';
import type { PgPoolClient, PgQueryResult, PgRow } from './pg-driver.js';
import { isConnectionError, isTimeout, type PgHandle } from './pg.js';

/** What one write of a group runs in: the group's connection and its chain. */
export interface GroupTransaction {
  /** Runs a statement of the group (the first carries the group's `BEGIN`, one round trip). */
  query<R extends object = PgRow>(text: string, values?: unknown[]): Promise<PgQueryResult<R>>;
  /**
   * Takes the group's lock of the chain-head row, unless it holds it already, in one statement
   * with `withClause` (a `WITH name AS (…)` whose data change runs in the same round trip), and
   * returns the value of `extra` (an expression over it).
   */
  lockHead(withClause: string, extra: string, values: unknown[]): Promise<unknown>;
  /** Chains `body` after the head, under the group's one lock of the chain-head row. */
  append(body: ReceiptBody): Promise<ReceiptEntry>;
}

interface PendingWrite {
  readonly what: string;
  readonly fn: (tx: GroupTransaction) => Promise<unknown>;
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

type Outcome =
  { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

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

  constructor(pg: PgHandle, clock: DatabaseClock) {
    this.#pg = pg;
    this.#clock = clock;
  }

  /** Queues a write; the returned promise settles after the commit that holds it. */
  add<T>(
    what: string,
    signal: AbortSignal | undefined,
    fn: (tx: GroupTransaction) => Promise<T>,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const write: PendingWrite = {
        what,
        fn,
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
        async (client) => {
          // A retried group drops the writes whose callers cancelled meanwhile: nothing of them is written.
          live = live.filter((write) => !write.settled);
          if (live.length > this.largestGroup) this.largestGroup = live.length;
          const tx = new Transaction(client, this.#clock);
          const [only] = live;
          if (only === undefined) return [];
          if (live.length === 1) return [{ ok: true, value: await only.fn(tx) }];
          const results: Outcome[] = [];
          for (const write of live) {
            // Sent with the write's first statement (its round trip).
            tx.savepoint();
            const head = tx.head;
            try {
              results.push({ ok: true, value: await write.fn(tx) });
            } catch (error) {
              if (isGroupFailure(error)) throw error;
              await tx.rollbackToSavepoint();
              tx.head = head;
              results.push({ ok: false, error: this.#own(write, error) });
            }
          }
          return results;
        },
        // The first statement of the group carries its BEGIN (Transaction.query).
        { signal: abandon.signal, deferBegin: true },
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
  const code = (error as { code?: unknown } | undefined)?.code;
  // Serialization failure, deadlock, a transaction already aborted.
  return code === '40001' || code === '40P01' || code === '25P02';
}

/** One group's transaction: its connection and the chain head it holds the lock of. */
class Transaction implements GroupTransaction {
  readonly client: PgPoolClient;
  /** The head the next receipt chains after; undefined until the head row is locked. */
  head: ChainAnchor | undefined;
  readonly #clock: DatabaseClock;
  /** Statements sent with the next query, in its round trip: `BEGIN`, a write's `SAVEPOINT`. */
  #prefix: string[] = ['BEGIN'];
  /** The savepoint statement of the current write while it waits in {@link #prefix}. */
  #pendingSavepoint: string | undefined;
  #savepointSent = false;

  constructor(client: PgPoolClient, clock: DatabaseClock) {
    this.client = client;
    this.#clock = clock;
  }

  async query<R extends object = PgRow>(
    text: string,
    values: unknown[] = [],
  ): Promise<PgQueryResult<R>> {
    if (this.#prefix.length === 0) return this.client.query<R>(text, values);
    const prefix = this.#prefix.join('; ');
    this.#prefix = [];
    if (this.#pendingSavepoint !== undefined) {
      this.#pendingSavepoint = undefined;
      this.#savepointSent = true;
    }
    const inline = values.length === 0 ? text : inlined(text, values);
    if (inline === undefined) {
      await this.client.query(prefix);
      return this.client.query<R>(text, values);
    }
    // One simple-protocol round trip: the prefix and the statement, its values escaped as literals.
    const results = (await this.client.query(
      `${prefix}; ${inline}`,
    )) as unknown as PgQueryResult<R>[];
    const last = results[results.length - 1];
    if (last === undefined) throw new Error('no result from a statement of the group');
    return last;
  }

  /** Starts the next write of the group: its savepoint goes with its first statement. */
  savepoint(): void {
    this.#pendingSavepoint = this.#savepointSent
      ? 'RELEASE SAVEPOINT w; SAVEPOINT w'
      : 'SAVEPOINT w';
    this.#prefix.push(this.#pendingSavepoint);
  }

  /** Undoes the current write: to its savepoint, or nothing when none of it was sent. */
  async rollbackToSavepoint(): Promise<void> {
    if (this.#pendingSavepoint !== undefined) {
      this.#prefix.pop();
      this.#pendingSavepoint = undefined;
      return;
    }
    await this.client.query('ROLLBACK TO SAVEPOINT w');
  }

  async lockHead(withClause: string, extra: string, values: unknown[]): Promise<unknown> {
    if (this.head !== undefined) {
      const { rows } = await this.query<{ extra: unknown }>(
        `${withClause} SELECT ${extra} AS extra`,
        values,
      );
      return rows[0]?.extra;
    }
    // The lock is held to the commit; the same round trip measures the database's clock.
    const before = this.#clock.mark();
    const locked = await this.query<{ seq: string; digest: string; now: string; extra: unknown }>(
      `${withClause} SELECT seq, digest, ${DB_NOW_SQL} AS now, ${extra} AS extra
       FROM chain_head WHERE id = 1 FOR UPDATE`,
      values,
    );
    const row = locked.rows[0];
    // Not a clean measurement when the row lock was waited for: observe keeps the more precise one.
    this.#clock.observe(before, Number(row?.now), this.#clock.mark());
    if (row === undefined) throw new Error('the chain head row is missing');
    this.head = { seq: Number(row.seq), digest: row.digest };
    return row.extra;
  }

  async append(body: ReceiptBody): Promise<ReceiptEntry> {
    if (this.head === undefined) await this.lockHead('', 'NULL', []);
    const head = this.head;
    if (head === undefined) throw new Error('the chain head row is missing');
    const entry = chainReceipt(head, body);
    // The receipt and the new head in one statement (one round trip).
    await this.query(
      `WITH appended AS (
         INSERT INTO receipts (seq, prev_digest, digest, key, at, body) VALUES ($1, $2, $3, $4, $5, $6)
       )
       UPDATE chain_head SET seq = $1, digest = $3 WHERE id = 1`,
      [entry.seq, entry.prevDigest, entry.digest, body.key, body.at, entry.text],
    );
    this.head = { seq: entry.seq, digest: entry.digest };
    return entry;
  }
}

/**
 * `text` with its `$n` parameters replaced by SQL literals, or undefined when a value cannot be
 * one (a NUL character, which the simple protocol cannot carry, or a value of another type).
 */
export function inlined(text: string, values: readonly unknown[]): string | undefined {
  const literals: string[] = [];
  for (const value of values) {
    const literal = sqlLiteral(value);
    if (literal === undefined) return undefined;
    literals.push(literal);
  }
  return text.replace(/\$(\d+)/g, (_, n: string) => literals[Number(n) - 1] ?? 'NULL');
}

/**
 * `value` as an SQL literal of the simple protocol, or undefined when it cannot be one. A number
 * is parenthesized, so that a negative one after a `-` never opens a `--` comment.
 */
export function sqlLiteral(value: unknown): string | undefined {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number') return Number.isFinite(value) ? `(${String(value)})` : undefined;
  if (typeof value !== 'string' || value.includes('\u0000')) return undefined;
  // As pg's escapeLiteral: quotes doubled; with a backslash, an E'' string with it doubled.
  const escaped = value.replace(/'/g, "''");
  return value.includes('\\') ? ` E'${escaped.replace(/\\/g, '\\\\')}'` : `'${escaped}'`;
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
