/**
 * A modern-era (2026-07-28) stdio server built on `@modelcontextprotocol/server` 2.4.0
 * (`serveStdio`), run as a child process: `node sdk2-server.js [TOOLS] [PAGE_SIZE] [TTLS]`.
 *
 * - `tools/list` serves TOOLS tools (default 6) in pages of PAGE_SIZE (default 2), page `i` with
 *   `ttlMs` TTLS[i] (a comma-separated list, default `60000,0,5000`; the last repeats) and
 *   `cacheScope: 'public'`, so a client that keeps page 1's TTL for the whole list is caught.
 * - `echo` answers `echo <json of the arguments>`.
 * - `SDK2_SERVER_SCOPES` (environment, comma-separated `public`/`private`/`none`, the last repeats;
 *   default `public`): each page's `cacheScope` (`none` leaves it out).
 * - `SDK2_SERVER_LOG` (environment): every `tools/list` request is appended to that file as one JSON
 *   line (`{"method":"tools/list","cursor":...}`), so a test counts what reached the server.
 * - `legacy: 'serve'`: a 2025-era client that opens with `initialize` is served too (dual era).
 */
import { appendFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Server, type Tool } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

/** The `serverInfo` of {@link runSdk2Server}. */
export const SDK2_SERVER_INFO = Object.freeze({ name: 'sdk2-era-server', version: '2.4.0' });

/** Options of {@link runSdk2Server}. */
export interface Sdk2ServerOptions {
  /** @default 6 */
  readonly tools?: number;
  /** @default 2 */
  readonly pageSize?: number;
  /** `ttlMs` per page; the last value repeats. @default [60000, 0, 5000] */
  readonly ttls?: readonly number[];
  /** `cacheScope` per page (`none`: left out); the last value repeats. @default ['public'] */
  readonly scopes?: readonly ('public' | 'private' | 'none')[];
  /** A file each `tools/list` request is appended to as one JSON line. */
  readonly log?: string;
}

/** The tools the server lists, in order: `echo`, then `t1`... */
export function sdk2Tools(count: number): Tool[] {
  return Array.from({ length: count }, (_, i) => ({
    name: i === 0 ? 'echo' : `t${i}`,
    description: `tool ${i} of the sdk2 era server`,
    inputSchema: {
      type: 'object',
      properties: { text: { type: 'string' }, n: { type: 'integer' } },
    },
  }));
}

/** Serves the server on this process's stdio until stdin ends. */
export function runSdk2Server(options: Sdk2ServerOptions = {}): void {
  const tools = sdk2Tools(options.tools ?? 6);
  const pageSize = Math.max(1, options.pageSize ?? 2);
  const ttls = options.ttls ?? [60_000, 0, 5_000];
  const scopes = options.scopes ?? ['public'];
  serveStdio(() => {
    const server = new Server(
      { ...SDK2_SERVER_INFO },
      { capabilities: { tools: { listChanged: true } } },
    );
    server.setRequestHandler('tools/list', (request) => {
      const start = Number(request.params?.cursor ?? '0');
      const page = Math.floor(start / pageSize);
      const next = start + pageSize;
      const cursor = request.params?.cursor ?? null;
      if (options.log !== undefined) {
        appendFileSync(options.log, `${JSON.stringify({ method: 'tools/list', cursor })}\n`);
      }
      const scope = scopes[Math.min(page, scopes.length - 1)] ?? 'public';
      return {
        tools: tools.slice(start, next),
        ...(next < tools.length ? { nextCursor: String(next) } : {}),
        ttlMs: ttls[Math.min(page, ttls.length - 1)] ?? 0,
        ...(scope === 'none' ? {} : { cacheScope: scope }),
      };
    });
    server.setRequestHandler('tools/call', (request) => ({
      content: [
        {
          type: 'text',
          text: `echo ${JSON.stringify(request.params.arguments ?? {})}`,
        },
      ],
    }));
    return server;
  });
}

/** This file's path, to run it as a child process. */
export function sdk2ServerPath(): string {
  return new URL(import.meta.url).pathname;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [tools, pageSize, ttls] = process.argv.slice(2);
  const scopes = process.env['SDK2_SERVER_SCOPES'];
  const log = process.env['SDK2_SERVER_LOG'];
  runSdk2Server({
    ...(scopes === undefined
      ? {}
      : { scopes: scopes.split(',') as ('public' | 'private' | 'none')[] }),
    ...(log === undefined ? {} : { log }),
    ...(tools === undefined ? {} : { tools: Number(tools) }),
    ...(pageSize === undefined ? {} : { pageSize: Number(pageSize) }),
    ...(ttls === undefined ? {} : { ttls: ttls.split(',').map(Number) }),
  });
}
