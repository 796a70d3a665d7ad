/**
 * Discovery by the MCP authorization spec (both eras): the protected resource's metadata (RFC 9728:
 * the challenge's `resource_metadata` first, then the path-based, then the root well-known URL),
 * then its authorization server's metadata (RFC 8414 and OIDC discovery in the spec's order, the
 * issuer checked by oauth4webapi). Without resource metadata the 2025-03-26 rules apply: the
 * server's origin is the authorization server, and without its metadata the default endpoints
 * `/authorize`, `/token` and `/register` are used.
 */
import * as oauth from 'oauth4webapi';

import { authFailed, describe, type AuthErrorContext } from './auth-error.js';

/** What the resource's metadata says (the fields the flows use). */
export interface ProtectedResource {
  /** The `resource` it names: the RFC 8707 resource indicator sent to the authorization server. */
  readonly resource: string;
  readonly authorizationServers: readonly string[];
  readonly scopesSupported?: readonly string[];
}

/** The result of discovery: where to log in and for which resource. */
export interface Discovery {
  /** The resource indicator to send (the metadata's `resource`, else the canonical server URL). */
  readonly resource: string;
  readonly as: oauth.AuthorizationServer;
  /** The resource metadata, when the server has any (2025-03-26 servers have none). */
  readonly protectedResource?: ProtectedResource;
}

/** The hosts plain `http://` is allowed for: loopback only (tests, local servers). */
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** True when `url` is on a loopback host, where `http://` is acceptable. */
export function isLoopback(url: string | URL): boolean {
  return LOOPBACK.has(new URL(url).hostname);
}

/** oauth4webapi's options for requests to `url`: insecure `http://` only on loopback. */
export function insecureFor(url: string | URL): { [oauth.allowInsecureRequests]?: true } {
  return isLoopback(url) ? { [oauth.allowInsecureRequests]: true } : {};
}

/** How long one discovery, registration or token request may take when the caller sets no bound. */
export const NETWORK_TIMEOUT_MS = 30_000;

/** The caller's signal, bounded by {@link NETWORK_TIMEOUT_MS}. */
export function bounded(signal: AbortSignal | undefined): AbortSignal {
  const timeout = AbortSignal.timeout(NETWORK_TIMEOUT_MS);
  return signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
}

/** A URL as an error may show it: no credentials, query or fragment. */
export function shownUrl(url: string | URL): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

/**
 * Refuses (`AUTH_FAILED`, reason `metadata`) a discovered URL that is neither `https:` nor on a
 * loopback host: metadata, the issuer and its endpoints must not be reachable by a network
 * attacker.
 */
export function requireSecure(url: string, what: string, context: AuthErrorContext): void {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (
    parsed !== undefined &&
    (parsed.protocol === 'https:' || (parsed.protocol === 'http:' && isLoopback(parsed)))
  ) {
    return;
  }
  throw authFailed(context, {
    reason: 'metadata',
    message: `the ${what} ${shownUrl(url)} is neither https:// nor on a loopback host`,
    fix: 'stepbind uses only https:// (or loopback http://) for authorization; tell the server operator',
  });
}

/**
 * The RFC 8707 canonical URI of a server URL: scheme, host, port and path, without query or
 * fragment, and without the lone `/` of an empty path.
 */
export function canonicalResource(url: string): string {
  const parsed = new URL(url);
  const path = parsed.pathname === '/' ? '' : parsed.pathname;
  return `${parsed.protocol}//${parsed.host}${path}`;
}

/** The network side discovery needs. */
export interface DiscoveryIo {
  readonly fetch: typeof fetch;
  readonly signal?: AbortSignal;
  readonly context: AuthErrorContext;
}

/**
 * The protected resource metadata of `serverUrl`, or none (a 2025-03-26 server). A `resource` that
 * does not cover `serverUrl` (another origin, or a path the server URL is not under) is refused:
 * a token for it must not be sent here (`AUTH_FAILED`, reason `resource-mismatch`).
 */
