import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isStepbindError, MemoryJournalStore, verifyChain } from '@stepbind/binding';
import { createEventLog, stdioServerParams, tempDir } from '@stepbind/testkit';
import { runCli } from '../src/cli/run.js';
import { parseConfig, type ServerConfig } from '../src/config.js';
import { discoverCatalog } from '../src/discover-catalog.js';
import { connectServer } from '../src/connect.js';
import type { EraMemory } from '../src/connection.js';
import { ModernConnection } from '../src/era/modern.js';
import { probeEra } from '../src/era/probe.js';
import { McpRuntime } from '../src/index.js';
import { identityOf, openTransport } from '../src/transports/index.js';
import { StderrTail } from '../src/transports/stderr-tail.js';

const RAW = fileURLToPath(new URL('../../testkit/dist/era/raw-server.js', import.meta.url));
const SDK2 = fileURLToPath(new URL('../../testkit/dist/era/sdk2-server.js', import.meta.url));

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
      expect((error as Error).message).toContain('elicitation/create (key "confirm")');
      expect((error as { detail: Record<string, unknown> }).detail['requests']).toEqual([
        { key: 'confirm', method: 'elicitation/create', message: 'Confirm?' },
      ]);
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

describe('the server/discover probe', () => {
  const legacyServer = (): ServerConfig => {
    const params = stdioServerParams({ scenario: 'single' });
    const parsed = parseConfig({ mcpServers: { s: { ...params } } }).servers.get('s');
    if (parsed === undefined) throw new Error('no server');
    return parsed;
  };

  it('an SDK 1.32.2 server answers server/discover with an error, so a legacy start never waits for the budget', async () => {
    const { transport } = openTransport('s', legacyServer(), {}, new StderrTail('pipe'));
    await transport.start();
    try {
      // A budget no test could wait for: only the server's error answer can end the probe.
      const outcome = await probeEra('s', transport, { timeoutMs: 3_600_000 });
      expect(outcome).toMatchObject({ era: 'legacy', answer: 'error', code: -32601 });
    } finally {
      await transport.close();
    }
    const connection = await connectServer('s', legacyServer(), {
      probeTimeoutMs: 3_600_000,
      timeoutMs: 3_600_000,
    });
    try {
      expect(connection.era).toBe('legacy');
      expect(connection.hello.protocolVersion).toBe('2025-11-25');
    } finally {
      await connection.close();
    }
  });

  it('a server remembered as legacy is not probed again when it is restarted', async () => {
    await using dir = tempDir('era-probe');
    const log = dir.file('requests.jsonl');
    const raw = parseConfig({
      mcpServers: {
        s: {
          command: process.execPath,
          args: [RAW, 'hang-discover'],
          env: { RAW_SERVER_LOG: log },
        },
      },
    }).servers.get('s');
    if (raw === undefined) throw new Error('no server');
    const eras: EraMemory = new Map();
    const first = await connectServer('s', raw, { probeTimeoutMs: 50, eras });
    await first.close();
    expect(first.era).toBe('legacy');
    expect([...eras.values()]).toEqual(['legacy']);
    // Were it probed again, this start would wait for the hour-long budget.
    const second = await connectServer('s', raw, { probeTimeoutMs: 3_600_000, eras });
    await second.close();
    expect(second.era).toBe('legacy');
    const methods = (await readFile(log, 'utf8'))
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => (JSON.parse(line) as { method?: string }).method);
    expect(methods.filter((m) => m === 'server/discover')).toHaveLength(1);
    expect(methods.filter((m) => m === 'initialize')).toHaveLength(2);
  });
});

