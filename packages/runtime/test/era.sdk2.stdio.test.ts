import { readFile } from 'node:fs/promises';
import { Client as Sdk2Client } from '@modelcontextprotocol/client';
import { StdioClientTransport as Sdk2StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect, it } from 'vitest';
import {
  createEventLog,
  SDK2_SERVER_LOG_ENV,
  sdk2StdioServerParams,
  tempDir,
  type Sdk2ServerOptions,
} from '@stepbind/testkit';
import { parseConfig } from '../src/config.js';
import { connectServer } from '../src/connect.js';
import type { EraMemory } from '../src/connection.js';
import { McpRuntime, type McpRuntimeOptions } from '../src/index.js';
import { identityKeyOf } from '../src/transports/index.js';
import { failure } from './support/errors.js';

/**
 * stepbind against testkit's `@modelcontextprotocol/server` 2.4.0 stdio server (`serveStdio`,
 * dual era), over real child processes. The server logs every inbound message to a file, so the
 * tests count what reached it.
 */

interface Logged {
  readonly method: string;
  readonly id?: string | number;
  readonly tool?: string;
  readonly requestId?: string | number;
}

async function readLog(path: string): Promise<Logged[]> {
  const text = await readFile(path, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Logged);
}

function config(log: string, options: Sdk2ServerOptions = {}): unknown {
  return {
    mcpServers: {
      s: {
        ...sdk2StdioServerParams(options),
        env: { [SDK2_SERVER_LOG_ENV]: log },
        required: true,
        approval: 'none',
        limits: { maxTools: 5_000 },
      },
    },
  };
}

async function open(
  log: string,
  options: Sdk2ServerOptions = {},
  runtimeOptions: McpRuntimeOptions = {},
): Promise<McpRuntime> {
  return McpRuntime.open(config(log, options), runtimeOptions);
}

describe('an SDK 2.4.0 serveStdio server', () => {
  it('is discovered as modern and every one of its 91 pages is walked (SDK 2.4.0 stops at 64)', async () => {
    await using dir = tempDir('sdk2-stdio');
    const log = dir.file('requests.jsonl');
    const runtime = await open(log, { tools: 180, pageSize: 2, ttls: [0] });
    try {
      expect(runtime.status().servers[0]).toMatchObject({
        era: 'modern',
        protocolVersion: '2026-07-28',
      });
      await using step = await runtime.captureBinding();
      // 180 generated tools plus `change` and `ask`.
      expect(step.tools).toHaveLength(182);
      expect(step.tools.map((t) => t.name)).toContain('s__t179');
      const { result } = await step.prepareCall('s__t179').run({ text: 'last' });
      expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"last"}' }]);
      const methods = (await readLog(log)).map((l) => l.method);
      expect(methods.filter((m) => m === 'tools/list')).toHaveLength(91);
      expect(methods.filter((m) => m === 'initialize')).toHaveLength(0);
      expect(methods[0]).toBe('server/discover');
    } finally {
      await runtime.close();
    }
  });

  it('the bare SDK 2.4.0 client refuses the same 91-page listing at its 64-page cap', async () => {
    const client = new Sdk2Client(
      { name: 'bare-2.4.0', version: '0.0.0' },
      { versionNegotiation: { mode: 'auto' } },
    );
    await client.connect(
      new Sdk2StdioClientTransport(sdk2StdioServerParams({ tools: 180, pageSize: 2, ttls: [0] })),
    );
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
      const error: unknown = await client.listTools().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((error as Error).message).toContain('exceeded listMaxPages (64)');
    } finally {
      await client.close();
    }
  });

  it('a list_changed on subscriptions/listen hard-refreshes; a stale prepared call never reaches the server; a second change is seen too', async () => {
    await using dir = tempDir('sdk2-stdio');
    const log = dir.file('requests.jsonl');
    const events = createEventLog();
    const runtime = await open(log, {}, { onEvent: events.onEvent, listChangedDebounceMs: 1 });
    try {
      await using before = await runtime.captureBinding();
      // Prepared on revision 1, run after the change.
      const prepared = before.prepareCall('s__echo');
      const swapped = events.next('catalog-swapped');
      await before.prepareCall('s__change').run({});
      expect(await swapped).toMatchObject({ server: 's', cause: 'hard-refresh' });
      const calls = (await readLog(log)).filter((l) => l.method === 'tools/call').length;
      const stale = await failure(prepared.run({}));
      expect(stale.code).toBe('STALE_CATALOG');
      expect((await readLog(log)).filter((l) => l.method === 'tools/call')).toHaveLength(calls);

      await using after = await runtime.captureBinding();
      expect(after.tools.map((t) => t.name)).toContain('s__added1');
      const again = events.next('catalog-swapped');
      await after.prepareCall('s__change').run({});
      expect(await again).toMatchObject({ server: 's', cause: 'hard-refresh' });
      await using third = await runtime.captureBinding();
      expect(third.tools.map((t) => t.name)).toContain('s__added2');
      // One listen stream served both changes.
      expect((await readLog(log)).filter((l) => l.method === 'subscriptions/listen')).toHaveLength(
        1,
      );
    } finally {
      await runtime.close();
    }
  });

  it('the listen stream is cancelled on close', async () => {
    await using dir = tempDir('sdk2-stdio');
    const log = dir.file('requests.jsonl');
    const runtime = await open(log);
    await runtime.close();
    const lines = await readLog(log);
    const listen = lines.find((l) => l.method === 'subscriptions/listen');
    expect(listen?.id).toBeDefined();
    const cancelled = lines.filter((l) => l.method === 'notifications/cancelled');
    expect(cancelled.map((l) => l.requestId)).toEqual([listen?.id]);
  });

  it('an input_required (MRTR) call goes to onElicitation and completes with the answer and requestState', async () => {
    await using dir = tempDir('sdk2-stdio');
    const log = dir.file('requests.jsonl');
    const asked: string[] = [];
    const runtime = await open(
      log,
      {},
      {
        onElicitation: (request) => {
          asked.push(request.message);
          return Promise.resolve({ action: 'accept', content: { ok: true } });
        },
      },
    );
    try {
      await using step = await runtime.captureBinding();
      const { result } = await step.prepareCall('s__ask').run({});
      expect(asked).toEqual(['Confirm?']);
      expect(result.content).toEqual([
        { type: 'text', text: 'confirmed {"ok":true} state round-1' },
      ]);
      const asks = (await readLog(log)).filter((l) => l.tool === 'ask');
      expect(asks).toHaveLength(2);
      expect(asks[0]?.id).not.toEqual(asks[1]?.id);
    } finally {
      await runtime.close();
    }
  });

  it('without an elicitation handler an MRTR call fails INPUT_REQUIRED naming the question', async () => {
    await using dir = tempDir('sdk2-stdio');
    const runtime = await open(dir.file('requests.jsonl'));
    try {
      await using step = await runtime.captureBinding();
      const error = await failure(step.prepareCall('s__ask').run({}));
      expect(error.code).toBe('INPUT_REQUIRED');
      // The question is in the detail; the message names only the method and key (MRTR receipts).
      expect(error.message).toContain('elicitation/create');
      expect(error.message).not.toContain('Confirm?');
      expect(error.detail['requests']).toEqual([
        expect.objectContaining({ method: 'elicitation/create', message: 'Confirm?' }),
      ]);
    } finally {
      await runtime.close();
    }
  });
});

