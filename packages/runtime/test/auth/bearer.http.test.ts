import { randomBytes } from 'node:crypto';
import { isStepbindError } from '@stepbind/binding';
import { McpRuntime, parseConfig, type RuntimeEvent } from '@stepbind/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { connectServer } from '../../src/connect.js';
import { legacyServer, modernServer, type AuthTestServer } from './wiring-servers.js';

/** A token that must never be shown anywhere. */
const TOKEN = `tok-${randomBytes(16).toString('hex')}`;
const env = { MCP_TOKEN: TOKEN };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Everything an error carries that could be shown: message, detail, stack, every cause. */
function dump(value: unknown, depth = 0): string {
  if (depth > 8) return '';
  if (value instanceof Error) {
    const { detail } = value as { detail?: unknown };
    return [
      value.message,
      value.stack ?? '',
      JSON.stringify(detail ?? null),
      dump((value as { cause?: unknown }).cause, depth + 1),
    ].join('\n');
  }
  return JSON.stringify(value, (_k, v: unknown) => (v instanceof Error ? dump(v, depth + 1) : v));
}

const ERAS = {
  '2025-11-25': { start: legacyServer, protocol: '2025-11-25' },
  '2026-07-28': { start: modernServer, protocol: 'auto' },
} as const;

async function open(
  server: AuthTestServer,
  protocol: string,
  events: RuntimeEvent[],
  required = true,
): Promise<McpRuntime> {
  const config = {
    mcpServers: {
      web: {
        url: server.url,
        protocol,
        required,
        approval: 'none',
        auth: { type: 'bearer', token: '${env:MCP_TOKEN}' },
      },
    },
  };
  const runtime = await McpRuntime.open(parseConfig(config, { env }), {
    onEvent: (e) => events.push(e),
  });
  cleanups.push(() => runtime.close());
  return runtime;
}

describe.each(Object.entries(ERAS))('bearer auth, %s era', (_era, { start, protocol }) => {
  it('sends Authorization: Bearer <token> on every request and calls a tool', async () => {
    const server = await start((h) => h === `Bearer ${TOKEN}`);
    cleanups.push(() => server.close());
    const events: RuntimeEvent[] = [];
    const runtime = await open(server, protocol, events);
    await using step = await runtime.captureBinding();
    const { result } = await step.prepareCall('web__alpha').run({});
    expect(result.isError).not.toBe(true);
    expect(server.seen.length).toBeGreaterThan(2);
    expect(server.seen.filter((s) => s.authorization !== `Bearer ${TOKEN}`)).toEqual([]);
    expect(server.seen.map((s) => s.method)).toContain('tools/call');
    expect(runtime.status().servers[0]?.auth).toEqual({ type: 'bearer' });
    expect(await runtime.authStatus()).toEqual([{ server: 'web', state: 'bearer' }]);
    expect(dump([events, runtime.status()])).not.toContain(TOKEN);
  });

  it('fails AUTH_FAILED (reason token, HTTP 401) naming the server when the token is refused, never showing it', async () => {
    const server = await start(() => false);
    cleanups.push(() => server.close());
    const events: RuntimeEvent[] = [];
    const error: unknown = await open(server, protocol, events).catch((e: unknown) => e);
    expect(isStepbindError(error, 'REQUIRED_SERVERS_FAILED')).toBe(true);
    const failure = (error as { detail: { failures: { code: string; message: string }[] } }).detail
      .failures[0];
    expect(failure?.code).toBe('AUTH_FAILED');
    expect(failure?.message).toContain('"web"');
    expect(failure?.message).toContain('bearer token');
    expect(server.seen.every((s) => !s.accepted)).toBe(true);
    expect(dump([error, events])).not.toContain(TOKEN);
  });

  it('shows the refusal in status() of an optional server with its typed detail', async () => {
    const server = await start(() => false);
    cleanups.push(() => server.close());
    const events: RuntimeEvent[] = [];
    const runtime = await open(server, protocol, events, false);
    await using step = await runtime.captureBinding();
    expect(step.tools).toEqual([]);
    const status = runtime.status().servers[0];
    expect(status?.state).toBe('failed');
    expect(status?.error?.code).toBe('AUTH_FAILED');
    const failed = events.find(
      (e): e is Extract<RuntimeEvent, { type: 'server-failed' }> => e.type === 'server-failed',
    );
    expect(failed?.error).toMatchObject({
      code: 'AUTH_FAILED',
      detail: { server: 'web', reason: 'token', httpStatus: 401 },
    });
    expect(dump([events, runtime.status()])).not.toContain(TOKEN);
  });
});

describe('bearer auth, auto era against a 2025 server', () => {
  it('fails the probe itself AUTH_FAILED, not as a crashed start', async () => {
    const server = await legacyServer(() => false);
    cleanups.push(() => server.close());
    const error: unknown = await open(server, 'auto', []).catch((e: unknown) => e);
    expect(dump(error)).toContain('web: AUTH_FAILED');
    expect(server.seen.map((s) => s.method)).toEqual(['server/discover']);
    expect(dump(error)).not.toContain(TOKEN);
  });
});

describe('the careless server', () => {
  it('never gets the configured token into a call error, even when the server repeats it', async () => {
    const server = await modernServer((h) => h === `Bearer ${TOKEN}`);
    cleanups.push(() => server.close());
    const runtime = await open(server, 'auto', []);
    await using step = await runtime.captureBinding();
    const error: unknown = await step
      .prepareCall('web__beta')
      .run({})
      .catch((e: unknown) => e);
    expect(dump(error)).toContain('denied for Bearer ***');
    expect(dump(error)).not.toContain(TOKEN);
  });
});

describe('connectServer without the runtime', () => {
  it('still sends a bearer entry token (no authorizer given)', async () => {
    const server = await modernServer((h) => h === `Bearer ${TOKEN}`);
    cleanups.push(() => server.close());
    const config = parseConfig(
      {
        mcpServers: {
          web: { url: server.url, auth: { type: 'bearer', token: '${env:MCP_TOKEN}' } },
        },
      },
      { env },
    ).servers.get('web');
    if (config === undefined) throw new Error('no config');
    const connection = await connectServer('web', config);
    cleanups.push(() => connection.close());
    expect(connection.era).toBe('modern');
    expect(server.seen.map((s) => s.method)).toContain('server/discover');
    expect(server.seen.map((s) => s.accepted)).not.toContain(false);
  });
});
