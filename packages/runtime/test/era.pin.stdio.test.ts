import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isStepbindError } from '@stepbind/binding';
import { tempDir } from '@stepbind/testkit';
import { parseConfig, type ServerConfig } from '../src/config.js';
import { connectServer } from '../src/connect.js';
import type { EraMemory } from '../src/connection.js';
import { McpRuntime } from '../src/index.js';
import { identityKeyOf } from '../src/transports/index.js';
import { failure } from './support/errors.js';

const RAW = fileURLToPath(new URL('../../testkit/dist/era/raw-server.js', import.meta.url));

function entry(mode: string, more: Record<string, unknown> = {}, env: Record<string, string> = {}) {
  return { command: process.execPath, args: [RAW, mode], env, approval: 'none', ...more };
}

function serverConfig(
  mode: string,
  more: Record<string, unknown> = {},
  env: Record<string, string> = {},
): ServerConfig {
  const config = parseConfig({ mcpServers: { s: entry(mode, more, env) } }).servers.get('s');
  if (config === undefined) throw new Error('no server');
  return config;
}

async function methods(log: string): Promise<(string | undefined)[]> {
  return (await readFile(log, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => (JSON.parse(line) as { method?: string }).method);
}

describe('protocol: "2025-11-25" pins the 2025 era', () => {
  it('is never sent server/discover, is served over initialize and is not remembered', async () => {
    await using dir = tempDir('era-pin');
    const log = dir.file('requests.jsonl');
    // A server that hangs on server/discover: a probe would show in the log (and wait).
    const config = serverConfig(
      'hang-discover',
      { protocol: '2025-11-25' },
      { RAW_SERVER_LOG: log },
    );
    const eras: EraMemory = new Map();
    const connection = await connectServer('s', config, { eras });
    try {
      expect(connection.era).toBe('legacy');
      expect(connection.hello.protocolVersion).toBe('2025-11-25');
    } finally {
      await connection.close();
    }
    expect(await methods(log)).not.toContain('server/discover');
    expect(await methods(log)).toContain('initialize');
    expect(eras.size).toBe(0);
  });

  it('through McpRuntime.open: status shows the 2025 era, calls work, and the log has no probe', async () => {
    await using dir = tempDir('era-pin');
    const log = dir.file('requests.jsonl');
    const runtime = await McpRuntime.open({
      mcpServers: {
        s: entry('hang-discover', { protocol: '2025-11-25' }, { RAW_SERVER_LOG: log }),
      },
    });
    try {
      expect(runtime.status().servers[0]).toMatchObject({
        era: 'legacy',
        protocolVersion: '2025-11-25',
      });
      await using step = await runtime.captureBinding();
      const { result } = await step.prepareCall('s__echo').run({});
      expect(result.content).toEqual([{ type: 'text', text: 'legacy echo' }]);
    } finally {
      await runtime.close();
    }
    expect(await methods(log)).not.toContain('server/discover');
  });
});

describe('protocol: "2026-07-28" pins the modern era', () => {
  it('a legacy-only server fails SERVER_START_FAILED naming the protocol key, and is never sent initialize', async () => {
    await using dir = tempDir('era-pin');
    const log = dir.file('requests.jsonl');
    const config = serverConfig('old-legacy', { protocol: '2026-07-28' }, { RAW_SERVER_LOG: log });
    const error = await failure(connectServer('s', config));
    expect(error.code).toBe('SERVER_START_FAILED');
    expect(error.detail).toMatchObject({
      server: 's',
      configPath: '$.mcpServers.s.protocol',
      answer: 'error',
      rpcCode: -32601,
    });
    expect(error.message).toContain('not a 2026-07-28 server');
    expect(error.message).toContain('"auto"');
    expect(await methods(log)).toEqual(['server/discover']);
  });

  it('a legacy-only server makes McpRuntime.open fail with that error', async () => {
    const error = await failure(
      McpRuntime.open({ mcpServers: { s: entry('garbage-discover', { protocol: '2026-07-28' }) } }),
    );
    expect(error.code).toBe('REQUIRED_SERVERS_FAILED');
    expect(error.message).toContain('$.mcpServers.s.protocol');
  });

  it('is probed even when the era memory holds "legacy" for its identity key, and the memory is not written', async () => {
    const config = serverConfig('modern', { protocol: '2026-07-28' });
    const eras: EraMemory = new Map([[identityKeyOf(config), 'legacy']]);
    const connection = await connectServer('s', config, { eras });
    try {
      expect(connection.era).toBe('modern');
    } finally {
      await connection.close();
    }
    expect([...eras.values()]).toEqual(['legacy']);
  });

  it('the pin is part of the identity key; "auto" (the default) keeps the old key', () => {
    const auto = identityKeyOf(serverConfig('modern'));
    expect(identityKeyOf(serverConfig('modern', { protocol: 'auto' }))).toBe(auto);
    const modern = identityKeyOf(serverConfig('modern', { protocol: '2026-07-28' }));
    const legacy = identityKeyOf(serverConfig('modern', { protocol: '2025-11-25' }));
    expect(new Set([auto, modern, legacy]).size).toBe(3);
  });
});

describe('a modern server that boots slower than the probe budget', () => {
  // The server reads stdin only this long after it started: a probe budget far below it expires
  // first, whatever the machine's speed.
  const slow = { RAW_SERVER_BOOT_DELAY_MS: '1500' };

  it('with protocol "auto" and a short discoverTimeoutMs, the late server/discover answer still makes it modern', async () => {
    await using dir = tempDir('era-late');
    const log = dir.file('requests.jsonl');
    const eras: EraMemory = new Map();
    // The budget expires long before the server reads stdin, so initialize is asked too; the
    // server answers server/discover first (it reads in order), which ends the initialize.
    const connection = await connectServer(
      's',
      serverConfig('modern', { discoverTimeoutMs: 50 }, { ...slow, RAW_SERVER_LOG: log }),
      { eras },
    );
    const errors: Error[] = [];
    try {
      connection.onError((error) => errors.push(error));
      expect(connection.era).toBe('modern');
      const result = await connection.callTool('echo', {}, { timeoutMs: 10_000 });
      expect(result.isError).not.toBe(true);
    } finally {
      await connection.close();
    }
    // The answer to the abandoned initialize is no error of the modern connection.
    expect(errors.map((e) => e.message)).toEqual([]);
    const sent = await methods(log);
    expect(sent.slice(0, 2)).toEqual(['server/discover', 'initialize']);
    expect(sent).toContain('tools/call');
    expect([...eras.values()]).toEqual(['modern']);
  });

  it('works when pinned to 2026-07-28 (the probe may take the whole startupTimeoutMs)', async () => {
    const connection = await connectServer(
      's',
      serverConfig('modern', { protocol: '2026-07-28' }, slow),
    );
    try {
      expect(connection.era).toBe('modern');
    } finally {
      await connection.close();
    }
  });

  it('works with protocol "auto" and a discoverTimeoutMs larger than its boot', async () => {
    const eras: EraMemory = new Map();
    const connection = await connectServer(
      's',
      serverConfig('modern', { discoverTimeoutMs: 30_000 }, slow),
      { eras },
    );
    try {
      expect(connection.era).toBe('modern');
    } finally {
      await connection.close();
    }
    expect([...eras.values()]).toEqual(['modern']);
  });
});

describe('protocol and discoverTimeoutMs in the configuration', () => {
  const parse = (more: Record<string, unknown>): unknown => {
    try {
      return parseConfig({ mcpServers: { s: { command: 'x', ...more } } }).servers.get('s');
    } catch (error) {
      return error;
    }
  };
  const pathOf = (value: unknown): unknown =>
    isStepbindError(value, 'INVALID_CONFIG') ? value.detail['path'] : value;

  it('default to "auto" and 2000 ms', () => {
    expect(parse({})).toMatchObject({ protocol: 'auto', discoverTimeoutMs: 2000 });
    expect(parse({ protocol: '2026-07-28' })).toMatchObject({ protocol: '2026-07-28' });
    expect(parse({ discoverTimeoutMs: 5000 })).toMatchObject({ discoverTimeoutMs: 5000 });
  });

  it('bad values are INVALID_CONFIG naming the key', () => {
    for (const protocol of ['modern', 42, '', '2026-07-29']) {
      expect(pathOf(parse({ protocol }))).toBe('$.mcpServers.s.protocol');
    }
    for (const discoverTimeoutMs of [0, -1, 1.5, '2000']) {
      expect(pathOf(parse({ discoverTimeoutMs }))).toBe('$.mcpServers.s.discoverTimeoutMs');
    }
    const url = parseConfig.bind(undefined, {
      mcpServers: { w: { url: 'http://h/mcp', protocol: 'legacy' } },
    });
    expect(url).toThrow(/\$\.mcpServers\.w\.protocol/);
  });

  it('an older 2025-era version is refused with the reason, and so is a probe budget with a pin', () => {
    const older = parse({ protocol: '2025-06-18' });
    expect(pathOf(older)).toBe('$.mcpServers.s.protocol');
    expect((older as Error).message).toContain('negotiates an older version');
    for (const protocol of ['2026-07-28', '2025-11-25']) {
      const both = parse({ protocol, discoverTimeoutMs: 100 });
      expect(pathOf(both)).toBe('$.mcpServers.s.discoverTimeoutMs');
    }
  });
});
