import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStepbindError } from '@stepbind/binding';
import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import { scriptedTool, stdioServerParams } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-tool-filter-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('tool filters over a real stdio server', () => {
  it('refuse a multi-megabyte tool name with INVALID_TOOL_NAME before any glob sees it', async () => {
    const huge = 'a'.repeat(4 * 1024 * 1024);
    const fixturePath = join(dir, 'huge-name.json');
    await writeFile(
      fixturePath,
      JSON.stringify({
        generations: [
          { pages: [{ tools: [scriptedTool('read_file'), { ...scriptedTool('x'), name: huge }] }] },
        ],
      }),
    );
    // The first verdict on "s": ready, or failed with the error that refused it.
    let settle: (event: RuntimeEvent) => void = () => undefined;
    const verdict = new Promise<RuntimeEvent>((resolve) => (settle = resolve));
    // Timer ticks while the listing is read and filtered: the event loop keeps turning.
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 1);
    try {
      await using runtime = await McpRuntime.open(
        {
          mcpServers: {
            s: {
              ...stdioServerParams({ scenario: 'fixture', fixturePath }),
              required: false,
              tools: { allow: ['*_file'] },
            },
          },
        },
        {
          onEvent: (e) => {
            if (e.type === 'server-failed' || e.type === 'server-ready') settle(e);
          },
        },
      );
      const failed = await verdict;
      // Without the length check first, `*_file` silently dropped the huge name and "s" was ready.
      expect(failed?.type === 'server-failed' && failed.error.code).toBe('INVALID_TOOL_NAME');
      if (failed?.type !== 'server-failed') return;
      expect(isStepbindError(failed.error, 'INVALID_TOOL_NAME')).toBe(true);
      expect(failed.error.message).toContain(`(${huge.length} characters)`);
      expect(failed.error.message.length).toBeLessThan(1000);
      expect(JSON.stringify(failed.error.detail).length).toBeLessThan(1000);
      expect(runtime.status().servers.find((s) => s.name === 's')?.state).not.toBe('ready');
    } finally {
      clearInterval(ticker);
    }
    expect(ticks).toBeGreaterThan(0);
  });
});
