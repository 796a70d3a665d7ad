import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { McpRuntime, type McpRuntimeOptions, type ServerStatus } from '@stepbind/runtime';
import {
  isProcessAlive,
  scriptedTool,
  spawnHttpServer,
  type HttpServerOptions,
  type HttpServerProcess,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config.js';
import { connectServer } from '../src/connect.js';
import { setDebugSink } from '../src/log.js';
import { failure } from './support/errors.js';
import { eventLog, nextEvent, type EventLog } from './support/events.js';

const servers: HttpServerProcess[] = [];
const runtimes: McpRuntime[] = [];

afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.close();
  const pids = servers.map((s) => s.pid);
  for (const server of servers.splice(0)) await server.close();
  expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
});

/** A scripted server that speaks only the legacy HTTP+SSE transport (GET /mcp is its stream). */
async function legacy(
  options: ScriptedServerOptions = { scenario: 'single' },
  http: HttpServerOptions = {},
): Promise<HttpServerProcess> {
  const server = await spawnHttpServer(options, { transport: 'sse', ...http });
  servers.push(server);
  return server;
}

const QUICK: McpRuntimeOptions['reconnect'] = {
  initialDelayMs: 20,
  maxDelayMs: 200,
  maxAttempts: 100,
};

async function open(
  entry: Record<string, unknown>,
  options: McpRuntimeOptions = {},
): Promise<{ runtime: McpRuntime; log: EventLog }> {
  const log = eventLog();
  const runtime = await McpRuntime.open(
    { mcpServers: { web: entry } },
    { approval: 'none', reconnect: QUICK, ...options, onEvent: log.onEvent },
  );
  runtimes.push(runtime);
  return { runtime, log };
}

function web(runtime: McpRuntime): ServerStatus {
  const status = runtime.status().servers.find((s) => s.name === 'web');
  if (status === undefined) throw new Error('no status for web');
  return status;
}

/** The Streamable HTTP POSTs the SSE-only server refused. */
const refused = (server: HttpServerProcess): number =>
  server.events.filter((e) => e.event === 'refused' && e.method === 'POST').length;

const methods = (server: HttpServerProcess): string[] =>
  server.events.flatMap((e) => (e.event === 'message' ? [e.method] : []));

describe('type "sse": the legacy HTTP+SSE transport', () => {
  it('lists and calls tools over the SSE stream, in the 2025 era, without any Streamable HTTP POST or probe', async () => {
    const server = await legacy();
    const { runtime } = await open({ type: 'sse', url: server.url });
    await using step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toEqual(['web__alpha', 'web__beta']);
    const { result, receipt } = await step.prepareCall('web__beta').run({});
    expect(result.content).toEqual([{ type: 'text', text: expect.stringContaining('beta') }]);
    expect(receipt).toMatchObject({ server: 'web', outcome: 'ok' });
    expect(web(runtime)).toMatchObject({ state: 'ready', transport: 'sse', era: 'legacy' });
    expect(refused(server)).toBe(0);
    expect(methods(server)[0]).toBe('initialize');
    expect(methods(server)).not.toContain('server/discover');
  });

  it('is refused with the 2026-07-28 pin, naming the protocol key', async () => {
    const error = await failure(
      McpRuntime.open({
        mcpServers: { web: { type: 'sse', url: 'http://127.0.0.1:9/mcp', protocol: '2026-07-28' } },
      }),
    );
    expect(error.code).toBe('INVALID_CONFIG');
    expect(error.message).toContain('$.mcpServers.web.protocol');
  });

  it('is refused for a command server, naming the type key', async () => {
    const error = await failure(
      McpRuntime.open({ mcpServers: { web: { type: 'sse', command: 'x' } } }),
    );
    expect(error.code).toBe('INVALID_CONFIG');
    expect(error.message).toContain('$.mcpServers.web.type');
  });
});

