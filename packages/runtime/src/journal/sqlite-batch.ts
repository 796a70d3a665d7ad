/**
 * Group commit for the SQLite journal (DESIGN §21.1). The writes the journal asks for while one
 * batch of promise continuations runs (everything that became ready in the same turn of the event
 * loop: the 64 `SENT` records of 64 keyed calls started together, the completions of the answers
 * one stdio read delivered) are committed in one transaction, with one fsync when any of them must
 * be durable. Each write still resolves only after the commit that holds it has returned, so a
 * call is sent only after its own `SENT` record is durable, exactly as when it was committed alone.
 *
 * A group is collected until the microtask queue drains (`process.nextTick` queued from a
 * continuation runs after it), so a lone write waits for nothing but that hop. A group of one runs
 * as before (its own transaction). In a larger group each write runs its statements without a
 * transaction or savepoint of its own (`grouped`): a lost compare-and-set writes nothing, and when
 * a write fails for any reason other than the lock (a full disk, a damaged page, a value that
 * cannot be stored) after some of its statements ran, the group is rolled back whole (so nothing of
 * that write, nor of any other, is left) and its writes are run again one transaction each, so the
 * failure stays that write's own and the others are unaffected. A savepoint per write would only
 * undo what this rollback undoes anyway (DESIGN §21.1). A group that meets another process's lock
 * is retried whole (nothing of it was applied); a write whose caller cancelled while the group
 * waited leaves the group `ABORTED`, with nothing written for it.
 */
import { isBusy, type JournalOperation } from './sqlite-busy.js';

/** One write waiting for its group's commit. */
export interface PendingWrite {
  readonly operation: JournalOperation;
  /** Asks for `synchronous=FULL` on the commit that holds it (an fsync). */
  readonly durable: boolean;
  readonly signal: AbortSignal | undefined;
  /** The write itself, alone: one statement or one transaction; returns its result. */
  readonly fn: () => unknown;
  /**
   * The same write's statements without a transaction of their own, run inside a group's (its
   * failure rolls back the group). Absent: `fn` (one statement, or a transaction that nests as a
   * savepoint).
   */
  readonly grouped?: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** What a group commit needs from the store it runs in. */
export interface GroupHost {
  /**
   * Runs `attempt` again while another process holds the lock (`retryBusy`, with the store's close
   * signal), `retrying` true from the second attempt on; maps a failure to a `JournalError`.
   */
  retry<T>(operation: JournalOperation, attempt: (retrying: boolean) => T): Promise<T>;
  /**
   * Runs `fn` in one write transaction (`BEGIN IMMEDIATE` … `COMMIT`), committed with an fsync
   * when it holds durable writes (`durableWrites` of them, for the store's counters).
   */
  transaction(durableWrites: number, fn: () => unknown[]): unknown[];
  /** Runs one write alone (its own transaction, its own lock wait and signal). */
  commitOne(write: PendingWrite): Promise<unknown>;
  /** The error of a write whose caller cancelled while its group waited for the lock. */
  cancelled(write: PendingWrite & { readonly signal: AbortSignal }): Error;
}

/** Thrown inside a group's transaction to roll it back when one of its writes failed. */
class GroupFailed extends Error {}

/** Returned by a group's attempt that was rolled back because one of its writes failed. */
const FAILED: unique symbol = Symbol('group failed');

/** Collects the writes of one turn and commits them together; see the file comment. */
export class GroupCommit {
  readonly #host: GroupHost;
  #pending: PendingWrite[] = [];
  /** The most writes one commit held, for benchmarks. */
  largestGroup = 0;

  constructor(host: GroupHost) {
    this.#host = host;
  }

  /** Queues `write`; the returned promise settles after the commit that holds it. */
  add(write: Omit<PendingWrite, 'resolve' | 'reject'>): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (this.#pending.length === 0) process.nextTick(() => void this.#flush());
      this.#pending.push({ ...write, resolve, reject });
    });
  }

  async #flush(): Promise<void> {
    const group = this.#pending;
    this.#pending = [];
    if (group.length > this.largestGroup) this.largestGroup = group.length;
    const [first] = group;
    if (first === undefined) return;
    if (group.length === 1) {
      await settle(this.#host, first);
      return;
    }
    let live = group;
    const operation = (group.find((write) => write.durable) ?? first).operation;
    let results: unknown[] | typeof FAILED;
    try {
      results = await this.#host.retry(operation, (retrying) => {
        if (retrying) live = live.filter((write) => this.#stillWanted(write));
        if (live.length === 0) return [];
        try {
          const durableWrites = live.filter((write) => write.durable).length;
          return this.#host.transaction(durableWrites, () => live.map(runInGroup));
        } catch (error) {
          // Rolled back whole: nothing of the group was written.
          if (error instanceof GroupFailed) return FAILED;
          throw error;
        }
      });
    } catch (error) {
      for (const write of live) write.reject(error);
      return;
    }
    if (results === FAILED) {
      // Each write runs alone and keeps its own outcome (the failure stays with its write).
      for (const write of live) await settle(this.#host, write);
      return;
    }
    const done = results;
    live.forEach((write, i) => write.resolve(done[i]));
  }

  /** False (and the write rejected, nothing written) when its caller cancelled meanwhile. */
  #stillWanted(write: PendingWrite): boolean {
    const { signal } = write;
    if (signal?.aborted !== true) return true;
    write.reject(this.#host.cancelled({ ...write, signal }));
    return false;
  }
}

/**
 * One write of a group, without a savepoint of its own: a lock error retries the whole group, any
 * other rolls it back whole (with whatever of this write had run).
 */
function runInGroup(write: PendingWrite): unknown {
  try {
    return (write.grouped ?? write.fn)();
  } catch (error) {
    if (isBusy(error)) throw error;
    throw new GroupFailed('a write of the group failed', { cause: error });
  }
}

function settle(host: GroupHost, write: PendingWrite): Promise<void> {
  return host.commitOne(write).then(write.resolve, write.reject);
}
