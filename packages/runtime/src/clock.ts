/** An opaque timer handle of a {@link RuntimeClock}. */
export type TimerHandle = unknown;
// `undefined` is a TimerHandle too: a field of this type holding `undefined` means no timer.

/**
 * The timers of one runtime (option `clock` of `McpRuntime.open`): every wait the runtime owns
 * (list_changed debounce, reconnect backoff, capture grace) goes through it, so a test can drive
 * them with a fake clock or `fc.scheduler` instead of waiting.
 */
export interface RuntimeClock {
  /** Runs `callback` once after `ms` milliseconds. */
  setTimeout(callback: () => void, ms: number): TimerHandle;
  /** Cancels a timer `setTimeout` returned (a timer that already ran is ignored). */
  clearTimeout(handle: TimerHandle): void;
  /** Milliseconds since the epoch. */
  now(): number;
}

/** The real timers (`setTimeout`, `clearTimeout`, `Date.now`). */
export const systemClock: RuntimeClock = Object.freeze({
  setTimeout: (callback: () => void, ms: number): TimerHandle => setTimeout(callback, ms),
  clearTimeout: (handle: TimerHandle): void =>
    clearTimeout(handle as ReturnType<typeof setTimeout> | undefined),
  now: (): number => Date.now(),
});
