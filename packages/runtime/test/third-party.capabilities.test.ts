import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { McpRuntime, type ElicitationRequest, type SamplingRequest } from '@stepbind/runtime';
import { isProcessAlive } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const everything = join(
  dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')),
  'dist',
  'index.js',
);
const config = (roots: string[] = []): unknown => ({
  mcpServers: {
    everything: {
      command: process.execPath,
      args: [everything, 'stdio'],
      approval: 'none',
      ...(roots.length === 0 ? {} : { roots }),
    },
  },
});

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-capabilities-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('client capabilities against server-everything', () => {
  it('declares roots, sampling and elicitation, so every conditional tool is listed and answered', async () => {
    const sampled: SamplingRequest[] = [];
    const elicited: ElicitationRequest[] = [];
    const runtime = await McpRuntime.open(config([dir]), {
      onSampling: async (request, ctx) => {
        sampled.push(request);
        expect(ctx.server).toBe('everything');
        return {
          role: 'assistant',
          content: { type: 'text', text: 'sampled-by-the-app' },
          model: 'app-model',
        };
      },
      onElicitation: async (request) => {
        elicited.push(request);
        return { action: 'accept', content: { name: 'Ada', check: true } };
      },
    });
    const pids = runtime.pids();
    try {
      await using step = await runtime.captureBinding();
      const names = step.tools.map((t) => t.name);
      for (const conditional of [
        'everything__get-roots-list',
        'everything__trigger-sampling-request',
        'everything__trigger-elicitation-request',
        'everything__trigger-url-elicitation',
      ]) {
        expect(names).toContain(conditional);
      }

      const roots = await step.prepareCall('everything__get-roots-list').run({});
      expect(JSON.stringify(roots.result.content)).toContain(pathToFileURL(dir).href);

      const sample = await step
        .prepareCall('everything__trigger-sampling-request')
        .run({ prompt: 'hello', maxTokens: 5 });
      expect(sampled).toHaveLength(1);
      expect(JSON.stringify(sampled[0]?.messages)).toContain('hello');
      expect(JSON.stringify(sample.result.content)).toContain('sampled-by-the-app');

      const form = await step.prepareCall('everything__trigger-elicitation-request').run({});
      expect(elicited).toHaveLength(1);
      expect(elicited[0]?.requestedSchema).toMatchObject({ type: 'object' });
      expect(JSON.stringify(form.result.content)).toContain('Ada');
    } finally {
      await runtime.close();
    }
    expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
  });

  it('without handlers, declines elicitation and refuses sampling with a reason the server sees', async () => {
    await using runtime = await McpRuntime.open(config());
    await using step = await runtime.captureBinding();
    const form = await step.prepareCall('everything__trigger-elicitation-request').run({});
    expect(JSON.stringify(form.result)).toMatch(/decline/i);
    const sample = await step
      .prepareCall('everything__trigger-sampling-request')
      .run({ prompt: 'hello', maxTokens: 5 });
    expect(sample.result.isError).toBe(true);
    expect(JSON.stringify(sample.result.content)).toContain('no onSampling handler');
  });
});
