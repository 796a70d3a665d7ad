/**
 * Waiting for another process's lock on the SQLite journal without blocking the event loop.
 * better-sqlite3 is synchronous, so SQLite's own busy timeout would sleep in the main thread (no
 * timer, no I/O, no other call for up to the whole timeout per write). The store therefore runs with
 * `busy_timeout = 0` once open: a statement that meets a lock fails at once with `SQLITE_BUSY`, and
 * {@link retryBusy} runs the whole operation again after a backoff on the runtime's clock, until a
 * bound, then reports `JOURNAL_BUSY`. Each attempt is one whole transaction: a `BEGIN IMMEDIATE` that
 * meets the lock did nothing, and a `COMMIT` that fails busy is rolled back by better-sqlite3's
 * transaction wrapper, so a retry never finds half of an earlier attempt applied.
 */
import {
  abortedError,
  ErrorCode,
  JournalError,
  onAbort,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { RuntimeClock } from '../clock.js';

/** The store operation that waited, named as its `JournalStore` method (`detail.operation`). */
export type JournalOperation =
  | 'get'
  | 'insert'
  | 'update'
  | 'appendReceipt'
  | 'listRecords'
  | 'readReceipts'
  | 'anchor'
  | 'newestWrite'
  | 'head'
  | 'prune';

/** What one {@link retryBusy} call waits with. */
export interface BusyWait {
  /** The timers and time of the wait (the runtime's clock). */
  readonly clock: RuntimeClock;
  /** Milliseconds, by `clock`, after which the operation fails `JOURNAL_BUSY`. */
  readonly boundMs: number;
  /** The journal file, for the error. */
  readonly location: string;
  readonly operation: JournalOperation;
  /** The caller's signal: an abort ends the wait with `ABORTED` (nothing of the attempt applied). */
  readonly signal?: AbortSignal | undefined;
  /** Aborted when the store closes: the wait ends with `JOURNAL_UNAVAILABLE` (`closed`). */
  readonly closed: AbortSignal;
}

/** The first pause after a busy attempt; each next one doubles, up to {@link MAX_PAUSE_MS}. */
const FIRST_PAUSE_MS = 1;
/** Longest pause between two attempts: a released lock is noticed within this. */
const MAX_PAUSE_MS = 32;

/** True for `SQLITE_BUSY` and its extended codes (`SQLITE_BUSY_SNAPSHOT`, `_RECOVERY`, `_TIMEOUT`). */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Runs `attempt` (synchronous, one whole transaction) and, while it fails `SQLITE_BUSY`, runs it
 * again after a pause (1 ms doubling to 32 ms) on `wait.clock`, never sleeping in the main thread.
 * The first attempt runs synchronously, so an uncontended call costs no timer.
 *
 * @throws JournalError `JOURNAL_BUSY` (detail `{ location, waitedMs, operation }`) once
 *   `wait.boundMs` passed with the lock still held; `ABORTED` when `wait.signal` aborts;
 *   `JOURNAL_UNAVAILABLE` (`closed`) when the store closes meanwhile. Any other error of `attempt`
 *   as thrown.
 */
export async function retryBusy<T>(attempt: () => T, wait: BusyWait): Promise<T> {
  const started = wait.clock.now();
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusy(error)) throw error;
      const waitedMs = wait.clock.now() - started;
      if (waitedMs >= wait.boundMs) throw busyError(wait, waitedMs, error);
      await sleep(Math.min(pause, wait.boundMs - waitedMs), wait);
      const stop = stopped(wait);
      if (stop !== undefined) throw stop;
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
    }
  }
}

function busyError(wait: BusyWait, waitedMs: number, cause: unknown): JournalError {
  return new JournalError(
    ErrorCode.JOURNAL_BUSY,
    `The journal ${wait.location} stayed locked by another process for ${waitedMs} ms (${wait.operation}); this write did not happen and a call it preceded was not sent. Retry shortly; if it persists, find the process holding the file open in a write transaction, or raise the journal's busyTimeoutMs (${wait.boundMs} ms).`,
    {
      detail: {
        path: wait.location,
        reason: 'locked',
        location: wait.location,
        waitedMs,
        operation: wait.operation,
      },
      cause,
    },
  );
}

/** Why the wait must end now: the store closed or the caller aborted; `undefined` to go on. */
function stopped(wait: BusyWait): Error | undefined {
  if (wait.closed.aborted) {
    return new JournalError(
      ErrorCode.JOURNAL_UNAVAILABLE,
      `The journal ${wait.location} was closed while ${wait.operation} waited for another process's lock; nothing of it was written. Open a new runtime.`,
      { detail: { path: wait.location, reason: 'closed' } },
    );
  }
  if (wait.signal?.aborted === true)
    return waitCancelled(wait.location, wait.operation, wait.signal);
  return undefined;
}

/**
 * The `ABORTED` error of a write whose caller cancelled while it waited for another process's lock
 * (nothing of it was written): the busy wait's, and a group commit's for one write of its group.
 */
export function waitCancelled(
  location: string,
  operation: JournalOperation,
  signal: AbortSignal,
): StepbindError {
  return abortedError(
    `Waiting for the lock of the journal ${location} (${operation}) was cancelled; nothing of it was written, and a call it preceded was not sent.`,
    signal.reason,
    { as: JournalError, detail: { delivery: 'not-sent' } },
  );
}

/**
 * Waits `ms` on the clock; rejects at once when the caller's signal aborts or the store closes.
 * Listens through `onAbort`'s one-listener-per-signal fan-out: every wait of a store shares its
 * close signal, and many concurrent calls may share one caller signal.
 */
function sleep(ms: number, wait: BusyWait): Promise<void> {
  const { clock, signal, closed } = wait;
  return new Promise<void>((resolve, reject) => {
    const early = stopped(wait);
    if (early !== undefined) {
      reject(early);
      return;
    }
    const unregister: (() => void)[] = [];
    const done = (): void => {
      for (const fn of unregister) fn();
    };
    const timer = clock.setTimeout(() => {
      done();
      resolve();
    }, ms);
    const interrupted = (): void => {
      clock.clearTimeout(timer);
      done();
      const reason = stopped(wait);
      // An abort always comes with its signal aborted; resolving would only try once more.
      if (reason === undefined) resolve();
      else reject(reason);
    };
    if (signal !== undefined) unregister.push(onAbort(signal, interrupted));
    unregister.push(onAbort(closed, interrupted));
  });
}
