import { McpRuntime } from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';

const warnings: Error[] = [];
const onWarning = (warning: Error): void => void warnings.push(warning);
afterEach(() => {
  process.off('warning', onWarning);
  warnings.length = 0;
});

describe('hostile: many calls at once', () => {
  it('1,000 concurrent calls over stdio (one shared signal) print no listener warnings', async () => {
    process.on('warning', onWarning);
    await using runtime = await McpRuntime.open(
      { mcpServers: { s: { ...stdioServerParams({ scenario: 'single' }), approval: 'none' } } },
      {},
    );
    await using step = await runtime.captureBinding();
    const controller = new AbortController();
    const results = await Promise.allSettled(
      Array.from({ length: 1000 }, () =>
        step.prepareCall('s__alpha').run({}, { signal: controller.signal }),
      ),
    );
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    // Warnings are emitted on the next tick of the event loop.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([]);
  });
});
