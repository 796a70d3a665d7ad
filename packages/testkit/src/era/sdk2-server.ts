/**
 * A stdio server built on `@modelcontextprotocol/server` 2.4.0 (`serveStdio`), run as a child
 * process: `node sdk2-server.js [TOOLS] [PAGE_SIZE] [TTLS] [--modern-only]`. Its tools are those of
 * {@link Sdk2Catalog} (paginated with per-page `ttlMs`, `echo`, `change` announcing `list_changed`
 * on `subscriptions/listen`, `ask` asking through `input_required`).
 *
 * Dual era by default: `serveStdio` decides the era from the opening message, so a client that opens
 * with `server/discover` (or any enveloped request) is served 2026-07-28, and one that opens with
 * `initialize` is served the 2025 era by an instance from the same factory. `--modern-only` answers
 * an `initialize` with the unsupported-protocol-version error instead (`legacy: 'reject'`).
 *
 * Every inbound message is logged to `SDK2_SERVER_LOG` (see `sdk2-catalog.ts`); `SDK2_SERVER_SCOPES`
 * (comma-separated `public`/`private`/`none`, the last repeats) sets each page's `cacheScope`.
 */
import { pathToFileURL } from 'node:url';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/server';
import { serveStdio, StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { logInbound, Sdk2Catalog, type Sdk2ServerOptions } from './sdk2-catalog.js';

export { SDK2_SERVER_INFO, sdk2Tools } from './sdk2-catalog.js';
export type { Sdk2ServerOptions } from './sdk2-catalog.js';

/** A transport that logs every inbound message before the entry sees it. */
class LoggingTransport implements Transport {
  readonly #inner: Transport;
  onclose?: () => void;
  onerror?: (error: Error) => void;

  constructor(inner: Transport) {
    this.#inner = inner;
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
  }

  set onmessage(handler: Transport['onmessage']) {
    this.#inner.onmessage =
      handler === undefined
        ? undefined
        : (message, extra) => {
            logInbound(message);
            handler(message, extra);
          };
  }

  get onmessage(): Transport['onmessage'] {
    return this.#inner.onmessage;
  }

  start(): Promise<void> {
    return this.#inner.start();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.#inner.send(message);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}

/** Serves the server on this process's stdio until stdin ends. */
export function runSdk2Server(options: Sdk2ServerOptions = {}): void {
  const catalog = new Sdk2Catalog(options);
  serveStdio(
    // Inside a modern-pinned connection the entry routes this onto the open listen streams.
    catalog.factory((server) => server.sendToolListChanged()),
    {
      legacy: options.modernOnly === true ? 'reject' : 'serve',
      transport: new LoggingTransport(new StdioServerTransport()),
    },
  );
}

/** This file's path, to run it as a child process. */
export function sdk2ServerPath(): string {
  return new URL(import.meta.url).pathname;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2);
  const [tools, pageSize, ttls] = argv.filter((a) => !a.startsWith('--'));
  const scopes = process.env['SDK2_SERVER_SCOPES'];
  runSdk2Server({
    ...(tools === undefined ? {} : { tools: Number(tools) }),
    ...(pageSize === undefined ? {} : { pageSize: Number(pageSize) }),
    ...(ttls === undefined ? {} : { ttls: ttls.split(',').map(Number) }),
    ...(argv.includes('--modern-only') ? { modernOnly: true } : {}),
    // Per-page cacheScope (comma-separated public/private/none, the last repeats).
    ...(scopes === undefined || scopes === ''
      ? {}
      : { scopes: scopes.split(',') as ('public' | 'private' | 'none')[] }),
  });
}
