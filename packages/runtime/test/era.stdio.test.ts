import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isStepbindError } from '@stepbind/binding';
import { createEventLog } from '@stepbind/testkit';
import { McpRuntime } from '../src/index.js';

const RAW = fileURLToPath(new URL('../../testkit/dist/era/raw-server.js', import.meta.url));

function config(mode: string): unknown {
  return {
    mcpServers: {
      s: { command: process.execPath, args: [RAW, mode], required: true, approval: 'none' },
    },
  };
}

describe('protocol era per stdio server', () => {
  it('a 2026-07-28 server is discovered, listed page by page with the envelope and called', async () => {
    const runtime = await McpRuntime.open(config('modern'));
    try {
      const snapshot = runtime.registry.current('s', 'default');
      expect(snapshot?.identity.protocolVersion).toBe('2026-07-28');
      expect(snapshot?.identity.serverInfo).toEqual({ name: 'raw-era-server', version: '1.0.0' });
      await using step = await runtime.captureBinding();
      expect(step.tools.map((t) => t.name).sort()).toEqual(['s__ask', 's__change', 's__echo']);
      const { result } = await step.prepareCall('s__echo').run({});
      expect(result.content).toEqual([{ type: 'text', text: 'echo {}' }]);
    } finally {
      await runtime.close();
    }
  });

  it('an input_required result goes to the elicitation handler and is retried with its answers and requestState', async () => {
    const asked: unknown[] = [];
    const runtime = await McpRuntime.open(config('modern'), {
      onElicitation: (request) => {
        asked.push(request.message);
        return Promise.resolve({ action: 'accept', content: { ok: true } });
      },
    });
    try {
      await using step = await runtime.captureBinding();
      const { result } = await step.prepareCall('s__ask').run({});
      expect(asked).toEqual(['Confirm?']);
      const text = (result.content?.[0] as { text: string }).text;
      expect(JSON.parse(text)).toEqual({
        responses: { confirm: { action: 'accept', content: { ok: true } } },
        state: 'state-1',
      });
    } finally {
      await runtime.close();
    }
  });

  it('without an elicitation handler an input_required call fails INPUT_REQUIRED naming what was asked', async () => {
    const runtime = await McpRuntime.open(config('modern'));
    try {
      await using step = await runtime.captureBinding();
      const error: unknown = await step
        .prepareCall('s__ask')
        .run({})
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(isStepbindError(error, 'INPUT_REQUIRED')).toBe(true);
      expect((error as Error).message).toContain('Confirm?');
    } finally {
      await runtime.close();
    }
  });

  it('a list_changed on the subscriptions/listen stream triggers the hard refresh', async () => {
    const log = createEventLog();
    const runtime = await McpRuntime.open(config('modern'), {
      onEvent: log.onEvent,
      listChangedDebounceMs: 1,
    });
    try {
      const swapped = log.next('catalog-swapped');
      {
        await using step = await runtime.captureBinding();
        await step.prepareCall('s__change').run({});
      }
      await swapped;
      await using after = await runtime.captureBinding();
      expect(after.tools.map((t) => t.name)).toContain('s__added');
    } finally {
      await runtime.close();
    }
  });

  for (const mode of ['hang-discover', 'garbage-discover']) {
    it(`a legacy server that ${mode === 'hang-discover' ? 'never answers' : 'answers garbage to'} server/discover falls back to initialize`, async () => {
      const runtime = await McpRuntime.open(config(mode));
      try {
        const snapshot = runtime.registry.current('s', 'default');
        expect(snapshot?.identity.protocolVersion).toBe('2025-11-25');
        await using step = await runtime.captureBinding();
        const { result } = await step.prepareCall('s__echo').run({});
        expect(result.content).toEqual([{ type: 'text', text: 'legacy echo' }]);
      } finally {
        await runtime.close();
      }
    });
  }
});