describe('the dual-era SDK 2.4.0 stdio server', () => {
  it('serves the bare SDK 1.32.2 client, which opens with initialize (2025-11-25)', async () => {
    const client = new Client({ name: 'bare-1.32.2', version: '0.0.0' });
    await client.connect(new StdioClientTransport(sdk2StdioServerParams({ tools: 3 })));
    try {
      expect(client.getServerVersion()).toMatchObject({ name: 'sdk2-era-server' });
      const names: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor });
        names.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      expect(names).toEqual(['echo', 't1', 't2', 'change', 'ask']);
      const result = await client.callTool({ name: 'echo', arguments: { text: 'old' } });
      expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"old"}' }]);
    } finally {
      await client.close();
    }
  });

  it('is served in the 2025 era by stepbind when its era is remembered as legacy, MRTR included', async () => {
    await using dir = tempDir('sdk2-stdio');
    const log = dir.file('requests.jsonl');
    const parsed = parseConfig(config(log)).servers.get('s');
    if (parsed === undefined) throw new Error('no server');
    const eras: EraMemory = new Map([[identityKeyOf(parsed), 'legacy']]);
    const connection = await connectServer('s', parsed, {
      eras,
      handlers: {
        onElicitation: () => Promise.resolve({ action: 'accept', content: { ok: true } }),
      },
    });
    try {
      expect(connection.era).toBe('legacy');
      expect(connection.hello.protocolVersion).toBe('2025-11-25');
      // The SDK's legacy shim turns input_required into a real elicitation/create request.
      const result = await connection.callTool('ask', {}, { timeoutMs: 30_000 });
      expect(result.content).toEqual([
        { type: 'text', text: 'confirmed {"ok":true} state round-1' },
      ]);
    } finally {
      await connection.close();
    }
    const methods = (await readLog(log)).map((l) => l.method);
    expect(methods[0]).toBe('initialize');
    expect(methods).not.toContain('server/discover');
  });

  it('with --modern-only refuses the bare SDK 1.32.2 client, and stepbind still finds it modern', async () => {
    const client = new Client({ name: 'bare-1.32.2', version: '0.0.0' });
    const refused: unknown = await client
      .connect(new StdioClientTransport(sdk2StdioServerParams({ modernOnly: true })))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await client.close();
    expect(refused).toBeInstanceOf(Error);
    await using dir = tempDir('sdk2-stdio');
    const runtime = await open(dir.file('requests.jsonl'), { modernOnly: true });
    try {
      expect(runtime.status().servers[0]).toMatchObject({ era: 'modern' });
    } finally {
      await runtime.close();
    }
  });
});
