import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isStepbindError } from '@stepbind/binding';
import { spawnHttpServer, type HttpServerProcess } from '@stepbind/testkit';
import { parseConfig } from '../src/config.js';
import { connectServer } from '../src/connect.js';
import type { EraMemory } from '../src/connection.js';
import { headerValue, paramHeadersOf, paramHeaderValues } from '../src/era/param-headers.js';
import { McpRuntime } from '../src/index.js';

/** One POST the modern test server received. */
interface Seen {
  readonly method: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: Record<string, unknown>;
}

const TOOLS = [
  { name: 'echo', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
  { name: 'big', inputSchema: { type: 'object', properties: {} } },
  {
    name: 'annotated',
    inputSchema: {
      type: 'object',
      properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, q: { type: 'string' } },
    },
  },
  {
    name: 'broken',
    inputSchema: {
      type: 'object',
      properties: { score: { type: 'number', 'x-mcp-header': 'Score' } },
    },
  },
];

/**
 * A stateless 2026-07-28 server over real HTTP (raw JSON-RPC, so every header can be checked):
 * `server/discover`, `tools/list` in two pages with their own `ttlMs`, `tools/call`; it refuses
 * `initialize` and any request without `MCP-Protocol-Version: 2026-07-28`, and records every POST.
 * `big` answers with a body over the client's 4096-byte limit.
 */
async function modernServer(): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      const method = String(body['method']);
      seen.push({ method, headers: req.headers, body });
      const reply = (status: number, payload: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
      };
      if (body['id'] === undefined) {
        res.writeHead(202).end();
        return;
      }
      const id = body['id'];
      if (req.headers['mcp-protocol-version'] !== '2026-07-28' || method === 'initialize') {
        reply(400, { jsonrpc: '2.0', id, error: { code: -32022, message: 'unsupported' } });
        return;
      }
      const meta = { 'io.modelcontextprotocol/serverInfo': { name: 'http-era', version: '3.0.0' } };
      const params = (body['params'] ?? {}) as Record<string, unknown>;
      if (method === 'server/discover') {
        reply(200, {
          jsonrpc: '2.0',
          id,
          result: {
            supportedVersions: ['2026-07-28'],
            capabilities: { tools: {} },
            serverInfo: { name: 'http-era', version: '3.0.0' },
            ttlMs: 0,
            cacheScope: 'private',
          },
        });
      } else if (method === 'tools/list') {
        const first = params['cursor'] === undefined;
        reply(200, {
          jsonrpc: '2.0',
          id,
          result: {
            tools: first ? [TOOLS[0], TOOLS[2], TOOLS[3]] : [TOOLS[1]],
            ...(first ? { nextCursor: 'p2' } : {}),
            ttlMs: first ? 60_000 : 0,
            cacheScope: 'private',
            _meta: meta,
          },
        });
      } else if (method === 'tools/call' && params['name'] === 'cut') {
        // An event stream that ends without answering (a server that dropped the request).
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(': nothing follows\n\n');
      } else if (method === 'tools/call' && params['name'] === 'big') {
        reply(200, {
          jsonrpc: '2.0',
          id,
          result: { content: [{ type: 'text', text: 'x'.repeat(8192) }] },
        });
      } else if (method === 'tools/call') {
        reply(200, {
          jsonrpc: '2.0',
          id,
          result: {
            content: [{ type: 'text', text: `echo ${JSON.stringify(params['arguments'])}` }],
            _meta: meta,
          },
        });
      } else {
        reply(200, { jsonrpc: '2.0', id, error: { code: -32601, message: 'no such method' } });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, seen, server };
}

const servers: Server[] = [];
const children: HttpServerProcess[] = [];
const runtimes: McpRuntime[] = [];

afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.close();
  for (const child of children.splice(0)) await child.close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function open(url: string, headers: Record<string, string> = {}): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    { mcpServers: { web: { url, headers, maxMessageBytes: 4096 } } },
    { approval: 'none' },
  );
  runtimes.push(runtime);
  return runtime;
}