export async function discoverProtectedResource(
  serverUrl: string,
  resourceMetadataUrl: string | undefined,
  io: DiscoveryIo,
): Promise<ProtectedResource | undefined> {
  const server = new URL(serverUrl);
  const candidates = [
    ...(resourceMetadataUrl === undefined ? [] : [resourceMetadataUrl]),
    ...(server.pathname === '/'
      ? []
      : [`${server.origin}/.well-known/oauth-protected-resource${server.pathname}`]),
    `${server.origin}/.well-known/oauth-protected-resource`,
  ];
  // A server error at one well-known URL falls through to the next; it is reported only when no
  // later URL answers either.
  let failure: Error | undefined;
  for (const [index, candidate] of candidates.entries()) {
    let body: Record<string, unknown> | undefined;
    try {
      body = await getJson(candidate, io);
    } catch (error) {
      if (!(error instanceof ServerFailure)) throw error;
      if (index === candidates.length - 1) throw failure ?? error.error;
      failure ??= error.error;
      continue;
    }
    if (body === undefined) continue;
    const metadata = parseProtectedResource(body, candidate, io.context);
    checkResourceCovers(metadata.resource, server, io.context);
    return metadata;
  }
  if (failure !== undefined) throw failure;
  return undefined;
}

function parseProtectedResource(
  body: Record<string, unknown>,
  from: string,
  context: AuthErrorContext,
): ProtectedResource {
  const { resource, authorization_servers: servers, scopes_supported: scopes } = body;
  const strings = (v: unknown): v is string[] =>
    Array.isArray(v) && v.every((s) => typeof s === 'string');
  if (typeof resource !== 'string' || !strings(servers) || servers.length === 0) {
    throw authFailed(context, {
      reason: 'metadata',
      message: `the protected resource metadata at ${from} lacks "resource" or "authorization_servers"`,
      fix: 'the MCP server is misconfigured; tell its operator',
    });
  }
  return Object.freeze({
    resource,
    authorizationServers: Object.freeze([...servers]),
    ...(strings(scopes) ? { scopesSupported: Object.freeze([...scopes]) } : {}),
  });
}

function checkResourceCovers(resource: string, server: URL, context: AuthErrorContext): void {
  let named: URL | undefined;
  try {
    named = new URL(resource);
  } catch {
    named = undefined;
  }
  const path = (p: string): string => (p.endsWith('/') ? p : `${p}/`);
  if (
    named === undefined ||
    named.origin !== server.origin ||
    !path(server.pathname).startsWith(path(named.pathname))
  ) {
    throw authFailed(context, {
      reason: 'resource-mismatch',
      message: `the protected resource metadata names resource ${resource}, which is not this server's URL`,
      fix: 'no token is sent; check the server URL, or tell the server operator',
    });
  }
}

/**
 * The metadata of the authorization server `issuer`: RFC 8414 with path insertion, OIDC with path
 * insertion, OIDC with path appending (for an issuer with a path), else RFC 8414 then OIDC at the
 * root. The first answer is checked by oauth4webapi: its `issuer` must be `issuer`
 * (`AUTH_FAILED`, reason `issuer-mismatch`). None found: `legacy` gives the 2025-03-26 default
 * endpoints, else `AUTH_FAILED` (reason `metadata`). PKCE S256 not advertised: `AUTH_FAILED`
 * (reason `pkce`).
 */
export async function discoverAuthorizationServer(
  issuer: string,
  io: DiscoveryIo,
  legacy: boolean,
): Promise<oauth.AuthorizationServer> {
  requireSecure(issuer, 'authorization server (issuer)', io.context);
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, '');
  const candidates =
    path === ''
      ? [
          `${url.origin}/.well-known/oauth-authorization-server`,
          `${url.origin}/.well-known/openid-configuration`,
        ]
      : [
          `${url.origin}/.well-known/oauth-authorization-server${path}`,
          `${url.origin}/.well-known/openid-configuration${path}`,
          `${url.origin}${path}/.well-known/openid-configuration`,
        ];
  for (const candidate of candidates) {
    const response = await get(candidate, io).catch((error: unknown) => {
      throw error instanceof ServerFailure ? error.error : error;
    });
    if (response === undefined) continue;
    let as: oauth.AuthorizationServer;
    try {
      as = await oauth.processDiscoveryResponse(url, response);
    } catch (error) {
      const mismatch =
        error instanceof oauth.OperationProcessingError &&
        error.code === oauth.JSON_ATTRIBUTE_COMPARISON;
      throw authFailed(io.context, {
        reason: mismatch ? 'issuer-mismatch' : 'metadata',
        message: mismatch
          ? `the authorization server metadata at ${candidate} names another issuer than ${issuer} (${describe(error)})`
          : `the authorization server metadata at ${candidate} is unusable: ${describe(error)}`,
        issuer,
        fix: 'the authorization server is misconfigured; tell its operator',
      });
    }
    requireS256(as, io.context);
    for (const name of ENDPOINTS) {
      const value = as[name];
      if (typeof value === 'string') requireSecure(value, `${name} of ${issuer}`, io.context);
    }
    return as;
  }
  if (legacy) return legacyEndpoints(url.origin);
  throw authFailed(io.context, {
    reason: 'metadata',
    message: `no authorization server metadata found for issuer ${issuer}`,
    issuer,
    fix: 'the authorization server is unreachable or misconfigured; tell its operator',
  });
}

