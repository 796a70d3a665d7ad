import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createEventLog,
  isProcessAlive,
  spawnSdk2HttpServer,
  type Sdk2HttpEvent,
  type Sdk2HttpServerProcess,
  type Sdk2ServerOptions,
} from '@stepbind/testkit';
import { parseConfig } from '../src/config.js';
import { connectServer } from '../src/connect.js';
import type { EraMemory } from '../src/connection.js';
import { McpRuntime, type McpRuntimeOptions } from '../src/index.js';
import { identityKeyOf } from '../src/transports/index.js';
import { failure } from './support/errors.js';

/**
 * stepbind against testkit's `@modelcontextprotocol/server` 2.4.0 server behind `createMcpHandler`
 * (stateless 2026-07-28, with the stateless 2025 fallback), over real Streamable HTTP to a child
 * process. The child prints every request as it arrives, so the tests count what reached it.
 */

const servers: Sdk2HttpServerProcess[] = [];
const runtimes: McpRuntime[] = [];

afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.close();
  for (const server of servers.splice(0)) {
    await server.close();
    expect(isProcessAlive(server.pid)).toBe(false);
  }
});

async function serve(
  options: Sdk2ServerOptions = {},
  port?: number,
): Promise<Sdk2HttpServerProcess> {
  const server = await spawnSdk2HttpServer(options, port === undefined ? {} : { port });
  servers.push(server);
  return server;
}

async function open(url: string, options: McpRuntimeOptions = {}): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    { mcpServers: { web: { url, required: true, limits: { maxTools: 5_000 } } } },
    { approval: 'none', ...options },
  );
  runtimes.push(runtime);
  return runtime;
}

type RequestEvent = Extract<Sdk2HttpEvent, { event: 'request' }>;

function requests(server: Sdk2HttpServerProcess, method?: string): RequestEvent[] {
  return server.events.filter(
    (e): e is RequestEvent =>
      e.event === 'request' && (method === undefined || e.method === method),
  );
}

describe('an SDK 2.4.0 createMcpHandler server over Streamable HTTP', () => {
  it('is discovered as modern with stateless POSTs and every one of its 91 pages is walked', async () => {
    const server = await serve({ tools: 180, pageSize: 2, ttls: [0] });
    const runtime = await open(server.url);
    expect(runtime.status().servers[0]).toMatchObject({
      era: 'modern',
      protocolVersion: '2026-07-28',
    });
    await using step = await runtime.captureBinding();
    expect(step.tools).toHaveLength(182);
    const { result } = await step.prepareCall('web__t179').run({ text: 'last' });
    expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"last"}' }]);
    await server.sync();
    expect(requests(server, 'tools/list')).toHaveLength(91);
    expect(requests(server)[0]?.method).toBe('server/discover');
    expect(requests(server).every((r) => r.era === 'modern')).toBe(true);
  });

  it('a list_changed on the listen stream hard-refreshes; a stale prepared call never reaches the server; the stream stays live for a second change', async () => {
    const server = await serve();
    const events = createEventLog();
    const runtime = await open(server.url, { onEvent: events.onEvent, listChangedDebounceMs: 1 });
    await server.waitFor((e) => e.event === 'request' && e.method === 'subscriptions/listen');
    await using before = await runtime.captureBinding();

    // Prepared on revision 1, run after the change.
    const prepared = before.prepareCall('web__echo');
    const swapped = events.next('catalog-swapped');
    await before.prepareCall('web__change').run({});
    expect(await swapped).toMatchObject({ server: 'web', cause: 'hard-refresh' });
    const stale = await failure(prepared.run({ text: 'stale' }));
    expect(stale.code).toBe('STALE_CATALOG');

    await using after = await runtime.captureBinding();
    expect(after.tools.map((t) => t.name)).toContain('web__added1');
    await after.prepareCall('web__echo').run({ text: 'fresh' });
    await server.sync();
    // The stale call never reached the server: only `change` and the fresh call did.
    expect(requests(server, 'tools/call').map((r) => r.tool)).toEqual(['change', 'echo']);
    // The second change comes from outside stepbind (the server's stdin trigger).
    const again = events.next('catalog-swapped');
    await server.change();
    expect(await again).toMatchObject({ server: 'web', cause: 'hard-refresh' });
    await using third = await runtime.captureBinding();
    expect(third.tools.map((t) => t.name)).toContain('web__added2');
    await server.sync();
    expect(requests(server, 'subscriptions/listen')).toHaveLength(1);
    expect(server.events.some((e) => e.event === 'listen-closed')).toBe(false);
  });

  it('when the server restarts, the listen stream is opened again and a change on the new server is seen', async () => {
    const first = await serve();
    const events = createEventLog();
    const runtime = await open(first.url, { onEvent: events.onEvent, listChangedDebounceMs: 1 });
    await first.waitFor((e) => e.event === 'request' && e.method === 'subscriptions/listen');
    await first.close();
    const second = await serve({}, first.port);
    await second.waitFor((e) => e.event === 'request' && e.method === 'subscriptions/listen');
    const swapped = events.next('catalog-swapped');
    await second.change();
    expect(await swapped).toMatchObject({ server: 'web', cause: 'hard-refresh' });
    await using step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toContain('web__added1');
  });

  it('the listen stream is cancelled on close: the server sees it end, and no socket is left', async () => {
    const server = await serve();
    const runtime = await open(server.url);
    const listen = await server.waitFor(
      (e) => e.event === 'request' && e.method === 'subscriptions/listen',
    );
    const ended = server.waitFor((e) => e.event === 'listen-closed');
    await runtime.close();
    const event = await ended;
    expect(event).toMatchObject({ id: listen.event === 'request' ? listen.id : undefined });
    await server.sync();
    expect(requests(server, 'notifications/cancelled')).toHaveLength(1);
    // No keep-alive socket of the connection's pool is left either (fails by timing out).
    await server.idle();
  });

  it('an input_required (MRTR) call goes to onElicitation and completes over HTTP', async () => {
    const server = await serve();
    const asked: string[] = [];
    const runtime = await open(server.url, {
      onElicitation: (request) => {
        asked.push(request.message);
        return Promise.resolve({ action: 'accept', content: { ok: true } });
      },
    });
    await using step = await runtime.captureBinding();
    const { result } = await step.prepareCall('web__ask').run({});
    expect(asked).toEqual(['Confirm?']);
    expect(result.content).toEqual([{ type: 'text', text: 'confirmed {"ok":true} state round-1' }]);
    await server.sync();
    const asks = requests(server, 'tools/call').filter((r) => r.tool === 'ask');
    expect(asks).toHaveLength(2);
    expect(asks[0]?.id).not.toEqual(asks[1]?.id);
  });

  it('without an elicitation handler an MRTR call over HTTP fails INPUT_REQUIRED naming the question', async () => {
    const server = await serve();
    const runtime = await open(server.url);
    await using step = await runtime.captureBinding();
    const error = await failure(step.prepareCall('web__ask').run({}));
    expect(error.code).toBe('INPUT_REQUIRED');
    // The question is in the detail; the message names only the method and key (MRTR receipts).
    expect(error.message).toContain('elicitation/create');
    expect(error.message).not.toContain('Confirm?');
    expect(error.detail['requests']).toEqual([
      expect.objectContaining({ method: 'elicitation/create', message: 'Confirm?' }),
    ]);
    await server.sync();
    expect(requests(server, 'tools/call').filter((r) => r.tool === 'ask')).toHaveLength(1);
  });
});

