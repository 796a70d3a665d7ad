import type { RuntimeClock, TimerHandle } from '../../src/clock.js';

/**
 * A {@link RuntimeClock} that only moves when told: `advance` runs the timers it passes in due
 * order (a timer armed by a callback runs too if it falls due within the same advance).
 */
export class FakeClock implements RuntimeClock {
  #now = 0;
  #next = 1;
  readonly #timers = new Map<number, { due: number; callback: () => void }>();

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const id = this.#next++;
    this.#timers.set(id, { due: this.#now + ms, callback });
    return id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#timers.delete(handle as number);
  }

  now(): number {
    return this.#now;
  }

  /** Timers armed and not run yet. */
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