describe('protocol era over Streamable HTTP', () => {
  it('a 2026-07-28 HTTP server is discovered with one stateless POST, listed page by page and called with the era headers', async () => {
    const { url, seen } = await modernServer();
    const runtime = await open(url, { Authorization: 'Bearer sekret-token-123' });
    expect(runtime.status().servers[0]).toMatchObject({
      era: 'modern',
      protocolVersion: '2026-07-28',
    });
    expect(runtime.registry.current('web', 'default')?.identity.serverInfo).toEqual({
      name: 'http-era',
      version: '3.0.0',
    });
    await using step = await runtime.captureBinding();
    // `broken` carries an invalid x-mcp-header (on a number): left out, never callable.
    expect(step.tools.map((t) => t.name).sort()).toEqual([
      'web__annotated',
      'web__big',
      'web__echo',
    ]);
    const { result } = await step.prepareCall('web__echo').run({ text: 'hi' });
    expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"hi"}' }]);

    expect(seen.map((s) => s.method)).toEqual([
      'server/discover',
      'tools/list',
      'tools/list',
      'tools/call',
    ]);
    for (const s of seen) {
      expect(s.headers['mcp-protocol-version']).toBe('2026-07-28');
      expect(s.headers['mcp-method']).toBe(s.method);
      expect(s.headers['mcp-session-id']).toBeUndefined();
      expect(s.headers['authorization']).toBe('Bearer sekret-token-123');
      const meta = (s.body['params'] as Record<string, Record<string, unknown>>)['_meta'];
      expect(meta?.['io.modelcontextprotocol/protocolVersion']).toBe('2026-07-28');
    }
    expect(seen.find((s) => s.method === 'tools/call')?.headers['mcp-name']).toBe('echo');
    await step.prepareCall('web__annotated').run({ region: 'us-west1', q: 'x' });
    const annotated = seen.at(-1);
    expect(annotated?.headers['mcp-name']).toBe('annotated');
    expect(annotated?.headers['mcp-param-region']).toBe('us-west1');
    expect(annotated?.headers['mcp-param-q']).toBeUndefined();
    expect(seen.find((s) => s.method === 'tools/list')?.headers['mcp-name']).toBeUndefined();
  });

  it('an answer over maxMessageBytes fails that call MESSAGE_TOO_LARGE at once, without the secret header', async () => {
    const { url } = await modernServer();
    const runtime = await open(url, { Authorization: 'Bearer sekret-token-123' });
    await using step = await runtime.captureBinding();
    const error: unknown = await step
      .prepareCall('web__big')
      .run({})
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isStepbindError(error) && error.code).toBe('MESSAGE_TOO_LARGE');
    expect(
      JSON.stringify({ m: (error as Error).message, d: (error as { detail: unknown }).detail }),
    ).not.toContain('sekret-token-123');
    // The connection stays usable: HTTP frames each answer on its own.
    const { result } = await step.prepareCall('web__echo').run({ text: 'after' });
    expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"after"}' }]);
  });

  it('an event stream that ends without its answer fails that call at once, not at its timeout', async () => {
    const { url } = await modernServer();
    const config = parseConfig({ mcpServers: { web: { url } } }).servers.get('web');
    if (config === undefined) throw new Error('no server');
    const connection = await connectServer('web', config);
    try {
      // An hour-long timeout no test could wait for: only the stream's end can fail the call.
      const error: unknown = await connection.callTool('cut', {}, { timeoutMs: 3_600_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isStepbindError(error) && error.code).toBe('MALFORMED_MESSAGE');
      expect((error as Error).message).toContain('ended its stream without an answer');
      const result = await connection.callTool('echo', { text: 'after' }, { timeoutMs: 30_000 });
      expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"after"}' }]);
    } finally {
      await connection.close();
    }
  });

  it('a 2025-era HTTP server refuses server/discover and gets a 2025-11-25 session; the era is remembered', async () => {
    const legacy = await spawnHttpServer({ scenario: 'single' });
    children.push(legacy);
    const config = parseConfig({ mcpServers: { web: { url: legacy.url } } }).servers.get('web');
    if (config === undefined) throw new Error('no server');
    const eras: EraMemory = new Map();
    const first = await connectServer('web', config, { eras });
    try {
      expect(first.era).toBe('legacy');
      expect(first.hello.protocolVersion).toBe('2025-11-25');
      expect(eras.get([...eras.keys()][0]!)).toBe('legacy');
    } finally {
      await first.close();
    }
    const runtime = await open(legacy.url);
    expect(runtime.status().servers[0]).toMatchObject({
      era: 'legacy',
      protocolVersion: '2025-11-25',
    });
    await using step = await runtime.captureBinding();
    expect(step.tools.length).toBeGreaterThan(0);
  });

  it('an unreachable HTTP server fails SERVER_START_FAILED once, with the secret redacted', async () => {
    const { url, server } = await modernServer();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    servers.splice(servers.indexOf(server), 1);
    const error: unknown = await McpRuntime.open(
      { mcpServers: { web: { url: `${url}?key=sekret-query-456`, required: true } } },
      { approval: 'none' },
    ).then(
      (r) => r.close(),
      (e: unknown) => e,
    );
    expect(isStepbindError(error)).toBe(true);
    expect((error as Error).message).not.toContain('sekret-query-456');
  });

  it('Mcp-Name values that are not plain visible ASCII are sent Base64-encoded', () => {
    expect(headerValue('my-hyphenated-tool')).toBe('my-hyphenated-tool');
    expect(headerValue('héllo')).toBe(`=?base64?${Buffer.from('héllo').toString('base64')}?=`);
    expect(headerValue(' padded')).toMatch(/^=\?base64\?/);
  });

  it('x-mcp-header annotations: valid ones map to Mcp-Param-* values, invalid ones refuse the tool', () => {
    const schema = (properties: Record<string, unknown>): unknown => ({
      type: 'object',
      properties,
    });
    const ok = paramHeadersOf(
      schema({
        region: { type: 'string', 'x-mcp-header': 'Region' },
        n: { type: 'integer', 'x-mcp-header': 'N' },
        flag: { type: 'boolean', 'x-mcp-header': 'Flag' },
        query: { type: 'string' },
      }),
    );
    expect(ok.ok).toBe(true);
    if (!ok.ok) return;
    expect(
      paramHeaderValues(ok.headers, { region: ' eu', n: 42, flag: false, query: 'q', extra: 1 }),
    ).toEqual({
      'mcp-param-region': `=?base64?${Buffer.from(' eu').toString('base64')}?=`,
      'mcp-param-n': '42',
      'mcp-param-flag': 'false',
    });
    expect(paramHeaderValues(ok.headers, { region: null })).toEqual({});
    for (const bad of [
      { v: { type: 'string', 'x-mcp-header': '' } },
      { v: { type: 'number', 'x-mcp-header': 'Score' } },
      { v: { type: 'object', 'x-mcp-header': 'Data' } },
      { v: { type: 'string', 'x-mcp-header': 'My Region' } },
      { v: { type: 'string', 'x-mcp-header': 'Région' } },
      { a: { type: 'string', 'x-mcp-header': 'X' }, b: { type: 'string', 'x-mcp-header': 'x' } },
    ]) {
      expect(paramHeadersOf(schema(bad)).ok).toBe(false);
    }
  });
});

