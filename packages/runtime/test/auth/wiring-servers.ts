/**
 * Loopback MCP servers of both eras for the authorization wiring tests: each records the
 * `Authorization` header of every request and answers `401` (with a careless body that repeats the
 * header, so a test can check the client never shows it) when `accept` refuses it.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createScriptedServer } from '@stepbind/testkit';

/** One request a test server received. */
export interface SeenRequest {
  readonly method: string;
  readonly authorization: string | undefined;
  /** Whether the server processed it (false: answered 401). */
  readonly accepted: boolean;
}

/** A running test server. */
export interface AuthTestServer {
  readonly url: string;
  readonly seen: SeenRequest[];
  /** Which `Authorization` values are let through. */
  accept: (authorization: string | undefined) => boolean;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

function methodOf(text: string): string {
  try {
    const body = JSON.parse(text) as { method?: unknown };
    return typeof body.method === 'string' ? body.method : 'response';
  } catch {
    return 'GET';
  }
}

function refuse(res: ServerResponse, authorization: string | undefined): void {
  res.writeHead(401, {
    'content-type': 'application/json',
    'www-authenticate': 'Bearer error="invalid_token"',
  });
  res.end(JSON.stringify({ error: `invalid token: ${String(authorization)}` }));
}

async function listen(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  onClose: () => Promise<void>,
  seen: SeenRequest[],
  state: { accept: (authorization: string | undefined) => boolean },
): Promise<AuthTestServer> {
  const http: Server = createServer(handler);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    get accept() {
      return state.accept;
    },
    set accept(fn) {
      state.accept = fn;
    },
    close: async () => {
      await onClose();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/**
 * A 2025-era server (the SDK's Streamable HTTP transport, one session, the scripted `single`
 * catalog: tools `alpha` and `beta`).
 */
export async function legacyServer(
  accept: (authorization: string | undefined) => boolean,
): Promise<AuthTestServer> {
  const scripted = createScriptedServer({ scenario: 'single' });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
  await scripted.server.connect(transport);
  const seen: SeenRequest[] = [];
  const state = { accept };
  return listen(
    (req, res) => {
      void readBody(req).then((text) => {
        const authorization = req.headers.authorization;
        const accepted = state.accept(authorization);
        seen.push({
          method: req.method === 'POST' ? methodOf(text) : 'GET',
          authorization,
          accepted,
        });
        if (!accepted) {
          refuse(res, authorization);
          return;
        }
        const parsed: unknown = text === '' ? undefined : JSON.parse(text);
        transport.handleRequest(req, res, parsed).catch(() => res.destroy());
      });
    },
    () => scripted.close(),
    seen,
    state,
  );
}

const TOOLS = [
  { name: 'alpha', inputSchema: { type: 'object', properties: {} } },
  { name: 'beta', inputSchema: { type: 'object', properties: {} } },
];

/**
 * A stateless 2026-07-28 server (raw JSON-RPC): `server/discover`, one `tools/list` page fresh for
 * a minute (`private`), and `tools/call`, which answers `echo` with the request's `Authorization`
 * header in a JSON-RPC error (a careless server) and anything else with a text result.
 */
export async function modernServer(
  accept: (authorization: string | undefined) => boolean,
): Promise<AuthTestServer> {
  const seen: SeenRequest[] = [];
  const state = { accept };
  const open = new Set<ServerResponse>();
  return listen(
    (req, res) => {
      void readBody(req).then((text) => {
        const authorization = req.headers.authorization;
        const accepted = state.accept(authorization);
        seen.push({ method: methodOf(text), authorization, accepted });
        if (!accepted) {
          refuse(res, authorization);
          return;
        }
        const body = JSON.parse(text) as Record<string, unknown>;
        const id = body['id'];
        if (id === undefined) {
          res.writeHead(202).end();
          return;
        }
        const reply = (payload: unknown): void => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id, ...(payload as object) }));
        };
        const method = String(body['method']);
        const params = (body['params'] ?? {}) as Record<string, unknown>;
        const meta = {
          'io.modelcontextprotocol/serverInfo': { name: 'auth-era', version: '1.0.0' },
        };
        if (method === 'server/discover') {
          reply({
            result: {
              supportedVersions: ['2026-07-28'],
              capabilities: { tools: {} },
              serverInfo: { name: 'auth-era', version: '1.0.0' },
              ttlMs: 0,
              cacheScope: 'private',
            },
          });
        } else if (method === 'tools/list') {
          reply({ result: { tools: TOOLS, ttlMs: 60_000, cacheScope: 'private', _meta: meta } });
        } else if (method === 'tools/call' && params['name'] === 'beta') {
          reply({ error: { code: -32603, message: `denied for ${String(authorization)}` } });
        } else if (method === 'tools/call') {
          reply({ result: { content: [{ type: 'text', text: 'ok' }], _meta: meta } });
        } else if (method === 'subscriptions/listen') {
          // Held open until the client cancels it or the server closes.
          open.add(res);
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(': listening\n\n');
          res.on('close', () => open.delete(res));
        } else {
          reply({ error: { code: -32601, message: 'no such method' } });
        }
      });
    },
    () => {
      for (const res of open) res.destroy();
      return Promise.resolve();
    },
    seen,
    state,
  );
}
