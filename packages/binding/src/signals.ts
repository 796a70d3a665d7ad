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

/**
 * The store options of recording a call's outcome: bounded like the call while its bound has not
 * passed; once it has (the reason the run ends), the outcome is still recorded if the store
 * answers within its own timeout, so a cancelled run leaves its receipt.
 */
export function outcomeDeadline(deadline: { readonly signal?: AbortSignal }): {
  readonly signal?: AbortSignal;
} {
  return deadline.signal === undefined || deadline.signal.aborted ? {} : deadline;
}