describe('the dual-era SDK 2.4.0 HTTP server', () => {
  it('serves the bare SDK 1.32.2 client (initialize, stateless 2025 fallback) on the same endpoint', async () => {
    const server = await serve({ tools: 3 });
    const client = new Client({ name: 'bare-1.32.2', version: '0.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
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
    await server.sync();
    expect(requests(server, 'initialize')).toMatchObject([{ era: 'legacy' }]);
  });

  it('is served in the 2025 era by stepbind when its era is remembered as legacy (MRTR cannot reach the client there)', async () => {
    const server = await serve({ tools: 3 });
    const config = parseConfig({ mcpServers: { web: { url: server.url } } }).servers.get('web');
    if (config === undefined) throw new Error('no server');
    const eras: EraMemory = new Map([[identityKeyOf(config), 'legacy']]);
    const connection = await connectServer('web', config, {
      eras,
      handlers: { onElicitation: () => Promise.resolve({ action: 'accept', content: {} }) },
    });
    try {
      expect(connection.era).toBe('legacy');
      expect(connection.hello.protocolVersion).toBe('2025-11-25');
      const result = await connection.callTool('echo', { text: 'old' }, { timeoutMs: 30_000 });
      expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"old"}' }]);
      // SDK 2.4.0's stateless 2025 fallback cannot send the client a request, so its MRTR shim
      // answers an input_required tool with an error result (a limit of the server, told plainly).
      const asked = await connection.callTool('ask', {}, { timeoutMs: 30_000 });
      expect(asked.isError).toBe(true);
      expect(JSON.stringify(asked.content)).toContain('per-request legacy serving');
    } finally {
      await connection.close();
    }
    // The 2025 transport leaves no keep-alive socket behind either (fails by timing out).
    await server.idle();
    await server.sync();
    expect(requests(server, 'server/discover')).toHaveLength(0);
    expect(requests(server, 'initialize')).toHaveLength(1);
  });

  it('modern-only refuses the bare SDK 1.32.2 client, and stepbind still finds it modern', async () => {
    const server = await serve({ modernOnly: true });
    const client = new Client({ name: 'bare-1.32.2', version: '0.0.0' });
    const refused: unknown = await client
      .connect(new StreamableHTTPClientTransport(new URL(server.url)))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await client.close();
    expect(refused).toBeInstanceOf(Error);
    const runtime = await open(server.url);
    expect(runtime.status().servers[0]).toMatchObject({ era: 'modern' });
  });
});
