import { CatalogError, ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { ReconnectLoop } from '../../src/server/reconnect-loop.js';
import { FakeClock, flush } from '../support/clock.js';

interface Failure {
  readonly at: number;
  readonly attempt: number;
  readonly code: string;
  readonly nextDelayMs: number | undefined;
}

/** A loop whose attempts fail with `error()` until `succeed` is set; every failure is recorded. */
function setup(options: { maxAttempts?: number; error?: () => Error } = {}) {
  const clock = new FakeClock();
  const failures: Failure[] = [];
  const attempts: number[] = [];
  const work: Promise<void>[] = [];
  const state = { lost: true, succeed: false };
  const loop = new ReconnectLoop({
    clock,
    policy: { initialMs: 250, maxMs: 2000, maxAttempts: options.maxAttempts ?? 10 },
    active: () => true,
    inService: () => true,
    lost: () => state.lost,
    attempt: () => {
      attempts.push(clock.now());
      if (state.succeed) {
        state.lost = false;
        return Promise.resolve();
      }
      return Promise.reject(
        options.error?.() ?? new RuntimeError(ErrorCode.SERVER_START_FAILED, 'refused'),
      );
    },
    isFinal: (error) => error instanceof CatalogError,
    onFailed: (attempt, error, nextDelayMs) =>
      failures.push({ at: clock.now(), attempt, code: error.code, nextDelayMs }),
    track: (promise) => work.push(promise),
  });
  /** Runs the armed attempt (if any) and lets it settle. */
  const step = async (): Promise<void> => {
    const due = clock.nextDue;
    if (due !== undefined) clock.advance(due - clock.now());
    await flush();
  };
  return { clock, loop, failures, attempts, state, step, work };
}

describe('the background reconnects of a lost server (server/reconnect-loop.ts)', () => {
  it('tries at once, then waits 250 ms doubling to the 2 s cap between failed attempts', async () => {
    const { loop, failures, attempts, step } = setup();
    loop.start();
    for (let i = 0; i < 6; i++) await step();
    expect(attempts).toEqual([0, 250, 750, 1750, 3750, 5750]);
    expect(failures.map((f) => f.nextDelayMs)).toEqual([250, 500, 1000, 2000, 2000, 2000]);
    expect(failures.map((f) => f.attempt)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(loop.state).toMatchObject({ attempts: 6, gaveUp: false });
  });

  it('gives up after maxAttempts failed attempts: the last failure has no next delay and nothing stays armed', async () => {
    const { clock, loop, failures, attempts, step } = setup({ maxAttempts: 3 });
    loop.start();
    for (let i = 0; i < 5; i++) await step();
    expect(attempts).toHaveLength(3);
    expect(failures.map((f) => f.nextDelayMs)).toEqual([250, 500, undefined]);
    expect(loop.state).toMatchObject({ attempts: 3, gaveUp: true });
    expect(loop.state.lastError?.code).toBe(ErrorCode.SERVER_START_FAILED);
    expect(clock.pending).toBe(0);
  });

  it('gives up at once on an error retrying cannot fix (a refused catalog)', async () => {
    const { clock, loop, failures, step } = setup({
      error: () => new CatalogError(ErrorCode.PUBLISH_CONFLICT, 'refused'),
    });
    loop.start();
    await step();
    expect(failures).toEqual([
      { at: 0, attempt: 1, code: ErrorCode.PUBLISH_CONFLICT, nextDelayMs: undefined },
    ]);
    expect(loop.state.gaveUp).toBe(true);
    expect(clock.pending).toBe(0);
  });

  it('is off with maxAttempts 0: it says it gave up and tries nothing', async () => {
    const { clock, loop, attempts, step } = setup({ maxAttempts: 0 });
    loop.start();
    await step();
    expect(attempts).toEqual([]);
    expect(loop.state.gaveUp).toBe(true);
    expect(clock.pending).toBe(0);
  });

  it('starts again from the first delay after a reconnect (the count and the backoff reset)', async () => {
    const { clock, loop, failures, attempts, state, step } = setup();
    loop.start();
    for (let i = 0; i < 3; i++) await step();
    expect(failures.map((f) => f.nextDelayMs)).toEqual([250, 500, 1000]);
    state.succeed = true;
    await step();
    loop.reconnected();
    expect(loop.takeAttempts()).toBe(4);
    expect(loop.state).toEqual({ attempts: 0, gaveUp: false, lastError: undefined });
    // Lost again later: the first attempt at once, then the first delay again.
    state.lost = true;
    state.succeed = false;
    const lostAt = clock.now();
    loop.start();
    await step();
    await step();
    expect(attempts.slice(4)).toEqual([lostAt, lostAt + 250]);
    expect(failures.slice(3).map((f) => [f.attempt, f.nextDelayMs])).toEqual([
      [1, 250],
      [2, 500],
    ]);
  });

  it('stops without a report when the server was reconnected by another path meanwhile', async () => {
    const { clock, loop, failures, attempts, state, step } = setup();
    loop.start();
    await step();
    state.lost = false;
    await step();
    expect(attempts).toHaveLength(1);
    expect(failures).toHaveLength(1);
    expect(clock.pending).toBe(0);
  });
});
