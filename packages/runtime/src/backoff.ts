import { systemClock, type RuntimeClock, type TimerHandle } from './clock.js';

/**
 * The one exponential backoff of the runtime: the reconnects of a lost HTTP session
 * (`server/reconnect-loop.ts`), the re-listens of a modern connection (`era/listen.ts`), the fleet
 * policy listener (`fleet/policy.ts`) and the PostgreSQL retries (`fleet/pg.ts`) all count their
 * failures here and wait on an injectable clock. (The SQLite lock wait in `journal/sqlite-busy.ts`
 * keeps its own millisecond pauses: it polls a lock inside one call's deadline, it does not retry.)
 *
 * The rule: after failure number `n` (1-based) the next try waits `min(maxMs, initialMs * 2^(n-1))`,
 * unless `n` reached `maxAttempts` (then the caller gives up). `reset()` starts again from the
 * first delay; each caller says when (a reconnect that succeeded, a stream that proved healthy).
 */

/** How a backoff grows and when it gives up. */
export interface BackoffPolicy {
  /** Delay after the first failure. */
  readonly initialMs: number;
  /** Upper bound of one delay. */
  readonly maxMs: number;
  /** Failures after which there is no next try. @default Infinity (never gives up) */
  readonly maxAttempts?: number;
}

/**
 * The delay before the try that follows failure number `failures` (1-based), or `undefined` when
 * `failures` reached the policy's attempt limit.
 */
export function backoffDelay(policy: BackoffPolicy, failures: number): number | undefined {
  if (failures >= (policy.maxAttempts ?? Infinity)) return undefined;
  // The exponent is bounded so a long run never overflows to Infinity before the cap applies.
  return Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(Math.max(0, failures - 1), 30));
}

/**
 * One retry loop's backoff: counts failures, says the next delay (or that the loop gives up), and
 * arms at most one retry timer on its clock. Not reentrant; one owner.
 */
export class Backoff {
  readonly #policy: BackoffPolicy;
  readonly #clock: RuntimeClock;
  #failures = 0;
  #timer: TimerHandle = undefined;

  /** @param clock the timers of the retries. @default systemClock */
  constructor(policy: BackoffPolicy, clock: RuntimeClock = systemClock) {
    this.#policy = policy;
    this.#clock = clock;
  }

  /** Failures counted since the last {@link reset}. */
  get failures(): number {
    return this.#failures;
  }

  /** True while a retry is armed and has not run. */
  get scheduled(): boolean {
    return this.#timer !== undefined;
  }

  /**
   * Counts one failure. @returns the delay before the next try, or `undefined` when the attempt
   * limit is spent (the loop gives up).
   */
  fail(): number | undefined {
    this.#failures++;
    return backoffDelay(this.#policy, this.#failures);
  }

  /** Starts again from the first delay (the loop succeeded, or a run proved healthy). */
  reset(): void {
    this.#failures = 0;
  }

  /**
   * Runs `retry` once after `delayMs` on the clock, replacing a retry armed before.
   * @param unref let the process exit while only this timer is armed (real timers only).
   */
  schedule(delayMs: number, retry: () => void, options: { readonly unref?: boolean } = {}): void {
    this.cancel();
    const timer = this.#clock.setTimeout(() => {
      if (this.#timer === timer) this.#timer = undefined;
      retry();
    }, delayMs);
    this.#timer = timer;
    if (options.unref === true) (timer as { unref?: () => void } | undefined)?.unref?.();
  }

  /** Clears the armed retry, if any (a retry that already ran is not undone). */
  cancel(): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
