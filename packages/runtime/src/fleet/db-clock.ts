/**
 * The database's clock as a worker sees it (DESIGN §15): measured against `clock_timestamp()`
 * over one round trip (± half of it) and carried forward between measurements by this host's
 * monotonic clock, so neither this host's wall clock nor a jump of it moves fleet time.
 */
import type { StoreClock } from '@stepbind/binding/internal';

/** SQL of the database's time in epoch milliseconds. */
export const DB_NOW_SQL = '(extract(epoch FROM clock_timestamp()) * 1000)::float8';

/** A {@link StoreClock} on the database's time; {@link observe} feeds it measurements. */
export class DatabaseClock implements StoreClock {
  readonly #monotonic: () => number;
  /** The database's time at the last measurement, and the monotonic instant it maps to. */
  #dbAt = Number.NaN;
  #monoAt = 0;
  #uncertaintyMs = 0;

  /** @param monotonic a clock that never jumps (tests inject one). */
  constructor(monotonic: () => number = () => performance.now()) {
    this.#monotonic = monotonic;
  }

  /** True once measured. */
  get measured(): boolean {
    return !Number.isNaN(this.#dbAt);
  }

  /** Half the round trip of the measurement in use. */
  get uncertaintyMs(): number {
    return this.#uncertaintyMs;
  }

  /**
   * The database's time now, epoch milliseconds (this host's clock until the first measurement:
   * `attachFleet` measures before anything runs).
   */
  now(): number {
    if (!this.measured) return Date.now();
    return Math.round(this.#dbAt + this.#monotonic() - this.#monoAt);
  }

  /** Monotonic time, to bracket a query that reads the database's time. */
  mark(): number {
    return this.#monotonic();
  }

  /**
   * Records a measurement: `dbNow` read by a query sent at monotonic `before` and answered at
   * `after`. Kept when it is at least as precise as the one in use or that one is older than a
   * minute (so a slow round trip does not widen the uncertainty for long).
   */
  observe(before: number, dbNow: number, after: number): void {
    if (!Number.isFinite(dbNow)) return;
    const uncertainty = (after - before) / 2;
    const stale = after - this.#monoAt > 60_000;
    if (this.measured && !stale && uncertainty > this.#uncertaintyMs) return;
    this.#dbAt = dbNow;
    this.#monoAt = (before + after) / 2;
    this.#uncertaintyMs = uncertainty;
  }
}
