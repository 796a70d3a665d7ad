/**
 * The SDK 2.4.0 server of {@link Sdk2Catalog} over Streamable HTTP, served by `createMcpHandler`
 * behind a plain `node:http` server at `http://127.0.0.1:<port>/mcp`, run as a child process:
 * `node sdk2-http.js --options <Sdk2ServerOptions JSON> [--port N]`.
 *
 * - The 2026-07-28 era is stateless: every POST is answered by a fresh instance from the factory;
 *   `subscriptions/listen` streams are held by the handler and fed by `handler.notify`.
 * - Dual era by default (`legacy: 'stateless'`): a 2025-era client that opens with `initialize` is
 *   served statelessly (no session id; GET and DELETE answer 405). `modernOnly` rejects it.
 *
 * Events go to stdout as JSON lines ({@link Sdk2HttpEvent}); the first is `listening`. A stdin line
 * `{"command":"change"}` changes the catalog as the `change` tool does; `{"command":"sync"}`
 * answers `synced`; `{"command":"idle"}` answers `idle` once no TCP connection is left open. The server ends when stdin
 * closes or on SIGTERM. Inbound messages are also logged to `SDK2_SERVER_LOG` if set.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { createMcpHandler } from '@modelcontextprotocol/server';
import { logInbound, Sdk2Catalog, type Sdk2ServerOptions } from './sdk2-catalog.js';

/** One event the HTTP child prints on stdout. */
export type Sdk2HttpEvent =
  | { readonly event: 'listening'; readonly port: number; readonly pid: number }
  /** One HTTP request as it arrives (`method`: the JSON-RPC method of a POST, else the HTTP method). */
  | {
      readonly event: 'request';
      readonly method: string;
      readonly id?: string | number;
      readonly tool?: string;
      readonly era: 'modern' | 'legacy';
    }
  /** A `subscriptions/listen` response stream ended (the client went away, or the server closed). */
  | { readonly event: 'listen-closed'; readonly id?: string | number }
  /** The catalog changed (`token`: that of the stdin command, absent for the `change` tool). */
  | { readonly event: 'changed'; readonly changes: number; readonly token?: number }
  /** The answer to a stdin `sync` command: every event before it has been printed. */
  | { readonly event: 'synced'; readonly token: number }
  /** The answer to a stdin `idle` command, once no TCP connection to the server is left open. */
  | { readonly event: 'idle'; readonly token: number };

/** Upper bound of a request body this server reads. */
const MAX_BODY = 4 * 1024 * 1024;

function emit(event: Sdk2HttpEvent): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Whether a message carries the 2026-07-28 envelope claim. */
function isModern(message: unknown): boolean {
  const params = isRecord(message) && isRecord(message['params']) ? message['params'] : {};
  const meta = isRecord(params['_meta']) ? params['_meta'] : {};
  return typeof meta['io.modelcontextprotocol/protocolVersion'] === 'string';
}

/** Starts the server; resolves once it listens (see the module comment). */
export async function runSdk2HttpServer(options: Sdk2ServerOptions = {}, port = 0): Promise<void> {
  const catalog = new Sdk2Catalog(options);
  const handler = createMcpHandler(
    catalog.factory(() => {
      handler.notify.toolsChanged();
      emit({ event: 'changed', changes: catalog.changes });
    }),
    {
      legacy: options.modernOnly === true ? 'reject' : 'stateless',
      onerror: (error) => process.stderr.write(`sdk2 http: ${error.message}\n`),
    },
  );

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    const text = req.method === 'POST' ? await readBody(req) : undefined;
    if (text === undefined && req.method === 'POST') {
      res.writeHead(413).end();
      return;
    }
    const message = text === undefined ? undefined : parse(text);
    const era = isModern(message) ? 'modern' : 'legacy';
    logInbound(message, era);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    // The handler cancels the exchange (a listen stream among them) when the client goes away.
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    const request = new Request(url, {
      method: req.method ?? 'GET',
      headers,
      ...(text === undefined ? {} : { body: text }),
      signal: gone.signal,
    });
    const m = isRecord(message) ? message : {};
    const method = typeof m['method'] === 'string' ? m['method'] : (req.method ?? 'GET');
    const id = typeof m['id'] === 'string' || typeof m['id'] === 'number' ? m['id'] : undefined;
    const params = isRecord(m['params']) ? m['params'] : {};
    emit({
      event: 'request',
      method,
      ...(id === undefined ? {} : { id }),
      ...(method === 'tools/call' && typeof params['name'] === 'string'
        ? { tool: params['name'] }
        : {}),
      era,
    });
    const response = await handler.fetch(
      request,
      message === undefined ? {} : { parsedBody: message },
    );
    if (method === 'subscriptions/listen') {
      res.once('close', () =>
        emit({ event: 'listen-closed', ...(id === undefined ? {} : { id }) }),
      );
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.flushHeaders();
    if (response.body === null) {
      res.end();
      return;
    }
    const reader = response.body.getReader();
    res.once('close', () => void reader.cancel().catch(() => undefined));
    for (;;) {
      const chunk: { readonly done: boolean; readonly value?: Uint8Array } = await reader
        .read()
        .catch(() => ({ done: true }));
      if (chunk.done || chunk.value === undefined || res.destroyed) break;
      res.write(chunk.value);
    }
    res.end();
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      process.stderr.write(`sdk2 http: ${String(error)}\n`);
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  // Clients may keep idle sockets for 10 minutes (`Keep-Alive: timeout=600`, as behind many load
  // balancers), so a client that leaves its pool open after close is caught by `idle`.
  server.keepAliveTimeout = 600_000;
  // Open TCP connections, so a test can wait until its client has left none behind.
  const sockets = new Set<Socket>();
  const idleWaiters: number[] = [];
  const checkIdle = (): void => {
    if (sockets.size > 0) return;
    for (const token of idleWaiters.splice(0)) emit({ event: 'idle', token });
  };
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      checkIdle();
    });
  });
  const shutdown = (): void => {
    server.closeAllConnections();
    server.close();
    void handler.close().finally(() => process.exit(0));
  };
  process.stdin.once('end', shutdown);
  process.once('SIGTERM', shutdown);
  createInterface({ input: process.stdin }).on('line', (line) => {
    const command = parse(line) as { command?: unknown; token?: unknown } | undefined;
    if (command?.command === 'change') {
      const changes = catalog.change();
      handler.notify.toolsChanged();
      const token = typeof command.token === 'number' ? { token: command.token } : {};
      emit({ event: 'changed', changes, ...token });
    } else if (command?.command === 'sync' && typeof command.token === 'number') {
      emit({ event: 'synced', token: command.token });
    } else if (command?.command === 'idle' && typeof command.token === 'number') {
      idleWaiters.push(command.token);
      checkIdle();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const bound = (server.address() as AddressInfo).port;
  emit({ event: 'listening', port: bound, pid: process.pid });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const at = process.argv.indexOf('--options');
  const json = at === -1 ? undefined : process.argv[at + 1];
  const portAt = process.argv.indexOf('--port');
  const port = portAt === -1 ? 0 : Number(process.argv[portAt + 1]);
  runSdk2HttpServer(json === undefined ? {} : (JSON.parse(json) as Sdk2ServerOptions), port).catch(
    (error: unknown) => {
      process.stderr.write(`sdk2 http: ${String(error)}\n`);
      process.exit(1);
    },
  );
}
