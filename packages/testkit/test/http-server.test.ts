import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isProcessAlive, spawnHttpServer, type HttpServerProcess } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';

const servers: HttpServerProcess[] = [];
const clients: Client[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
  const pids = servers.map((s) => s.pid);
  for (const server of servers.splice(0)) await server.close();
  expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
});

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'testkit-http-test', version: '0.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }),
  );
  clients.push(client);
  return client;
}

describe('spawnHttpServer', () => {
  it('gives every MCP session its own scripted server and reports each message', async () => {
    const server = await spawnHttpServer({ scenario: 'single' });
    servers.push(server);
    const a = await connect(server.url);
    const b = await connect(server.url);
    expect((await a.listTools()).tools.map((t) => t.name)).toEqual(['alpha', 'beta']);
    await b.callTool({ name: 'beta', arguments: {} });
    const sessions = server.events.filter((e) => e.event === 'session');
    expect(sessions).toHaveLength(2);
    await server.waitFor((e) => e.event === 'message' && e.method === 'tools/call');
    expect(server.events).toContainEqual({
      event: 'message',
      session: (sessions[1] as { session: string }).session,
      method: 'tools/call',
      tool: 'beta',
    });
  });

  it.each([
    [404, 'Session not found'],
    [400, 'No valid session ID provided'],
  ] as const)(
    'answers a forgotten session with %i (%s) while it keeps running',
    async (status, text) => {
      const server = await spawnHttpServer({ scenario: 'single' }, { unknownSession: status });
      servers.push(server);
      const client = await connect(server.url);
      expect(await server.forgetSessions()).toBe(1);
      const error = (await client.listTools().catch((e: unknown) => e)) as Error & {
        code?: number;
      };
      expect(error.code).toBe(status);
      expect(error.message).toContain(text);
      expect(server.events.some((e) => e.event === 'unknown-session')).toBe(true);
    },
  );

  it('can be restarted on the same port after a SIGKILL, forgetting every session', async () => {
    const first = await spawnHttpServer({ scenario: 'single' });
    servers.push(first);
    const client = await connect(first.url);
    await first.kill();
    expect((await first.exited).signal).toBe('SIGKILL');
    const second = await spawnHttpServer({ scenario: 'normal' }, { port: first.port });
    servers.push(second);
    const error = (await client.listTools().catch((e: unknown) => e)) as { code?: number };
    expect(error.code).toBe(404);
    const fresh = await connect(second.url);
    expect((await fresh.listTools()).tools.map((t) => t.name)).toEqual(['alpha']);
  });

  it('refuses requests without the required headers with 401', async () => {
    const server = await spawnHttpServer(
      { scenario: 'single' },
      { requireHeaders: { authorization: 'Bearer right' } },
    );
    servers.push(server);
    const refused = await connect(server.url, { Authorization: 'Bearer wrong' }).catch(
      (e: unknown) => e,
    );
    expect((refused as { code?: number }).code).toBe(401);
    const ok = await connect(server.url, { Authorization: 'Bearer right' });
    expect((await ok.listTools()).tools).toHaveLength(2);
  });
});
