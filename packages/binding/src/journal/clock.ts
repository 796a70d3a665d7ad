/**
 * The journal's time (DESIGN §13, §15): where timestamps come from, and how late the journal may
 * be sure it is when it decides that a record expired or a holder's lease ran out. A wrong answer
 * to the second question forgets a completed key, which is then sent again.
 *
 * @packageDocumentation
 */
import type { JournalStore, StoreCallOptions, StoreClock } from './store.js';

/** The clocks a {@link JournalTime} reads; tests inject them. */
export interface JournalClocks {
  /** The wall clock, read once at open. @default Date.now */
  readonly wall?: () => number;
  /** A monotonic clock in milliseconds (never jumps). @default performance.now */
  readonly monotonic?: () => number;
}

/**
 * The journal's time over `store`:
 *
 * - an injected `now` is trusted as is and replaces every other clock (tests, applications with
 *   their own time source);
 * - else a store with its own clock (PostgreSQL: the database's) gives every timestamp, and
 *   decisions use that clock less its uncertainty, so no worker's own clock matters;
 * - else the wall clock is read once, at open, and advanced by a monotonic clock, so a jump of the
 *   wall clock while running changes nothing; and a wall clock that puts the store's newest write
 *   (see {@link JournalStore.newestWrite}) further in the past than the monotonic time elapsed
 *   since it was read is not believed for decisions: nothing the store wrote last is taken as
 *   expired because the clock jumped while no process ran. The price: after a real idle period,
 *   records expire later by that period (never earlier).
 */
export class JournalTime {
  readonly #store: JournalStore;
  readonly #now: () => number;
  readonly #monotonic: () => number;
  readonly #trusted: boolean;
  readonly #storeClock: StoreClock | undefined;
  /** The newest write at open and the monotonic time it was read at, once read. */
  #guard: Promise<{ readonly newest: number; readonly at: number } | undefined> | undefined;

  constructor(store: JournalStore, now?: () => number, clocks: JournalClocks = {}) {
    this.#store = store;
    const monotonic = clocks.monotonic ?? (() => performance.now());
    this.#monotonic = monotonic;
    const storeClock = now === undefined ? store.clock : undefined;
    this.#storeClock = storeClock;
    if (now !== undefined) {
      this.#now = now;
      this.#trusted = true;
    } else if (storeClock !== undefined) {
      this.#now = () => storeClock.now();
      this.#trusted = true;
    } else {
      const wall0 = (clocks.wall ?? Date.now)();
      const mono0 = monotonic();
      this.#now = () => Math.round(wall0 + monotonic() - mono0);
      this.#trusted = false;
    }
  }

  /** Epoch milliseconds for what the journal writes (record times, expiries, receipts). */
  now(): number {
    return this.#now();
  }

  /**
   * The latest instant the journal is sure has passed ({@link now} less the store clock's
   * uncertainty): what lease decisions compare against. Taking a lease over early is safe (the
   * holder's next write is a compare-and-set that fails), so no further guard applies.
   */
  leaseNow(): number {
    return this.#now() - (this.#storeClock?.uncertaintyMs ?? 0);
  }

  /**
   * The instant retention decisions compare against (a record expired, a key forgotten, a prune):
   * {@link leaseNow}, capped by the newest-write guard for the default clock. Forgetting a key
   * early sends it again, so this is never later than the journal can vouch for.
   */
  async retentionNow(options: StoreCallOptions = {}): Promise<number> {
    const now = this.leaseNow();
    if (this.#trusted || this.#store.newestWrite === undefined) return now;
    this.#guard ??= this.#store.newestWrite(options).then(
      (newest) => (newest === undefined ? undefined : { newest, at: this.#monotonic() }),
      (error: unknown) => {
        this.#guard = undefined;
        throw error;
      },
    );
    const guard = await this.#guard;
    if (guard === undefined) return now;
    return Math.min(now, Math.round(guard.newest + this.#monotonic() - guard.at));
  }
}