/** The metadata's endpoints stepbind may send a request or a user to. */
const ENDPOINTS = [
  'authorization_endpoint',
  'token_endpoint',
  'registration_endpoint',
  'revocation_endpoint',
  'introspection_endpoint',
  'pushed_authorization_request_endpoint',
  'device_authorization_endpoint',
  'userinfo_endpoint',
  'jwks_uri',
] as const;

/** The 2025-03-26 default endpoints of a server without metadata. */
function legacyEndpoints(origin: string): oauth.AuthorizationServer {
  return {
    issuer: origin,
    authorization_endpoint: `${origin}/authorize`,
    token_endpoint: `${origin}/token`,
    registration_endpoint: `${origin}/register`,
    code_challenge_methods_supported: ['S256'],
  };
}

function requireS256(as: oauth.AuthorizationServer, context: AuthErrorContext): void {
  // The MCP spec: a server that does not advertise S256 may not do PKCE at all; refuse it.
  if (!(as.code_challenge_methods_supported ?? []).includes('S256')) {
    throw authFailed(context, {
      reason: 'pkce',
      message: `authorization server ${as.issuer} does not advertise PKCE S256 (code_challenge_methods_supported)`,
      issuer: as.issuer,
      fix: 'stepbind refuses authorization servers without PKCE S256; tell its operator',
    });
  }
}

/** A 5xx answer to a metadata request: the `AUTH_FAILED` to throw when no other URL answers. */
class ServerFailure extends Error {
  constructor(readonly error: Error) {
    super(error.message);
  }
}

/**
 * GET `url` as JSON metadata: the response when 2xx, none on 4xx, `AUTH_FAILED` otherwise (a 5xx
 * as a {@link ServerFailure}). Only `https:` or loopback URLs, no redirects, bounded in time.
 */
async function get(url: string, io: DiscoveryIo): Promise<Response | undefined> {
  requireSecure(url, 'metadata URL', io.context);
  let response: Response;
  try {
    response = await io.fetch(url, {
      headers: { accept: 'application/json' },
      redirect: 'error',
      signal: bounded(io.signal),
    });
  } catch (error) {
    if (io.signal?.aborted === true) throw error;
    throw authFailed(io.context, {
      reason: 'unreachable',
      message: `could not fetch ${shownUrl(url)} (redirects are refused): ${describe(error)}`,
    });
  }
  if (response.ok) return response;
  await response.body?.cancel();
  if (response.status >= 400 && response.status < 500) return undefined;
  const failure = authFailed(io.context, {
    reason: 'metadata',
    message: `${shownUrl(url)} answered HTTP ${response.status}`,
    httpStatus: response.status,
  });
  if (response.status >= 500) throw new ServerFailure(failure);
  throw failure;
}

async function getJson(url: string, io: DiscoveryIo): Promise<Record<string, unknown> | undefined> {
  const response = await get(url, io);
  if (response === undefined) return undefined;
  try {
    const body: unknown = await response.json();
    if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
      return body as Record<string, unknown>;
    }
  } catch {
    // Falls through to the refusal below.
  }
  throw authFailed(io.context, {
    reason: 'metadata',
    message: `${url} did not answer a JSON object`,
  });
}