describe('the era is shown', () => {
  const mixed = {
    mcpServers: {
      m: { command: process.execPath, args: [RAW, 'modern'] },
      l: stdioServerParams({ scenario: 'single' }),
    },
  };

  async function cli(args: string[]): Promise<{ code: number; out: string }> {
    let out = '';
    const code = await runCli(args, { stdout: (t) => (out += t), stderr: () => undefined });
    return { code, out };
  }

  it('in status(), per server', async () => {
    const runtime = await McpRuntime.open(mixed);
    try {
      const byName = new Map(runtime.status().servers.map((s) => [s.name, s]));
      expect(byName.get('m')).toMatchObject({ era: 'modern', protocolVersion: '2026-07-28' });
      expect(byName.get('l')).toMatchObject({ era: 'legacy', protocolVersion: '2025-11-25' });
    } finally {
      await runtime.close();
    }
  });

  it('by stepbind catalog (text and JSON) and stepbind tools', async () => {
    await using dir = tempDir('era-cli');
    const path = dir.file('config.json');
    await writeFile(path, JSON.stringify(mixed));
    const text = await cli(['catalog', '--config', path]);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/✔ m: 3 tools in 2 pages .*, era modern \(2026-07-28\)\n/);
    expect(text.out).toMatch(/✔ l: .*, era legacy \(2025-11-25\)\n/);
    const json = await cli(['catalog', '--config', path, '--json']);
    const servers = (JSON.parse(json.out) as { servers: Record<string, unknown>[] }).servers;
    expect(servers.map((s) => [s['name'], s['era'], s['protocolVersion']])).toEqual([
      ['m', 'modern', '2026-07-28'],
      ['l', 'legacy', '2025-11-25'],
    ]);
    // Without the cache the catalog command just wrote: this is about the live era.
    const tools = await cli(['tools', '--no-cache', '--config', path]);
    expect(tools.code).toBe(0);
    expect(tools.out).toMatch(/✔ m: 3 tools, .*, era modern \(2026-07-28\)\n/);
    expect(tools.out).toMatch(/✔ l: .*, era legacy \(2025-11-25\)\n/);
  });
});

describe('receipts record the protocol version', () => {
  it('in the CallReceipt and in the journal receipt body, which still verifies', async () => {
    const store = new MemoryJournalStore();
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          m: { command: process.execPath, args: [RAW, 'modern'], approval: 'none' },
          l: { ...stdioServerParams({ scenario: 'single' }), approval: 'none' },
        },
      },
      { journal: { store } },
    );
    try {
      await using step = await runtime.captureBinding();
      const modern = await step.prepareCall('m__echo').run({}, { idempotencyKey: 'k-modern' });
      expect(modern.receipt.protocolVersion).toBe('2026-07-28');
      const legacyTool = step.tools.find((t) => t.name.startsWith('l__'));
      if (legacyTool === undefined) throw new Error('no legacy tool');
      const legacy = await step.prepareCall(legacyTool.name).run({});
      expect(legacy.receipt.protocolVersion).toBe('2025-11-25');
      const receipts = await store.readReceipts();
      expect(
        receipts.map((r) => (JSON.parse(r.text) as { protocolVersion?: string }).protocolVersion),
      ).toEqual(['2026-07-28', '2025-11-25']);
      expect(verifyChain(await store.anchor(), receipts)).toMatchObject({ ok: true });
    } finally {
      await runtime.close();
    }
  });
});

describe('servers on either side of the eras', () => {
  it('a server that offers only 2024-11-05 falls back to initialize and is served in that version', async () => {
    const runtime = await McpRuntime.open(config('old-legacy'));
    try {
      expect(runtime.status().servers[0]).toMatchObject({
        era: 'legacy',
        protocolVersion: '2024-11-05',
      });
      await using step = await runtime.captureBinding();
      const { result, receipt } = await step.prepareCall('s__echo').run({});
      expect(result.content).toEqual([{ type: 'text', text: 'legacy echo' }]);
      expect(receipt.protocolVersion).toBe('2024-11-05');
    } finally {
      await runtime.close();
    }
  });

  it('an SDK 2.4.0 serveStdio server is modern: every page is walked and its own ttlMs recorded', async () => {
    const raw = parseConfig({
      mcpServers: { s: { command: process.execPath, args: [SDK2, '5', '2', '60000,0,5000'] } },
    }).servers.get('s');
    if (raw === undefined) throw new Error('no server');
    const connection = await connectServer('s', raw);
    try {
      if (!(connection instanceof ModernConnection)) throw new Error(`spoke ${connection.era}`);
      expect(connection.hello.serverInfo).toEqual({ name: 'sdk2-era-server', version: '2.4.0' });
      const { discovered } = await discoverCatalog(connection, {
        name: 's',
        config: raw,
        identity: identityOf('s', raw, connection),
        policyEpoch: 0,
      });
      expect(discovered.tools.map((t) => (t as { name: string }).name)).toEqual([
        'echo',
        't1',
        't2',
        't3',
        't4',
        'change',
        'ask',
      ]);
      // Page 1's TTL is not kept for the whole list (SDK 2.4.0's client does that).
      expect(connection.pageHints).toEqual([
        { page: 1, ttlMs: 60000, cacheScope: 'public' },
        { page: 2, ttlMs: 0, cacheScope: 'public' },
        { page: 3, ttlMs: 5000, cacheScope: 'public' },
        { page: 4, ttlMs: 5000, cacheScope: 'public' },
      ]);
      const result = await connection.callTool('echo', { text: 'hi' }, { timeoutMs: 30_000 });
      expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"hi"}' }]);
    } finally {
      await connection.close();
    }
  });
});
