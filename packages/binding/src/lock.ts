import { Mutex } from 'async-mutex';
import { abortedError, type StepbindError } from './errors.js';
import { onAbort } from './signals.js';

/** Releases a lock that was acquired. Calling it more than once has no effect. */
export type Release = () => void;

/** Options for acquiring a {@link RevisionLock}. */
export interface LockAcquireOptions {
  /** Gives up waiting; the acquire then rejects with `ABORTED` and holds nothing. */
  readonly signal?: AbortSignal;
}

/**
 * A fair, writer-preferring async read/write lock built on async-mutex.
 *
 * Every acquirer, reader or writer, first passes one FIFO turnstile (an async-mutex `Mutex`, whose
 * waiters are served strictly in arrival order). A reader holds the turnstile only long enough to
 * register itself and lets go at once, so any number of readers run together. A writer keeps the
 * turnstile while it waits for the readers already inside to leave, and while it writes.
 *
 * Why it is fair and cannot starve a writer: a writer that reaches the turnstile stops everyone who
 * arrives after it (readers included) in the FIFO queue behind it, and it waits only for the readers
 * that were admitted before it. Those are finitely many and each leaves when its call ends, so the
 * writer runs after at most the longest of them. Readers that arrive after the writer run right after
 * it, in arrival order, so readers are not starved either.
 *
 * A waiter whose signal aborts is rejected at once; its place in the queue is consumed and released
 * immediately when it comes up, so cancellation never reorders or deadlocks the others.
 */
export class RevisionLock {
  readonly #turnstile = new Mutex();
  #readers = 0;
  #drained: (() => void) | undefined;
  #writing = false;

  /** Number of readers currently holding the lock. */
  get readers(): number {
    return this.#readers;
  }

  /** True while a writer holds the lock. */
  get writing(): boolean {
    return this.#writing;
  }

  /**
   * Acquires a shared read hold. Fast path: with no writer queued or writing, it is taken
   * synchronously inside the returned promise's first tick without touching the mutex queue.
   */
  async acquireRead(options: LockAcquireOptions = {}): Promise<Release> {
    if (!this.#turnstile.isLocked()) {
      if (options.signal?.aborted === true) throw lockAborted(options.signal);
      return this.#admitReader();
    }
    const releaseTurnstile = await this.#passTurnstile(options.signal);
    const release = this.#admitReader();
    releaseTurnstile();
    return release;
  }

  /**
   * The read hold now, when {@link acquireRead} would take it on its fast path (no writer queued
   * or writing), without a turn of the event loop; `undefined` otherwise (then await
   * {@link acquireRead}, which queues fairly).
   */
  tryAcquireRead(): Release | undefined {
    return this.#turnstile.isLocked() ? undefined : this.#admitReader();
  }

  /**
   * Acquires the exclusive write hold: waits for earlier readers, blocks later arrivals. An abort
   * while waiting (in the queue or for readers to leave) gives the turnstile back and rejects.
   */
  async acquireWrite(options: LockAcquireOptions = {}): Promise<Release> {
    const { signal } = options;
    const releaseTurnstile = await this.#passTurnstile(signal);
    if (this.#readers > 0) {
      try {
        await new Promise<void>((resolve, reject) => {
          const abort = (): void => {
            if (signal !== undefined) reject(lockAborted(signal));
          };
          let off: () => void = () => undefined;
          this.#drained = () => {
            off();
            resolve();
          };
          if (signal?.aborted === true) abort();
          else if (signal !== undefined) off = onAbort(signal, abort);
        });
      } catch (error) {
        this.#drained = undefined;
        releaseTurnstile();
        throw error;
      }
    }
    this.#writing = true;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#writing = false;
      releaseTurnstile();
    };
  }

  #admitReader(): Release {
    this.#readers++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#readers--;
      if (this.#readers === 0 && this.#drained !== undefined) {
        const wake = this.#drained;
        this.#drained = undefined;
        wake();
      }
    };
  }

  #passTurnstile(signal: AbortSignal | undefined): Promise<Release> {
    return acquireMutex(this.#turnstile, signal);
  }
}

function lockAborted(signal: AbortSignal): StepbindError {
  return abortedError('Waiting for a lock was cancelled.', signal.reason);
}

/**
 * Acquires an async-mutex `Mutex` (FIFO) with an abort signal. An aborted waiter rejects with
 * `ABORTED` at once; its queue slot is released the moment it comes up, so the others keep their order.
 */
export async function acquireMutex(
  mutex: Mutex,
  signal: AbortSignal | undefined,
): Promise<Release> {
  if (signal?.aborted === true) throw lockAborted(signal);
  const acquiring = mutex.acquire();
  if (signal === undefined) return acquiring;
  return new Promise<Release>((resolve, reject) => {
    const off = onAbort(signal, () => {
      // Keep the FIFO slot but hand it straight back when it comes up.
      void acquiring.then((release) => release());
      reject(lockAborted(signal));
    });
    void acquiring.then((release) => {
      off();
      if (signal.aborted) return;
      resolve(release);
    });
  });
}
