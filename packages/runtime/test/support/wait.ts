/**
 * How long a test waits for an event before it fails. Only a guard against a hang: the wait ends
 * when the event arrives, never because this time passed.
 */
export const WAIT_BOUND_MS = 10_000;

/**
 * Resolves as `promise` does; rejects with "no <what> within <ms> ms" when it has not settled by
 * then (an `AbortSignal.timeout`, which does not keep the process alive).
 */
export async function within<T>(
  promise: Promise<T>,
  what: string,
  ms: number = WAIT_BOUND_MS,
): Promise<T> {
  const signal = AbortSignal.timeout(ms);
  let onAbort: (() => void) | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    onAbort = () =>
      reject(new Error(`no ${what} within ${ms} ms (the test waits for it, it never sleeps)`));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, timedOut]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}
