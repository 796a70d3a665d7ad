/**
 * A protected MCP server for tests (RFC 9728 and the MCP authorization spec, resource side): the
 * SDK server over Streamable HTTP on 127.0.0.1, serving protected resource metadata, answering
 * `401` with a `WWW-Authenticate` challenge that points at it, checking JWT access tokens from an
 * {@link AuthorizationServer} and answering `403 insufficient_scope` for a tool whose scope the
 * token lacks.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuthorizationServer } from './authorization-server.js';
import { tokenVerifier, type AcceptedToken } from './verify-token.js';

/** What {@link startProtectedMcpServer} builds. */
export interface ProtectedMcpServerOptions {
  /** Issues the tokens; the server registers itself there as a resource. */
  readonly authorizationServer: AuthorizationServer;
  /** `scopes_supported` in the metadata. @default ['mcp:read', 'mcp:write', 'mcp:admin'] */
  readonly scopes?: readonly string[];
  /** The `scope` of the `401` challenge; `[]` leaves it out. @default ['mcp:read'] */
  readonly challengeScopes?: readonly string[];
  /** Scopes each tool needs beyond a valid token. @default { admin: ['mcp:admin'] } */
  readonly toolScopes?: Readonly<Record<string, readonly string[]>>;
  /**
   * Where the metadata is served: RFC 9728's path-inserted URL
   * (`/.well-known/oauth-protected-resource/mcp`), the root one, or both. @default 'path'
   */
  readonly metadataAt?: 'path' | 'root' | 'both';
  /** Put `resource_metadata` in the challenge (else clients must probe). @default true */
  readonly challengeMetadata?: boolean;
  /** Refuse tokens not bound to a DPoP key (and say so in the metadata). @default false */
  readonly dpopRequired?: boolean;
}

/** What the server has seen so far (a live view). */
export interface ProtectedMcpServerCounts {
  /** Every request to the MCP endpoint. */
  requests: number;
  /** `401` answers. */
  unauthorized: number;
  /** `403 insufficient_scope` answers. */
  forbidden: number;
  /** MCP sessions opened (each `initialize`): unchanged across a token refresh. */
  initializes: number;
  /** Successful `tools/call`s by tool name. */
  readonly calls: Record<string, number>;
}

