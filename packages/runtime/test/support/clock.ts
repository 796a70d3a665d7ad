import type { RuntimeClock } from '@stepbind/runtime';
import { within, WAIT_BOUND_MS } from './wait.js';

/** A {@link RuntimeClock} whose armed timers a test can count. */
export type CountingClock = RuntimeClock & { readonly pending: number };

/**
 * Resolves once `clock` has `count` timers pending (at once, or as soon as one more `setTimeout`
 * brings it there): waits for the runtime to arm a timer instead of polling `pending`. It wraps
 * the instance's `setTimeout` until then, so it works with any clock that counts its timers.
 */
export function whenArmed(
  clock: CountingClock,
  count: number,
  ms: number = WAIT_BOUND_MS,
): Promise<void> {
  if (clock.pending >= count) return Promise.resolve();
  const wrapped = clock as { setTimeout: RuntimeClock['setTimeout'] };
  const original = wrapped.setTimeout;
  const armed = new Promise<void>((resolve) => {
    wrapped.setTimeout = (callback, delay): unknown => {
      const handle = original.call(clock, callback, delay);
      if (clock.pending >= count) {
        wrapped.setTimeout = original;
        resolve();
      }
      return handle;
    };
  });
  return within(armed, `${count} armed timer(s)`, ms).finally(() => {
    wrapped.setTimeout = original;
  });
}

/**
 * A clock that only moves when told: `advance` runs the timers it passes in due order, at their
 * due time. Debounces, backoffs and graces then run without real waiting.
 */
export class FakeClock implements CountingClock {
  #now = 0;
  #next = 1;
  readonly #timers = new Map<number, { due: number; callback: () => void }>();

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { due: this.#now + ms, callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  now(): number {
    return this.#now;
  }

  /** Timers armed and not run or cleared yet. */
  get pending(): number {
    return this.#timers.size;
  }

  /** When the earliest armed timer is due, if any. */
  get nextDue(): number | undefined {
    let due: number | undefined;
    for (const timer of this.#timers.values())
      if (due === undefined || timer.due < due) due = timer.due;
    return due;
  }

  /**
   * Moves time forward by `ms`, running every timer due by then in due order (a timer armed by a
   * callback runs too if it falls due within the same advance).
   */
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      let first: [number, { due: number; callback: () => void }] | undefined;
      for (const entry of this.#timers)
        if (first === undefined || entry[1].due < first[1].due) first = entry;
      if (first === undefined || first[1].due > until) break;
      this.#timers.delete(first[0]);
      this.#now = first[1].due;
      first[1].callback();
    }
    this.#now = until;
  }
}

/** Lets every settled promise callback run (no timer involved). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}
