import type { StepbindError } from '@stepbind/binding/internal';
import { Backoff, type BackoffPolicy } from '../backoff.js';
import type { RuntimeClock } from '../clock.js';
import { toStepbindError } from '../failures.js';
import type { Connection } from '../connection.js';

/** Options of {@link ReconnectLoop}. */
export interface ReconnectLoopOptions {
  /** The timers of the backoff (the runtime's clock). */
  readonly clock: RuntimeClock;
  /** Delays and attempt limit (`maxAttempts` 0 turns the loop off). */
  readonly policy: BackoffPolicy;
  /** The runtime is open and the server is not closing. */
  readonly active: () => boolean;
  /** The server still serves in the current ConnectionSet (one a refresh dropped is closing anyway). */
  readonly inService: () => boolean;
  /** The server's connection is still lost (another path may have reconnected it meanwhile). */
  readonly lost: () => boolean;
  /** One reconnect attempt. */
  readonly attempt: () => Promise<void>;
  /** An error that retrying cannot fix (a catalog or identity the registry refuses): give up. */
  readonly isFinal: (error: StepbindError) => boolean;
  /** Attempt number `attempt` failed; `nextDelayMs` is absent when the loop gave up. */
  readonly onFailed: (
    attempt: number,
    error: StepbindError,
    nextDelayMs: number | undefined,
  ) => void;
  /** Registers an attempt as background work (awaited by the runtime's `close()`). */
  readonly track: (work: Promise<void>) => void;
}

/** What `status()` shows of a server's background reconnects. */
export interface ReconnectState {
  /** Attempts made since the loss (or since the last `server-reconnected`). */
  readonly attempts: number;
  /** The loop stopped on its own (attempt limit, a final error, or turned off). */
  readonly gaveUp: boolean;
  /** The error of the last failed attempt. */
  readonly lastError: StepbindError | undefined;
}

/**
 * The background reconnects of one server whose HTTP session was lost (DESIGN §6): the first
 * attempt at once, then the runtime's backoff (`backoff.ts`) until one succeeds, the attempt limit
 * is reached or an error is final. Each failure is reported with the delay of the next attempt.
 */
export class ReconnectLoop {
  readonly #options: ReconnectLoopOptions;
  readonly #backoff: Backoff;
  #attempts = 0;
  #running = false;
  #gaveUp = false;
  #lastError: StepbindError | undefined;

  constructor(options: ReconnectLoopOptions) {
    this.#options = options;
    this.#backoff = new Backoff(options.policy, options.clock);
  }

  /** The loop's state, for `status()`. */
  get state(): ReconnectState {
    return { attempts: this.#attempts, gaveUp: this.#gaveUp, lastError: this.#lastError };
  }

  /** Starts the loop after a loss, unless it already runs. */
  start(): void {
    if (this.#backoff.scheduled || this.#running) return;
    this.#attempts = 0;
    this.#backoff.reset();
    this.#lastError = undefined;
    // With background reconnects off, status says so: only a refresh, capture or hardRefresh reopens.
    this.#gaveUp = (this.#options.policy.maxAttempts ?? Infinity) <= 0;
    if (this.#gaveUp) return;
    this.#schedule(0);
  }

  /** Clears the scheduled attempt (a running attempt stops on the runtime's close signal). */
  stop(): void {
    this.#backoff.cancel();
  }

  /** A new connection was installed (by this loop or another path): nothing is left to retry. */
  reconnected(): void {
    this.#lastError = undefined;
    this.#gaveUp = false;
    this.#backoff.cancel();
  }

  /** The attempts made until the reconnect, for `server-reconnected`; the count starts again. */
  takeAttempts(): number {
    const attempts = this.#attempts;
    this.#attempts = 0;
    return attempts;
  }

  #schedule(delayMs: number): void {
    if (!this.#options.active()) return;
    this.#backoff.schedule(delayMs, () => this.#run());
  }

  #run(): void {
    const { active, inService, lost } = this.#options;
    if (!active() || !inService() || !lost()) return;
    this.#attempts++;
    this.#running = true;
    const attempt = this.#attempts;
    const run = this.#options.attempt().then(
      () => {
        this.#running = false;
      },
      (error: unknown) => {
        this.#running = false;
        if (!active() || !lost()) return;
        const mapped = toStepbindError(error);
        this.#lastError = mapped;
        const delay = this.#backoff.fail();
        const nextDelayMs = this.#options.isFinal(mapped) ? undefined : delay;
        if (nextDelayMs === undefined) this.#gaveUp = true;
        this.#options.onFailed(attempt, mapped, nextDelayMs);
        if (nextDelayMs !== undefined) this.#schedule(nextDelayMs);
      },
    );
    this.#options.track(run);
  }
}

/** The status message of a lost HTTP session: why, the last attempt, and what happens next. */
export function lossMessage(loss: NonNullable<Connection['lost']>, state: ReconnectState): string {
  const last =
    state.lastError === undefined
      ? ''
      : ` Last reconnect attempt: ${state.lastError.code}: ${state.lastError.message.split('\n')[0] ?? ''}`;
  const next = state.gaveUp
    ? ` Gave up after ${state.attempts} attempts; the next refresh, capture or hardRefresh tries again.`
    : ' Reconnecting.';
  return `The HTTP session ended: ${loss.message}.${last}${next}`;
}
