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

/**
 * The store options bounding a call's journal operations before it is sent: `signal` (the
 * caller's) and the call's timeout, whichever fires first (a timeout's reason is a
 * `TimeoutError`, which a store reports as `detail.reason: 'timeout'`). The timer is Node's own
 * (unref'd, dropped with the signal).
 */
export function callDeadline(
  signal: AbortSignal | undefined,
  timeoutMs: number,
): { readonly signal?: AbortSignal } {
  // Out-of-range timeouts are refused by option validation; here they only mean "no deadline".
  const bounded = Number.isFinite(timeoutMs) && timeoutMs > 0 && timeoutMs <= 2_147_483_647;
  if (!bounded) return signal === undefined ? {} : { signal };
  const timeout = AbortSignal.timeout(timeoutMs);
  return { signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]) };
}

/** How long recording the outcome of a run the caller cancelled may take, at most. */
export const CANCELLED_RECORD_MS = 1000;

/**
 * The store options of recording a call's outcome: a fresh bound of the call's timeout (not the
 * send's deadline, which the call itself may have used up, so a result that arrived is still
 * recorded), or, when the caller's `signal` has fired (the reason the run ends), of at most
 * {@link CANCELLED_RECORD_MS}: a cancelled run leaves its receipt if the store answers at once,
 * and returns promptly if it does not. A run returns within its timeout plus this bound.
 */
export function outcomeDeadline(
  signal: AbortSignal | undefined,
  timeoutMs: number,
): { readonly signal?: AbortSignal } {
  const cancelled = signal?.aborted === true;
  return callDeadline(undefined, cancelled ? Math.min(timeoutMs, CANCELLED_RECORD_MS) : timeoutMs);
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
