import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay } from '../../src/backoff.js';
import { FakeClock } from '../support/clock.js';

describe('the runtime backoff (backoff.ts)', () => {
  it('doubles from the first delay and never exceeds the cap', () => {
    const policy = { initialMs: 100, maxMs: 1000 };
    const delays = [1, 2, 3, 4, 5, 6, 40].map((failures) => backoffDelay(policy, failures));
    for (const delay of delays) expect(delay).toBeLessThanOrEqual(policy.maxMs);
    expect(delays).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
  });

  it('gives up exactly when the failures reach the attempt limit', () => {
    const policy = { initialMs: 10, maxMs: 1000, maxAttempts: 3 };
    expect(backoffDelay(policy, 1)).toBe(10);
    expect(backoffDelay(policy, 2)).toBe(20);
    expect(backoffDelay(policy, 3)).toBeUndefined();
    const backoff = new Backoff(policy);
    expect([backoff.fail(), backoff.fail(), backoff.fail()]).toEqual([10, 20, undefined]);
  });

  it('never gives up without an attempt limit, and stays finite over a long run', () => {
    const policy = { initialMs: 250, maxMs: 30_000 };
    expect(backoffDelay(policy, 10_000)).toBe(30_000);
  });

  it('starts again from the first delay after reset', () => {
    const backoff = new Backoff({ initialMs: 50, maxMs: 2000 });
    expect([backoff.fail(), backoff.fail(), backoff.fail()]).toEqual([50, 100, 200]);
    backoff.reset();
    expect(backoff.failures).toBe(0);
    expect(backoff.fail()).toBe(50);
  });

  it('arms one retry on its clock: scheduling again replaces it, cancel clears it', () => {
    const clock = new FakeClock();
    const backoff = new Backoff({ initialMs: 50, maxMs: 2000 }, clock);
    const ran: number[] = [];
    backoff.schedule(100, () => ran.push(1));
    backoff.schedule(300, () => ran.push(2));
    expect(clock.pending).toBe(1);
    expect(backoff.scheduled).toBe(true);
    clock.advance(299);
    expect(ran).toEqual([]);
    clock.advance(1);
    expect(ran).toEqual([2]);
    expect(backoff.scheduled).toBe(false);
    backoff.schedule(10, () => ran.push(3));
    backoff.cancel();
    clock.advance(1000);
    expect(ran).toEqual([2]);
    expect(clock.pending).toBe(0);
  });
});