describe('the era pin over Streamable HTTP', () => {
  const configOf = (url: string, protocol: string) => {
    const config = parseConfig({ mcpServers: { web: { url, protocol } } }).servers.get('web');
    if (config === undefined) throw new Error('no server');
    return config;
  };

  it('"2025-11-25" never POSTs server/discover: its first request is initialize', async () => {
    const { url, seen } = await modernServer();
    // The modern test server refuses initialize, so the start fails; what matters is what was sent.
    const error: unknown = await connectServer('web', configOf(url, '2025-11-25')).then(
      (c) => c.close(),
      (e: unknown) => e,
    );
    expect(isStepbindError(error, 'SERVER_START_FAILED')).toBe(true);
    expect(seen.map((s) => s.method)).not.toContain('server/discover');
    expect(seen[0]?.method).toBe('initialize');
    const legacy = await spawnHttpServer({ scenario: 'single' });
    children.push(legacy);
    const eras: EraMemory = new Map();
    const connection = await connectServer('web', configOf(legacy.url, '2025-11-25'), { eras });
    try {
      expect(connection.era).toBe('legacy');
    } finally {
      await connection.close();
    }
    expect(eras.size).toBe(0);
  });

  it('"2026-07-28" serves a modern server and fails a 2025-era one naming the protocol key', async () => {
    const { url } = await modernServer();
    const modern = await connectServer('web', configOf(url, '2026-07-28'));
    try {
      expect(modern.era).toBe('modern');
    } finally {
      await modern.close();
    }
    const legacy = await spawnHttpServer({ scenario: 'single' });
    children.push(legacy);
    const error: unknown = await connectServer('web', configOf(legacy.url, '2026-07-28')).then(
      (c) => c.close(),
      (e: unknown) => e,
    );
    expect(isStepbindError(error, 'SERVER_START_FAILED')).toBe(true);
    expect((error as { detail: Record<string, unknown> }).detail['configPath']).toBe(
      '$.mcpServers.web.protocol',
    );
  });
});
