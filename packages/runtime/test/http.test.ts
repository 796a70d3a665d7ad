import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { McpRuntime } from '@stepbind/runtime';
import { createScriptedServer, type ScriptedServer } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';

/** A scripted server behind a real Streamable HTTP endpoint on loopback (one MCP session). */
async function startHttp(): Promise<{
  url: string;
  scripted: ScriptedServer;
  headers: string[];
  close: () => Promise<void>;
}> {
  const scripted = createScriptedServer({ scenario: 'normal' });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await scripted.server.connect(transport);
  const headers: string[] = [];
  const http: Server = createServer((req: IncomingMessage, res) => {
    headers.push(String(req.headers['x-tenant'] ?? ''));
    transport.handleRequest(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    scripted,
    headers,
    close: async () => {
      await scripted.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

describe('McpRuntime over Streamable HTTP (loopback)', () => {
  it('discovers every page, sends the configured headers and calls a tool on the captured session', async () => {
    const server = await startHttp();
    cleanups.push(server.close);
    const runtime = await McpRuntime.open({
      mcpServers: { web: { url: server.url, headers: { 'x-tenant': 'acme' }, approval: 'none' } },
    });
    cleanups.push(() => runtime.close());
    await using step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toEqual(['web__alpha', 'web__beta', 'web__gamma']);
    const { result, receipt } = await step.prepareCall('web__gamma').run({});
    expect(result.content).toEqual([{ type: 'text', text: expect.stringContaining('gamma') }]);
    expect(receipt.server).toBe('web');
    expect(server.headers.every((h) => h === 'acme')).toBe(true);
    expect(server.scripted.audit.filter((e) => e.method === 'tools/list')).toHaveLength(3);
    expect(
      server.scripted.audit.filter((e) => e.method === 'tools/call').map((e) => e.tool),
    ).toEqual(['gamma']);
  });

  it('reports an unreachable URL as SERVER_START_FAILED naming the server', async () => {
    const error: unknown = await McpRuntime.open({
      mcpServers: { down: { url: 'http://127.0.0.1:9/mcp', startupTimeoutMs: 2_000 } },
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'REQUIRED_SERVERS_FAILED' });
    expect((error as Error).message).toContain('down: SERVER_START_FAILED');
  });
});
