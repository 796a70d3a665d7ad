/**
 * The idle stop of a lazy server (DESIGN §19.3): its calls are counted, and once none has run
 * for `idleTimeoutMs` (on the runtime's clock) the runtime is told.
 *
 * @packageDocumentation
 */
import type { ToolCaller } from '@stepbind/binding/internal';
import type { RuntimeClock, TimerHandle } from '../clock.js';
import type { Connection } from '../connection.js';

/** Options of {@link IdleWatch}. */
export interface IdleWatchOptions {
  readonly clock: RuntimeClock;
  /** Quiet time before {@link IdleWatchOptions.onIdle}, in ms (positive). */
  readonly idleMs: number;
  /** Called once the server ran no call for `idleMs` and none is in flight. */
  readonly onIdle: () => void;
}

/**
 * Counts the calls of one server and arms a timer whenever none is in flight. The callers it
 * hands out are the connection's own `callTool` with the count around it; `closed` and `fault`
 * read through to the connection.
 */
export class IdleWatch {
  readonly #options: IdleWatchOptions;
  #inFlight = 0;
  #timer: TimerHandle = undefined;
  #stopped = false;
  readonly #callers = new WeakMap<Connection, ToolCaller>();

  constructor(options: IdleWatchOptions) {
    this.#options = options;
  }

  /** Calls in flight through {@link callerOf}. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** The counted caller of `connection` (one per connection: a reconnect gets a new one). */
  callerOf(connection: Connection): ToolCaller {
    let caller = this.#callers.get(connection);
    if (caller === undefined) {
      caller = {
        get closed() {
          return connection.closed;
        },
        get fault() {
          return connection.fault;
        },
        callTool: (tool, args, options) => {
          this.#enter();
          return connection.callTool(tool, args, options).finally(() => this.#leave());
        },
      };
      this.#callers.set(connection, caller);
    }
    return caller;
  }

  /** (Re)starts the quiet period, unless a call is in flight or the watch stopped. */
  arm(): void {
    if (this.#stopped || this.#inFlight > 0) return;
    this.#clear();
    const timer = this.#options.clock.setTimeout(() => {
      this.#timer = undefined;
      if (!this.#stopped && this.#inFlight === 0) this.#options.onIdle();
    }, this.#options.idleMs);
    // A real timer must not keep the host alive on its own (close() clears it anyway).
    (timer as { unref?: () => void } | undefined)?.unref?.();
    this.#timer = timer;
  }

  /** Clears the timer for good (the server stops or closes). Idempotent. */
  stop(): void {
    this.#stopped = true;
    this.#clear();
  }

  #enter(): void {
    this.#inFlight++;
    this.#clear();
  }

  #leave(): void {
    this.#inFlight--;
    this.arm();
  }

  #clear(): void {
    if (this.#timer !== undefined) this.#options.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
