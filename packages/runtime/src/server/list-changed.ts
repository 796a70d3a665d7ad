import type { RuntimeClock, TimerHandle } from '../clock.js';

/** A steady stream of notifications never postpones the work past this many quiet periods. */
export const MAX_QUIET_PERIODS = 10;

/** Options of {@link ListChangedDebouncer}. */
export interface ListChangedDebouncerOptions {
  /** The timers of the quiet period (the runtime's clock). */
  readonly clock: RuntimeClock;
  /** The quiet period: the work runs this long after the last notification. */
  readonly debounceMs: number;
  /** The work (one hard refresh). It reports its own failures: a rejection is ignored. */
  readonly run: () => Promise<void>;
  /** Whether the work may still be re-armed (the runtime is open, the server not closing). */
  readonly active: () => boolean;
}

/**
 * The `list_changed` trigger of one server's hard refresh (DESIGN §6): a trailing debounce on the
 * runtime's clock, never postponed past {@link MAX_QUIET_PERIODS} quiet periods by a steady stream;
 * storms coalesce: at most one run is in flight, and notifications during it only mark it to run
 * once more after it (armed again for a full quiet period).
 */
export class ListChangedDebouncer {
  readonly #options: ListChangedDebouncerOptions;
  #timer: TimerHandle = undefined;
  /** When the armed debounce was first armed (the 10-period cap counts from here). */
  #startedAt = 0;
  #running = false;
  /** A notification arrived while the work ran: run once more after it. */
  #again = false;
  #idle: { readonly promise: Promise<void>; readonly resolve: () => void } | undefined;

  constructor(options: ListChangedDebouncerOptions) {
    this.#options = options;
  }

  /**
   * Resolves when no debounce is armed and no fired run is in flight; `undefined` when already
   * idle.
   */
  get idle(): Promise<void> | undefined {
    return this.#idle?.promise;
  }

  /** True while a debounce is armed. */
  get armed(): boolean {
    return this.#timer !== undefined;
  }

  /** One notification: (re)arms the debounce, or marks the run in flight to run once more. */
  notify(): void {
    if (this.#idle === undefined) {
      let resolve: () => void = () => undefined;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.#idle = { promise, resolve };
    }
    if (this.#running) this.#again = true;
    else this.#arm(this.#options.clock.now());
  }

  /** Clears the armed debounce and releases the idle waiters; a run in flight is not re-armed. */
  stop(): void {
    if (this.#timer !== undefined) this.#options.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#again = false;
    const idle = this.#idle;
    this.#idle = undefined;
    idle?.resolve();
  }

  #arm(now: number): void {
    const { clock, debounceMs } = this.#options;
    if (this.#timer === undefined) this.#startedAt = now;
    else clock.clearTimeout(this.#timer);
    const wait = Math.max(
      0,
      Math.min(debounceMs, this.#startedAt + MAX_QUIET_PERIODS * debounceMs - now),
    );
    this.#timer = clock.setTimeout(() => this.#fire(), wait);
  }

  #fire(): void {
    this.#timer = undefined;
    this.#running = true;
    this.#again = false;
    const done = (): void => {
      this.#running = false;
      if (this.#again && this.#options.active()) {
        this.#again = false;
        this.#arm(this.#options.clock.now());
      }
      this.#settle();
    };
    void this.#options.run().then(done, done);
  }

  #settle(): void {
    if (this.#timer !== undefined || this.#running || this.#idle === undefined) return;
    const { resolve } = this.#idle;
    this.#idle = undefined;
    resolve();
  }
}
