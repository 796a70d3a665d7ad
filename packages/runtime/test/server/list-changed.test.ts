import { describe, expect, it } from 'vitest';
import { ListChangedDebouncer, MAX_QUIET_PERIODS } from '../../src/server/list-changed.js';
import { FakeClock, flush } from '../support/clock.js';

const DEBOUNCE = 100;

/** A debouncer whose runs are counted and finish only when the test says so. */
function setup(options: { active?: () => boolean } = {}) {
  const clock = new FakeClock();
  const runs: { readonly at: number; readonly finish: () => void }[] = [];
  const debouncer = new ListChangedDebouncer({
    clock,
    debounceMs: DEBOUNCE,
    active: options.active ?? (() => true),
    run: () =>
      new Promise<void>((resolve) => {
        runs.push({ at: clock.now(), finish: resolve });
      }),
  });
  return { clock, runs, debouncer };
}

describe('the list_changed debouncer (server/list-changed.ts)', () => {
  it('coalesces a storm of notifications inside the quiet period into one run, a quiet period after the last', () => {
    const { clock, runs, debouncer } = setup();
    for (let i = 0; i < 8; i++) {
      debouncer.notify();
      clock.advance(DEBOUNCE - 1);
    }
    expect(runs).toHaveLength(0);
    // The last notification came at 7 * 99; the run is due one quiet period after it.
    clock.advance(1);
    expect(runs.map((r) => r.at)).toEqual([7 * (DEBOUNCE - 1) + DEBOUNCE]);
    expect(clock.pending).toBe(0);
  });

  it(`never postpones the run past ${MAX_QUIET_PERIODS} quiet periods under a steady stream`, () => {
    const { clock, runs, debouncer } = setup();
    // A notification every half period for 30 periods: without the cap nothing would ever run.
    for (let t = 0; t < 30 * DEBOUNCE; t += DEBOUNCE / 2) {
      if (runs.length === 0) debouncer.notify();
      clock.advance(DEBOUNCE / 2);
    }
    expect(runs.map((r) => r.at)).toEqual([MAX_QUIET_PERIODS * DEBOUNCE]);
  });

  it('runs once more after a run that notifications arrived during, however many, and then settles', async () => {
    const { clock, runs, debouncer } = setup();
    debouncer.notify();
    const idle = debouncer.idle;
    expect(idle).toBeDefined();
    clock.advance(DEBOUNCE);
    expect(runs).toHaveLength(1);
    // Three notifications while the run is in flight: no second run starts meanwhile.
    debouncer.notify();
    debouncer.notify();
    debouncer.notify();
    clock.advance(10 * DEBOUNCE);
    expect(runs).toHaveLength(1);
    runs[0]?.finish();
    await flush();
    // Armed again for a full quiet period from the end of the run.
    const finishedAt = clock.now();
    expect(clock.nextDue).toBe(finishedAt + DEBOUNCE);
    clock.advance(DEBOUNCE);
    expect(runs.map((r) => r.at)).toEqual([DEBOUNCE, finishedAt + DEBOUNCE]);
    runs[1]?.finish();
    await flush();
    expect(clock.pending).toBe(0);
    expect(debouncer.idle).toBeUndefined();
    await expect(idle).resolves.toBeUndefined();
  });

  it('does not run again after a run when it is no longer active (the server closes)', async () => {
    let active = true;
    const { clock, runs, debouncer } = setup({ active: () => active });
    debouncer.notify();
    clock.advance(DEBOUNCE);
    debouncer.notify();
    active = false;
    runs[0]?.finish();
    await flush();
    expect(clock.pending).toBe(0);
    expect(debouncer.idle).toBeUndefined();
  });

  it('stop clears the armed debounce and releases the idle waiters', async () => {
    const { clock, runs, debouncer } = setup();
    debouncer.notify();
    const idle = debouncer.idle;
    debouncer.stop();
    expect(clock.pending).toBe(0);
    await expect(idle).resolves.toBeUndefined();
    clock.advance(10 * DEBOUNCE);
    expect(runs).toHaveLength(0);
  });
});