describe('type "http" against a server that only speaks HTTP+SSE', () => {
  it.each([404, 405] as const)(
    'falls back after the probe POST is refused with %i, sending no initialize POST, and says so',
    async (status) => {
      const server = await legacy({ scenario: 'single' }, { ssePostStatus: status });
      const lines: string[] = [];
      const restore = setDebugSink({ debug: 'stepbind:connect', write: (l) => lines.push(l) });
      try {
        const { runtime } = await open({ url: server.url });
        await using step = await runtime.captureBinding();
        await step.prepareCall('web__alpha').run({});
        expect(web(runtime)).toMatchObject({ state: 'ready', transport: 'sse', era: 'legacy' });
      } finally {
        restore();
      }
      expect(refused(server)).toBe(1);
      expect(lines.join('')).toContain(`answered HTTP ${status}; trying the legacy HTTP+SSE`);
    },
  );

  it('falls back when initialize over Streamable HTTP is refused with 400 (the probe alone does not decide)', async () => {
    const server = await legacy({ scenario: 'single' }, { ssePostStatus: 400 });
    const { runtime } = await open({ url: server.url });
    await using step = await runtime.captureBinding();
    await step.prepareCall('web__alpha').run({});
    expect(web(runtime)).toMatchObject({ transport: 'sse' });
    // server/discover, then initialize: both refused, then the SSE stream.
    expect(refused(server)).toBe(2);
  });

  it('does not fall back on a server error (500): the start fails over Streamable HTTP', async () => {
    const server = await legacy({ scenario: 'single' }, { ssePostStatus: 500 });
    const error = await failure(open({ url: server.url, startupTimeoutMs: 5_000 }));
    expect(error.code).toBe('REQUIRED_SERVERS_FAILED');
    const cause = (error.detail['failures'] as { detail: Record<string, unknown> }[])[0];
    expect(cause?.detail).toMatchObject({ httpStatus: 500, transport: 'http' });
    expect(server.events.some((e) => e.event === 'session')).toBe(false);
  });

  it('does not fall back on 401 to a configured header: the start fails over Streamable HTTP, the header never shows', async () => {
    const secret = 'sse-header-secret-7f3a';
    const server = await legacy(
      { scenario: 'single' },
      { requireHeaders: { authorization: 'Bearer right' }, echoOn401: true },
    );
    const log = eventLog();
    const error = await failure(
      McpRuntime.open(
        {
          mcpServers: { web: { url: server.url, headers: { authorization: `Bearer ${secret}` } } },
        },
        { onEvent: log.onEvent },
      ),
    );
    const cause = (error.detail['failures'] as { detail: Record<string, unknown> }[])[0];
    expect(cause?.detail).toMatchObject({ httpStatus: 401, transport: 'http' });
    expect(JSON.stringify([error.message, error.detail, log.events])).not.toContain(secret);
  });

  it('does not fall back on 401 to a bearer token: AUTH_FAILED, and the token never shows', async () => {
    const secret = 'sse-bearer-secret-7f3a';
    const server = await legacy(
      { scenario: 'single' },
      { requireHeaders: { authorization: 'Bearer right' }, echoOn401: true },
    );
    const log = eventLog();
    const error = await failure(
      McpRuntime.open(
        { mcpServers: { web: { url: server.url, auth: { type: 'bearer', token: secret } } } },
        { onEvent: log.onEvent },
      ),
    );
    expect(error.detail['failures']).toMatchObject([
      { code: 'AUTH_FAILED', detail: { httpStatus: 401 } },
    ]);
    expect(JSON.stringify([error.message, error.detail, log.events])).not.toContain(secret);
  });

  it('sends a bearer token over HTTP+SSE (stream and POSTs) and never shows it', async () => {
    const secret = 'sse-bearer-right-91c2';
    const server = await legacy(
      { scenario: 'single' },
      { requireHeaders: { authorization: `Bearer ${secret}` } },
    );
    const { runtime, log } = await open({
      type: 'sse',
      url: server.url,
      auth: { type: 'bearer', token: secret },
    });
    await using step = await runtime.captureBinding();
    const { receipt } = await step.prepareCall('web__alpha').run({});
    expect(web(runtime)).toMatchObject({ transport: 'sse', auth: { type: 'bearer' } });
    expect(JSON.stringify([receipt, runtime.status(), log.events])).not.toContain(secret);
  });
});

describe('an HTTP+SSE session that ends', () => {
  it('is lost when the server ends the stream, and reconnects over HTTP+SSE without trying Streamable HTTP again', async () => {
    const server = await legacy({ scenario: 'single' }, { ssePostStatus: 405 });
    const { runtime, log } = await open({ url: server.url });
    expect(refused(server)).toBe(1);
    const lost = nextEvent(log, 'session-lost');
    const reconnected = nextEvent(log, 'server-reconnected');
    expect(await server.forgetSessions()).toBe(1);
    expect(await lost).toMatchObject({ server: 'web', reason: 'session-ended' });
    await reconnected;
    await using step = await runtime.captureBinding();
    await step.prepareCall('web__beta').run({});
    expect(web(runtime)).toMatchObject({ state: 'ready', transport: 'sse' });
    expect(refused(server)).toBe(1);
  });

  it('is reported when the server is killed, and comes back when it restarts on the same port', async () => {
    const first = await legacy();
    const { runtime, log } = await open({ type: 'sse', url: first.url });
    const lost = nextEvent(log, 'session-lost');
    await first.kill();
    expect(await lost).toMatchObject({ server: 'web' });
    expect(web(runtime).state).toBe('reconnecting');
    const reconnected = nextEvent(log, 'server-reconnected');
    await legacy({ scenario: 'single' }, { port: first.port });
    await reconnected;
    await using step = await runtime.captureBinding();
    const { receipt } = await step.prepareCall('web__alpha').run({});
    expect(receipt.outcome).toBe('ok');
  });
});

