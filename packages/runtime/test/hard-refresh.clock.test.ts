import fc from 'fast-check';
import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import { createInMemoryFleet, propertyRun, scriptedTool } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { FakeClock, whenArmed } from './support/clock.js';

const DEBOUNCE = 100;

describe('list_changed debounce on an injected clock', () => {
  it('fires one hard refresh exactly at min(last + debounce, first + 10 debounces), never before, without real waiting', async () => {
    const { seed, numRuns } = propertyRun('hard-refresh.clock', 25);
    await fc.assert(
      fc.asyncProperty(
        // Gaps between notifications, each inside the quiet period, so they coalesce.
        fc.array(fc.integer({ min: 0, max: DEBOUNCE - 1 }), { minLength: 0, maxLength: 30 }),
        async (gaps) => {
          const clock = new FakeClock();
          const fleet = createInMemoryFleet({ a: { scenario: 'single' } });
          const events: RuntimeEvent[] = [];
          const waiters: { type: RuntimeEvent['type']; count: number; resolve: () => void }[] = [];
          const runtime = await McpRuntime.open(fleet.config(), {
            connect: fleet.connect,
            approval: 'none',
            clock,
            listChangedDebounceMs: DEBOUNCE,
            onEvent: (e) => {
              events.push(e);
              for (const w of waiters.splice(0)) {
                if (events.filter((x) => x.type === w.type).length >= w.count) w.resolve();
                else waiters.push(w);
              }
            },
          });
          const seen = (type: RuntimeEvent['type'], count: number): Promise<void> =>
            events.filter((x) => x.type === type).length >= count
              ? Promise.resolve()
              : new Promise((resolve) => waiters.push({ type, count, resolve }));
          const lists = (): number =>
            fleet.audit('a').filter((e) => e.method === 'tools/list').length;
          try {
            const server = fleet.server('a');
            server.replaceCatalog([[scriptedTool('alpha'), scriptedTool('gamma')]]);
            const baseline = lists();
            let elapsed = 0;
            let last = 0;
            for (const [i, gap] of [0, ...gaps].entries()) {
              clock.advance(gap);
              elapsed += gap;
              last = elapsed;
              await server.notifyListChanged();
              await seen('list-changed', i + 1);
              expect(lists()).toBe(baseline);
            }
            const due = Math.min(last + DEBOUNCE, 10 * DEBOUNCE);
            clock.advance(due - elapsed - 1);
            expect(lists()).toBe(baseline);
            expect(clock.pending).toBe(1);
            clock.advance(1);
            await seen('catalog-swapped', 1);
            await runtime.whenIdle();
            expect(lists() - baseline).toBe(1);
            expect(events.filter((e) => e.type === 'catalog-swapped')).toHaveLength(1);
            expect(clock.pending).toBe(0);
          } finally {
            await runtime.close();
            await fleet.close();
          }
        },
      ),
      { seed, numRuns },
    );
  });

  it('waits the optional-server grace of a capture on the injected clock, not on real time', async () => {
    const clock = new FakeClock();
    const fleet = createInMemoryFleet({ a: { scenario: 'single' }, slow: { scenario: 'single' } });
    const runtime = await McpRuntime.open(fleet.config({ slow: { required: false } }), {
      // "slow" never finishes starting; its start is cancelled by close().
      connect: (name, config, options) =>
        name === 'slow'
          ? new Promise((_, reject) => {
              options.signal.addEventListener('abort', () =>
                reject(options.signal.reason as Error),
              );
            })
          : fleet.connect(name, config, options),
      approval: 'none',
      clock,
      optionalGraceMs: 500,
    });
    try {
      let captured = false;
      const capture = runtime.captureBinding().then((binding) => {
        captured = true;
        return binding;
      });
      await whenArmed(clock, 1);
      expect(clock.pending).toBe(1);
      clock.advance(499);
      await Promise.resolve();
      expect(captured).toBe(false);
      clock.advance(1);
      await using binding = await capture;
      expect(binding.servers.find((s) => s.name === 'slow')).toMatchObject({
        bound: false,
        reason: 'starting',
      });
      expect(clock.pending).toBe(0);
    } finally {
      await runtime.close();
      await fleet.close();
    }
  });
});
