/**
 * One `abort` listener per signal, however many waits share it: a caller that passes one
 * `AbortSignal` to a thousand concurrent calls must not trip Node's listener-leak warning (or pay
 * a thousand listeners). {@link onAbort} registers a callback on a per-signal fan-out.
 */
const fanOuts = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `callback` once when `signal` aborts (at once, in a microtask, when it already has).
 * Returns a function that unregisters it; call it when the wait ends.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  if (signal.aborted) {
    let cancelled = false;
    queueMicrotask(() => {
      if (!cancelled) callback();
    });
    return () => {
      cancelled = true;
    };
  }
  let callbacks = fanOuts.get(signal);
  if (callbacks === undefined) {
    const set = new Set<() => void>();
    callbacks = set;
    fanOuts.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        fanOuts.delete(signal);
        for (const fn of [...set]) fn();
      },
      { once: true },
    );
  }
  const entry = (): void => callback();
  callbacks.add(entry);
  const set = callbacks;
  return () => {
    set.delete(entry);
  };
}

/** Deadlines whose timer is armed (created, neither ended nor fired): for tests and benchmarks. */
let armed = 0;

/** How many store deadlines have a timer armed now (0 once every run's store work settled). */
export function armedDeadlines(): number {
  return armed;
}

/**
 * A bound on a call's journal (store) operations: `signal` aborts when the caller's signal does or
 * when `timeoutMs` passed, whichever comes first (a timeout's reason is a `TimeoutError`
 * `DOMException`, as `AbortSignal.timeout`'s, which a store reports as `detail.reason:
 * 'timeout'`). Its timer is cleared, and the caller's signal no longer listened to, by
 * {@link StoreDeadline.end}, called when the operations it bounds settled: nothing of it
 * outlives them (an `AbortSignal.timeout` kept its timer until the signal was collected).
 * Spread into store options it gives `{ signal }` only.
 */
export class StoreDeadline {
  /** The signal the store operations get (the caller's alone when the timeout is unbounded). */
  readonly signal: AbortSignal | undefined;
  /**
   * The monotonic instant (`performance.now()`) at which the timeout fires, when bounded: a store
   * may refuse to apply a write that would take effect only after it (DESIGN §21.6).
   */
  readonly deadline: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined = undefined;
  #unlisten: (() => void) | undefined = undefined;

  constructor(caller: AbortSignal | undefined, timeoutMs: number) {
    // Out-of-range timeouts are refused by option validation; here they only mean "no deadline".
    const bounded = Number.isFinite(timeoutMs) && timeoutMs > 0 && timeoutMs <= 2_147_483_647;
    if (!bounded) {
      this.signal = caller;
      this.deadline = undefined;
      return;
    }
    const controller = new AbortController();
    this.signal = controller.signal;
    this.deadline = performance.now() + timeoutMs;
    if (caller !== undefined) {
      // As AbortSignal.any: a source that already fired makes the signal aborted at once.
      if (caller.aborted) {
        controller.abort(caller.reason);
        return;
      }
      this.#unlisten = onAbort(caller, () => {
        this.end();
        controller.abort(caller.reason);
      });
    }
    armed++;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      armed--;
      this.end();
      controller.abort(
        new DOMException('The operation was aborted due to timeout', 'TimeoutError'),
      );
    }, timeoutMs);
    this.#timer.unref();
  }

  /** Clears the timer and stops listening to the caller's signal; the signal never fires after. */
  end(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      armed--;
    }
    if (this.#unlisten !== undefined) {
      this.#unlisten();
      this.#unlisten = undefined;
    }
  }
}

/**
 * The store bound of a call's journal operations before it is sent: the caller's `signal` and the
 * call's timeout, whichever fires first. End it once those operations settled; `replacing` (an
 * earlier bound of the same run) is ended now.
 */
export function callDeadline(
  signal: AbortSignal | undefined,
  timeoutMs: number,
  replacing?: StoreDeadline,
): StoreDeadline {
  replacing?.end();
  return new StoreDeadline(signal, timeoutMs);
}

/** How long recording the outcome of a run the caller cancelled may take, at most. */
export const CANCELLED_RECORD_MS = 1000;

/**
 * The store bound of recording a call's outcome: a fresh bound of the call's timeout (not the
 * send's deadline, which the call itself may have used up, so a result that arrived is still
 * recorded), or, when the caller's `signal` has fired (the reason the run ends), of at most
 * {@link CANCELLED_RECORD_MS}: a cancelled run leaves its receipt if the store answers at once,
 * and returns promptly if it does not. A run returns within its timeout plus this bound. End it
 * once the recording settled.
 */
export function outcomeDeadline(signal: AbortSignal | undefined, timeoutMs: number): StoreDeadline {
  const cancelled = signal?.aborted === true;
  return new StoreDeadline(
    undefined,
    cancelled ? Math.min(timeoutMs, CANCELLED_RECORD_MS) : timeoutMs,
  );
}

/**
 * Runs `work` with `deadline`'s store options (none without one) and ends the deadline when
 * `work` settles.
 */
export async function boundedBy<T>(
  deadline: StoreDeadline | undefined,
  work: (io: { readonly signal?: AbortSignal; readonly deadline?: number }) => Promise<T>,
): Promise<T> {
  const signal = deadline?.signal;
  const at = deadline?.deadline;
  try {
    return await work(
      signal === undefined ? {} : at === undefined ? { signal } : { signal, deadline: at },
    );
  } finally {
    deadline?.end();
  }
}

/** `a` and `b` as one signal (either alone when the other is absent). */
export function anySignal(
  a: AbortSignal | undefined,
  b: AbortSignal | undefined,
): AbortSignal | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return AbortSignal.any([a, b]);
}

/**
 * Waits for `work` until `signal` aborts, then fails with `aborted(reason)` without waiting for it
 * (a `prepare` hook that ignores its signal cannot hold the run, or `close()`, forever); a later
 * rejection of `work` is ignored.
 */
export async function untilAborted<T>(
  work: Promise<T> | T,
  signal: AbortSignal | undefined,
  aborted: (reason: unknown) => Error,
): Promise<T> {
  if (signal === undefined) return await work;
  const pending = Promise.resolve(work);
  pending.catch(() => undefined);
  // Already aborted: the abort wins at once (onAbort would tell it a microtask later).
  if (signal.aborted) throw aborted(signal.reason);
  let unregister: (() => void) | undefined;
  try {
    return await Promise.race([
      pending,
      new Promise<never>((_, reject) => {
        unregister = onAbort(signal, () => reject(aborted(signal.reason)));
      }),
    ]);
  } finally {
    unregister?.();
  }
}
