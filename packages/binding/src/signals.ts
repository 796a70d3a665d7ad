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
