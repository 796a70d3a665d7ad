import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createEventLog } from '@stepbind/testkit';
import { McpRuntime, type RuntimeClock } from '../../src/index.js';

/**
 * Listing freshness of a modern-era server over real Streamable HTTP (stateless POSTs): a private
 * listing fetched with an Authorization header is reused for the same principal, counted at the
 * server, and nothing about it carries the secret.
 */

/** A stateless 2026-07-28 HTTP server: two `private` pages (TTLs 60 s and 30 s); counts `tools/list`. */
async function modernServer(): Promise<{ url: string; lists: () => number; server: Server }> {
  let lists = 0;
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      const id = body['id'];
      if (id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const params = (body['params'] ?? {}) as Record<string, unknown>;
      const tool = (name: string): unknown => ({
        name,
        inputSchema: { type: 'object', properties: {} },
      });
      let result: unknown;
      if (body['method'] === 'server/discover') {
        result = { supportedVersions: ['2026-07-28'], capabilities: { tools: {} } };
      } else if (body['method'] === 'tools/list') {
        lists++;
        const first = params['cursor'] === undefined;
        result = {
          tools: first ? [tool('a')] : [tool('b')],
          ...(first ? { nextCursor: 'p2' } : {}),
          ttlMs: first ? 60_000 : 30_000,
          cacheScope: 'private',
        };
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          result === undefined
            ? { jsonrpc: '2.0', id, error: { code: -32601, message: 'no such method' } }
            : { jsonrpc: '2.0', id, result },
        ),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, lists: () => lists, server };
}

const servers: Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

describe('listing freshness over Streamable HTTP', () => {
  it('a private listing is reused within its smallest TTL for the same principal, without the secret in the event or status', async () => {
    const { url, lists } = await modernServer();
    let now = 0;
    const clock: RuntimeClock = {
      now: () => now,
      setTimeout: () => undefined,
      clearTimeout: () => undefined,
    };
    const log = createEventLog();
    const config = {
      mcpServers: { web: { url, headers: { Authorization: 'Bearer sekret-token-9' } } },
    };
    const runtime = await McpRuntime.open(config, { clock, onEvent: log.onEvent });
    try {
      expect(lists()).toBe(2);
      now = 29_999;
      runtime.updateConfig(config);
      const reused = log.next('listing-reused');
      await runtime.refreshIfDirty();
      expect(await reused).toEqual({
        type: 'listing-reused',
        server: 'web',
        ageMs: 29_999,
        remainingMs: 1,
        scope: 'private',
      });
      expect(lists()).toBe(2);
      expect(JSON.stringify(runtime.status())).not.toContain('sekret');

      now = 30_000;
      runtime.updateConfig(config);
      await runtime.refreshIfDirty();
      expect(lists()).toBe(4);
    } finally {
      await runtime.close();
    }
  });
});