/** A running protected MCP server. */
export interface ProtectedMcpServer {
  /** The MCP endpoint, `http://127.0.0.1:PORT/mcp`, also the resource identifier. */
  readonly url: string;
  readonly resource: string;
  /** Where the protected resource metadata is (the URL the challenge names). */
  readonly metadataUrl: string;
  readonly counts: ProtectedMcpServerCounts;
  /** The subjects (`sub`) and client ids of every accepted token, in order, without tokens. */
  readonly principals: readonly string[];
  /**
   * Treats every access token seen so far as expired (`401 invalid_token`), as when they outlive
   * their lifetime; resolves with how many. Deterministic, unlike a short TTL.
   */
  expireTokens(): number;
  /** Ends every session and stops listening. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const TOOLS = [
  { name: 'whoami', description: 'Who the access token acts for.' },
  { name: 'echo', description: 'Returns its text argument.' },
  { name: 'admin', description: 'Needs the mcp:admin scope.' },
] as const;

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly server: Server;
}

/** Starts a protected MCP server and resolves once it listens. Nothing outlives `close()`. */
export async function startProtectedMcpServer(
  options: ProtectedMcpServerOptions,
): Promise<ProtectedMcpServer> {
  const as = options.authorizationServer;
  const scopes = options.scopes ?? ['mcp:read', 'mcp:write', 'mcp:admin'];
  const challengeScopes = options.challengeScopes ?? ['mcp:read'];
  const toolScopes = options.toolScopes ?? { admin: ['mcp:admin'] };
  const metadataAt = options.metadataAt ?? 'path';
  const http = createServer();
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', () => resolve());
  });
  const base = `http://127.0.0.1:${String((http.address() as AddressInfo).port)}`;
  const url = `${base}/mcp`;
  const metadataUrl = `${base}/.well-known/oauth-protected-resource${metadataAt === 'root' ? '' : '/mcp'}`;
  as.registerResource(url, scopes);
  const metadata = {
    resource: url,
    authorization_servers: [as.issuer],
    scopes_supported: scopes,
    bearer_methods_supported: ['header'],
    ...(options.dpopRequired === true ? { dpop_bound_access_tokens_required: true } : {}),
  };

  const expired = new Set<string>();
  const seen = new Set<string>();
  const principals: string[] = [];
  const counts: ProtectedMcpServerCounts = {
    requests: 0,
    unauthorized: 0,
    forbidden: 0,
    initializes: 0,
    calls: {},
  };
  const verifier = tokenVerifier({
    issuer: as.issuer,
    resource: url,
    jwks: as.jwks,
    dpopRequired: options.dpopRequired === true,
    expired,
  });
  const sessions = new Map<string, Session>();

  const challenge = (fields: Readonly<Record<string, string>>): string => {
    const all = {
      ...fields,
      ...(options.challengeMetadata === false ? {} : { resource_metadata: metadataUrl }),
    };
    const scheme = options.dpopRequired === true ? 'DPoP algs="ES256 RS256"' : 'Bearer';
    const params = Object.entries(all).map(([name, value]) => `${name}="${value}"`);
    return `${scheme}${scheme === 'Bearer' ? ' ' : ', '}${params.join(', ')}`;
  };
  const refuse = (res: ServerResponse, status: 401 | 403, header: string, body: unknown): void => {
    if (status === 401) counts.unauthorized += 1;
    else counts.forbidden += 1;
    res
      .writeHead(status, { 'content-type': 'application/json', 'www-authenticate': header })
      .end(JSON.stringify(body));
  };

  const openSession = async (
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
  ): Promise<void> => {
    const server = toolServer(counts);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server });
        counts.initializes += 1;
      },
      onsessionclosed: (id) => {
        sessions.delete(id);
      },
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    if (transport.sessionId === undefined) await server.close();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', base).pathname;
    const wellKnown = '/.well-known/oauth-protected-resource';
    if (
      (path === `${wellKnown}/mcp` && metadataAt !== 'root') ||
      (path === wellKnown && metadataAt !== 'path')
    ) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(metadata));
      return;
    }
    if (path !== '/mcp') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    counts.requests += 1;
    const verdict = await verifier.verify(req, url);
    if (!('token' in verdict)) {
      const scope: Record<string, string> =
        challengeScopes.length > 0 ? { scope: challengeScopes.join(' ') } : {};
      const fields =
        verdict.kind === 'missing'
          ? scope
          : { error: 'invalid_token', error_description: verdict.description, ...scope };
      refuse(res, 401, challenge(fields), { error: 'unauthorized' });
      return;
    }
    remember(verdict);
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    const needed = neededScopes(body, toolScopes).filter((s) => !verdict.scopes.includes(s));
    if (needed.length > 0) {
      refuse(
        res,
        403,
        challenge({
          error: 'insufficient_scope',
          scope: [...new Set([...verdict.scopes, ...needed])].join(' '),
          error_description: `needs ${needed.join(' ')}`,
        }),
        { error: 'insufficient_scope' },
      );
      return;
    }
    const auth: AuthInfo = {
      token: verdict.token,
      clientId: verdict.claims.client_id ?? '',
      scopes: [...verdict.scopes],
      ...(verdict.claims.exp === undefined ? {} : { expiresAt: verdict.claims.exp }),
      extra: { sub: verdict.claims.sub ?? null, dpop: verdict.dpop },
    };
    (req as IncomingMessage & { auth?: AuthInfo }).auth = auth;
    const id = req.headers['mcp-session-id'];
    if (typeof id === 'string') {
      const session = sessions.get(id);
      if (session === undefined) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            jsonrpc: '2.0',
            error: { code: -32001, message: 'Session not found' },
            id: null,
          }),
        );
        return;
      }
      await session.transport.handleRequest(req, res, body);
      return;
    }
    await openSession(req, res, body);
  };
  const remember = (accepted: AcceptedToken): void => {
    const jti = accepted.claims.jti;
    if (jti !== undefined) seen.add(jti);
    principals.push(accepted.claims.sub ?? `client:${accepted.claims.client_id ?? '?'}`);
  };

  http.on('request', (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
      else res.destroy();
    });
  });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      const ending = [...sessions.values()].map((s) => s.server.close());
      sessions.clear();
      await Promise.allSettled(ending);
      const done = new Promise<void>((resolve) => http.close(() => resolve()));
      http.closeAllConnections();
      await done;
    })();
    return closing;
  };
  return {
    url,
    resource: url,
    metadataUrl,
    counts,
    principals,
    expireTokens() {
      for (const jti of seen) expired.add(jti);
      return seen.size;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** An SDK server with the test tools; `whoami` answers from the request's verified token. */
function toolServer(counts: ProtectedMcpServerCounts): Server {
  const server = new Server(
    { name: 'stepbind-protected', version: '0.0.0' },
    { capabilities: { tools: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: TOOLS.map((tool) => ({
      ...tool,
      inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } } },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra): CallToolResult => {
    const name = request.params.name;
    counts.calls[name] = (counts.calls[name] ?? 0) + 1;
    const auth = extra.authInfo;
    const text =
      name === 'whoami'
        ? JSON.stringify({
            sub: auth?.extra?.['sub'] ?? null,
            client_id: auth?.clientId ?? null,
            scope: auth?.scopes.join(' ') ?? '',
            dpop: auth?.extra?.['dpop'] ?? false,
          })
        : name === 'echo'
          ? JSON.stringify(request.params.arguments?.['text'] ?? '')
          : 'ok';
    return { content: [{ type: 'text', text }] };
  });
  return server;
}

/** The scopes the tool calls in a JSON-RPC message (or batch) need. */
function neededScopes(
  body: unknown,
  toolScopes: Readonly<Record<string, readonly string[]>>,
): string[] {
  const messages = Array.isArray(body) ? (body as unknown[]) : [body];
  return messages.flatMap((message) => {
    const m = message as { method?: unknown; params?: { name?: unknown } } | null;
    if (m?.method !== 'tools/call' || typeof m.params?.name !== 'string') return [];
    return [...(toolScopes[m.params.name] ?? [])];
  });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return text === '' ? undefined : (JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}
