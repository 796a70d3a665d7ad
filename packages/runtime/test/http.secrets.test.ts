import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStepbindError } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import { runCli } from '../src/cli/run.js';
import { isProcessAlive, spawnHttpServer, type HttpServerProcess } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventLog } from './support/events.js';

/** A value that must never be shown: URL query value, header value, URL password. */
const SECRET = `sk-live-${randomBytes(12).toString('hex')}`;

let dir: string;
const servers: HttpServerProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-secrets-'));
});
afterAll(async () => {
  const pids = servers.map((s) => s.pid);
  for (const server of servers) await server.close();
  expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
  await rm(dir, { recursive: true, force: true });
});

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Everything an error carries that could be shown: message, detail, stack and every cause. */
function dump(value: unknown, depth = 0): string {
  if (depth > 8) return '';
  if (value instanceof Error) {
    const { detail } = value as { detail?: unknown };
    return [
      value.name,
      value.message,
      value.stack ?? '',
      JSON.stringify(detail ?? null),
      JSON.stringify(value),
      dump((value as { cause?: unknown }).cause, depth + 1),
    ].join('\n');
  }
  if (typeof value === 'object' && value !== null) {
    return Object.values(value)
      .map((v) => dump(v, depth + 1))
      .concat(JSON.stringify(value, (_k, v: unknown) => (v instanceof Error ? dump(v) : v)))
      .join('\n');
  }
  return String(value);
}

async function cli(args: string[]): Promise<string> {
  let text = '';
  await runCli(args, { stdout: (t) => (text += t), stderr: (t) => (text += t) });
  return text;
}

describe('secrets of HTTP servers (URL query values, header values) never leave the runtime', () => {
  it('appear in no error, event, status or CLI output of an unreachable server, a 401 that echoes them and a server that dies', async () => {
    const shown: string[] = [];
    const unreachable = `http://127.0.0.1:${await closedPort()}/mcp?api_key=${SECRET}`;
    // A careless server: its 401 body repeats the request's URL and headers.
    const guarded = await spawnHttpServer(
      { scenario: 'single' },
      { requireHeaders: { authorization: 'Bearer the-right-one' }, echoOn401: true },
    );
    servers.push(guarded);
    const dying = await spawnHttpServer({ scenario: 'single', callDelayMs: 120_000 });
    servers.push(dying);
    const mcpServers = {
      down: { url: unreachable, required: false, startupTimeoutMs: 5_000 },
      guarded: {
        url: `${guarded.url}?token=${SECRET}`,
        headers: { Authorization: `Bearer ${SECRET}`, 'x-api-key': SECRET },
        required: false,
      },
      dying: { url: `${dying.url}?api_key=${SECRET}`, headers: { 'x-api-key': SECRET } },
    };

    // 1. A runtime: failed starts, a session lost under a call in flight, reconnect failures.
    const log = eventLog();
    const runtime = await McpRuntime.open(
      { mcpServers },
      {
        approval: 'none',
        onEvent: log.onEvent,
        optionalGraceMs: 20_000,
        reconnect: { initialDelayMs: 5, maxDelayMs: 5, maxAttempts: 3 },
      },
    );
    try {
      await using step = await runtime.captureBinding();
      expect(step.servers.find((s) => s.name === 'dying')?.bound).toBe(true);
      const failedStarts = log.events.filter((e) => e.type === 'server-failed');
      expect(failedStarts.map((e) => e.type === 'server-failed' && e.server).sort()).toEqual([
        'down',
        'guarded',
      ]);
      // The 401 answer really did carry the secret back.
      expect(JSON.stringify(failedStarts)).toContain('401');
      shown.push(JSON.stringify(runtime.status()));
      const inFlight = step
        .prepareCall('dying__alpha')
        .run({})
        .catch((e: unknown) => e);
      await dying.waitFor((e) => e.event === 'message' && e.method === 'tools/call');
      const gaveUp = log.next('reconnect-failed', (e) => e.nextDelayMs === undefined);
      await dying.kill();
      const lostCall = await inFlight;
      expect(isStepbindError(lostCall, 'OUTCOME_UNKNOWN')).toBe(true);
      shown.push(dump(lostCall));
      await gaveUp;
      shown.push(JSON.stringify(runtime.status()));
      const refused = await runtime.captureBinding().catch((e: unknown) => e);
      expect(isStepbindError(refused, 'REQUIRED_SERVERS_FAILED')).toBe(true);
      shown.push(dump(refused));
      const hard = await runtime.hardRefresh('dying').catch((e: unknown) => e);
      expect(isStepbindError(hard)).toBe(true);
      shown.push(dump(hard));
      shown.push(JSON.stringify(runtime.status()));
    } finally {
      await runtime.close();
    }
    expect(log.events.map((e) => e.type)).toEqual(
      expect.arrayContaining(['server-failed', 'session-lost', 'reconnect-failed']),
    );
    for (const event of log.events) shown.push(dump(event));

    // 2. A required server that cannot start fails open() with every failure listed.
    const openError = await McpRuntime.open({
      mcpServers: { down: { url: unreachable, startupTimeoutMs: 5_000 } },
    }).catch((e: unknown) => e);
    expect(isStepbindError(openError, 'REQUIRED_SERVERS_FAILED')).toBe(true);
    shown.push(dump(openError));

    // 3. The CLI, in text and JSON, on the same servers and on configurations that hold secrets.
    const config = join(dir, 'servers.json');
    await writeFile(config, JSON.stringify({ mcpServers }));
    const credentials = join(dir, 'credentials.json');
    await writeFile(
      credentials,
      JSON.stringify({ mcpServers: { c: { url: `https://user:${SECRET}@example.test/mcp` } } }),
    );
    const broken = join(dir, 'broken.json');
    await writeFile(broken, `{"mcpServers": {"c": {"url": "https://x.test/?k=${SECRET}" }`);
    const text = await cli(['catalog', '--config', config]);
    expect(text).toContain('✘ down: SERVER_START_FAILED');
    expect(text).toContain('api_key=***');
    shown.push(text);
    shown.push(await cli(['catalog', '--config', config, '--json']));
    const refusedConfig = await cli(['catalog', '--config', credentials]);
    expect(refusedConfig).toContain('$.mcpServers.c.url');
    shown.push(refusedConfig);
    const invalid = await cli(['catalog', '--config', broken, '--json']);
    expect(invalid).toContain('not valid JSON');
    shown.push(invalid);

    expect(shown.length).toBeGreaterThan(10);
    for (const output of shown) expect(output).not.toContain(SECRET);
  });
});
