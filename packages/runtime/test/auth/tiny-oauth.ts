/**
 * A tiny authorization server and protected MCP resource on one loopback `node:http` server, for
 * the edge cases the conformance suite does not cover. Everything it saw is recorded, so tests
 * assert on what went over the wire. Not an MCP server: `/mcp` answers `{"ok":true}` to an
 * authorized POST.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the tiny servers behave. */
export interface TinyOAuthOptions {
  /** The `issuer` the metadata names. @default the server's origin */
  readonly metadataIssuer?: string;
  /** @default ['S256'] */
  readonly codeChallengeMethods?: readonly string[] | null;
  /** Token lifetime in seconds. @default 3600 */
  readonly expiresIn?: number;
  /** `/mcp` answers every authorized request 403 `insufficient_scope`. */
  readonly alwaysInsufficientScope?: boolean;
  /** The token endpoint refuses the code with this OAuth error. */
  readonly refuseCode?: string;
  /** The challenge's `resource_metadata`. @default the path-based well-known URL */
  readonly challengeMetadata?: string;
  /** The resource metadata's `authorization_servers`. @default [the server's origin] */
  readonly authorizationServers?: readonly string[];
  /** The metadata's `authorization_endpoint`. @default `${origin}/authorize` */
  readonly authorizationEndpoint?: string;
  /**
   * How the path-based resource metadata URL answers: `redirect` sends a 302 to the root
   * well-known URL, a number answers that status; either way the root URL serves the metadata.
   */
  readonly pathMetadata?: 'redirect' | number;
}

/** What the tiny servers saw. */
export interface TinyOAuthLog {
  readonly authorizations: URLSearchParams[];
  readonly tokenRequests: URLSearchParams[];
  /** The `Authorization` header of every `/mcp` request ('' when none). */
  readonly resourceAuth: string[];
  readonly issued: string[];
}

/** A running tiny server pair; `close()` ends it and its sockets. */
export interface TinyOAuth extends AsyncDisposable {
  readonly origin: string;
  readonly mcpUrl: string;
  readonly log: TinyOAuthLog;
  close(): Promise<void>;
}

/** Starts the tiny servers on 127.0.0.1 (a free port). */
export async function startTinyOAuth(options: TinyOAuthOptions = {}): Promise<TinyOAuth> {
  const log: TinyOAuthLog = { authorizations: [], tokenRequests: [], resourceAuth: [], issued: [] };
  const codes = new Map<string, { challenge: string; scope: string }>();
  const valid = new Set<string>();
  const refreshTokens = new Set<string>();
  let origin = '';
  const json = (res: ServerResponse, status: number, body: unknown, headers = {}): void => {
    res.writeHead(status, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      ...headers,
    });
    res.end(JSON.stringify(body));
  };
  const issue = (res: ServerResponse, scope: string): void => {
    const access = `at-${randomBytes(8).toString('hex')}`;
    const refresh = `rt-${randomBytes(8).toString('hex')}`;
    valid.add(access);
    refreshTokens.add(refresh);
    log.issued.push(access, refresh);
    json(res, 200, {
      access_token: access,
      token_type: 'Bearer',
      refresh_token: refresh,
      expires_in: options.expiresIn ?? 3600,
      ...(scope === '' ? {} : { scope }),
    });
  };
  const resourceMetadata = (): unknown => ({
    resource: `${origin}/mcp`,
    authorization_servers: options.authorizationServers ?? [origin],
    scopes_supported: ['mcp:read'],
  });
  const routes: Record<string, (req: IncomingMessage, res: ServerResponse, body: string) => void> =
    {
      'GET /.well-known/oauth-protected-resource/mcp': (_req, res) => {
        if (options.pathMetadata === 'redirect') {
          res.writeHead(302, { location: `${origin}/.well-known/oauth-protected-resource` });
          return res.end();
        }
        if (options.pathMetadata !== undefined) return json(res, options.pathMetadata, {});
        return json(res, 200, resourceMetadata());
      },
      'GET /.well-known/oauth-protected-resource': (_req, res) =>
        options.pathMetadata === undefined
          ? json(res, 404, { error: 'not_found' })
          : json(res, 200, resourceMetadata()),
      'GET /.well-known/oauth-authorization-server': (_req, res) =>
        json(res, 200, {
          issuer: options.metadataIssuer ?? origin,
          authorization_endpoint: options.authorizationEndpoint ?? `${origin}/authorize`,
          token_endpoint: `${origin}/token`,
          registration_endpoint: `${origin}/register`,
          response_types_supported: ['code'],
          token_endpoint_auth_methods_supported: ['client_secret_basic', 'none'],
          ...(options.codeChallengeMethods === null
            ? {}
            : { code_challenge_methods_supported: options.codeChallengeMethods ?? ['S256'] }),
          authorization_response_iss_parameter_supported: true,
        }),
      'POST /register': (_req, res) =>
        json(res, 201, { client_id: 'tiny-client', token_endpoint_auth_method: 'none' }),
      'GET /authorize': (req, res) => {
        const query = new URL(req.url ?? '/', origin).searchParams;
        log.authorizations.push(query);
        const code = `code-${randomBytes(8).toString('hex')}`;
        codes.set(code, {
          challenge: query.get('code_challenge') ?? '',
          scope: query.get('scope') ?? '',
        });
        const back = new URL(query.get('redirect_uri') ?? '');
        back.searchParams.set('code', code);
        back.searchParams.set('state', query.get('state') ?? '');
        back.searchParams.set('iss', origin);
        res.writeHead(302, { location: back.href });
        res.end();
      },
      'POST /token': (_req, res, body) => {
        const form = new URLSearchParams(body);
        log.tokenRequests.push(form);
        if (form.get('grant_type') === 'refresh_token') {
          const token = form.get('refresh_token') ?? '';
          if (!refreshTokens.delete(token)) return json(res, 400, { error: 'invalid_grant' });
          return issue(res, '');
        }
        if (options.refuseCode !== undefined) return json(res, 400, { error: options.refuseCode });
        const code = codes.get(form.get('code') ?? '');
        const verifier = form.get('code_verifier') ?? '';
        const challenge = createHash('sha256').update(verifier).digest('base64url');
        if (code === undefined || code.challenge !== challenge) {
          return json(res, 400, { error: 'invalid_grant' });
        }
        return issue(res, code.scope);
      },
      'POST /mcp': (req, res) => {
        const header = req.headers.authorization ?? '';
        log.resourceAuth.push(header);
        const metadata = `resource_metadata="${options.challengeMetadata ?? `${origin}/.well-known/oauth-protected-resource/mcp`}"`;
        if (!valid.has(header.replace(/^Bearer /, ''))) {
          return json(
            res,
            401,
            { error: 'invalid_token' },
            { 'www-authenticate': `Bearer ${metadata}` },
          );
        }
        if (options.alwaysInsufficientScope === true) {
          return json(
            res,
            403,
            { error: 'insufficient_scope' },
            {
              'www-authenticate': `Bearer error="insufficient_scope", scope="mcp:admin", ${metadata}`,
            },
          );
        }
        return json(res, 200, { ok: true });
      },
    };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const route = routes[`${req.method ?? ''} ${new URL(req.url ?? '/', origin).pathname}`];
      if (route === undefined) return json(res, 404, { error: 'not_found' });
      route(req, res, Buffer.concat(chunks).toString('utf8'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { origin, mcpUrl: `${origin}/mcp`, log, close, [Symbol.asyncDispose]: close };
}