describe('closing an HTTP+SSE runtime', () => {
  it('leaves no socket and no timer behind', async () => {
    const server = await legacy();
    const count = (kind: string): number =>
      process.getActiveResourcesInfo().filter((r) => r === kind).length;
    const sockets = count('TCPSocketWrap');
    const timers = count('Timeout');
    const { runtime } = await open({ url: server.url });
    await using step = await runtime.captureBinding();
    await step.prepareCall('web__alpha').run({});
    expect(count('TCPSocketWrap')).toBeGreaterThan(sockets);
    step.release();
    await runtime.close();
    expect(count('TCPSocketWrap')).toBeLessThanOrEqual(sockets);
    expect(count('Timeout')).toBeLessThanOrEqual(timers);
  });
});

describe('type "http" against a Streamable HTTP server', () => {
  it('stays on Streamable HTTP: no fallback, no SSE transport', async () => {
    const server = await spawnHttpServer({ scenario: 'single' });
    servers.push(server);
    const { runtime } = await open({ url: server.url });
    await using step = await runtime.captureBinding();
    await step.prepareCall('web__alpha').run({});
    expect(web(runtime)).toMatchObject({ state: 'ready', transport: 'http', era: 'legacy' });
  });
});

describe('HTTP+SSE message limits', () => {
  it('an event over maxMessageBytes on the stream fails the request MESSAGE_TOO_LARGE and closes the connection', async () => {
    const big = { ...scriptedTool('big'), description: 'x'.repeat(8_000) };
    const server = await legacy({
      scenario: 'fixture',
      fixture: { generations: [{ pages: [{ tools: [big] }] }] },
    });
    const config = parseConfig({
      mcpServers: { web: { type: 'sse', url: server.url, maxMessageBytes: 4_096 } },
    }).servers.get('web');
    if (config === undefined) throw new Error('no config');
    const connection = await connectServer('web', config);
    try {
      const closed = new Promise<void>((resolve) => connection.onClose(resolve));
      const error = await failure(
        connection.listPage({
          cursor: undefined,
          timeoutMs: 600_000,
          signal: new AbortController().signal,
        }),
      );
      expect(error.code).toBe('MESSAGE_TOO_LARGE');
      expect(error.detail).toMatchObject({ server: 'web', method: 'tools/list', limit: 4_096 });
      expect(error.message).toContain('the connection was closed');
      await closed;
      expect(connection.fault?.code).toBe('MESSAGE_TOO_LARGE');
    } finally {
      await connection.close();
    }
  });
});

const everythingEntry = fileURLToPath(
  new URL(
    '../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
    import.meta.url,
  ),
);

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('server-everything in its sse mode (a third-party HTTP+SSE server)', () => {
  it('is reached by type "http" through the fallback (its POST on /sse is a 404) and by type "sse"', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [everythingEntry, 'sse'], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const gone = new Promise((resolve) => child.once('close', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}`)));
        createInterface({ input: child.stderr }).on('line', (line) => {
          if (line.includes(`running on port ${port}`)) resolve();
        });
      });
      const url = `http://127.0.0.1:${port}/sse`;
      for (const entry of [{ url }, { type: 'sse', url }]) {
        const { runtime } = await open(entry);
        await using step = await runtime.captureBinding();
        const echo = step.tools.find((t) => t.name === 'web__echo');
        expect(echo).toBeDefined();
        const { result } = await step.prepareCall('web__echo').run({ message: 'over sse' });
        expect(JSON.stringify(result.content)).toContain('over sse');
        expect(web(runtime)).toMatchObject({ state: 'ready', transport: 'sse', era: 'legacy' });
        step.release();
        await runtime.close();
      }
    } finally {
      child.kill('SIGKILL');
      await gone;
    }
  });
});
