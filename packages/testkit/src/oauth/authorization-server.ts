/**
 * A real OAuth 2.1 authorization server for tests: oidc-provider on 127.0.0.1 with PKCE S256
 * required, resource indicators (RFC 8707) issuing JWT access tokens bound to one registered
 * resource, rotating refresh tokens with reuse detection, client credentials, dynamic
 * registration, revocation, introspection and DPoP. Logins and consent are scripted:
 * {@link AuthorizationServer.interact} plays the browser.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  calculateJwkThumbprint,
  exportJWK,
  exportPKCS8,
  generateKeyPair,
  type JSONWebKeySet,
} from 'jose';
import type { ProviderClient, ProviderContext } from 'oidc-provider';
import { walkAuthorization } from './interact.js';
import { AdapterStore } from './memory-adapter.js';

/** The redirect URI `stepbind login` and the runtime use by default (the public client has it). */
const DEFAULT_REDIRECT_URIS = ['http://127.0.0.1:33418/callback', 'http://127.0.0.1/callback'];

/** What {@link startAuthorizationServer} builds. */
export interface AuthorizationServerOptions {
  /** The scopes resources may ask for. @default ['mcp:read', 'mcp:write', 'mcp:admin'] */
  readonly scopes?: readonly string[];
  /** Lifetime of access tokens, in seconds. @default 3600 */
  readonly accessTokenTtlSeconds?: number;
  /** Redirect URIs the pre-registered public client accepts, besides the loopback defaults. */
  readonly redirectUris?: readonly string[];
  /** The account every scripted login signs in as (the tokens' `sub`). @default 'alice' */
  readonly account?: string;
  /**
   * Serve RFC 8414 metadata at `/.well-known/oauth-authorization-server` as well as the OIDC
   * discovery document. @default true
   */
  readonly oauthMetadata?: boolean;
  /** Offer DPoP (RFC 9449): `dpop_signing_alg_values_supported` in the metadata. @default true */
  readonly dpop?: boolean;
  /** The port to listen on. @default 0 (any free port) */
  readonly port?: number;
}

/** The pre-registered clients of an {@link AuthorizationServer}. */
export interface AuthorizationServerClients {
  /** A public client (`none`) for the authorization code flow with PKCE and loopback redirects. */
  readonly public: { readonly clientId: string; readonly redirectUris: readonly string[] };
  /** A confidential client for client credentials, `client_secret_basic`. */
  readonly secretBasic: { readonly clientId: string; readonly clientSecret: string };
  /** A confidential client for client credentials, `client_secret_post`. */
  readonly secretPost: { readonly clientId: string; readonly clientSecret: string };
  /** A client for client credentials authenticating with `private_key_jwt` (ES256). */
  readonly privateKeyJwt: {
    readonly clientId: string;
    /** PEM PKCS#8. */
    readonly privateKey: string;
    readonly alg: 'ES256';
  };
}

/** What the authorization server has done so far (a live view). */
export interface AuthorizationServerCounts {
  /** Successful token responses by `grant_type`. */
  readonly grants: Readonly<Record<string, number>>;
  /** Successful `refresh_token` grants (same as `grants.refresh_token`). */
  readonly refreshes: number;
  /** Token requests the server refused (any grant), by `grant_type`. */
  readonly refusals: Readonly<Record<string, number>>;
  /** Authorization codes issued (logins completed). */
  readonly authorizations: number;
  /** Clients registered dynamically (RFC 7591). */
  readonly registrations: number;
}

/** A running authorization server. */
export interface AuthorizationServer {
  /** `http://127.0.0.1:PORT`, the issuer and base URL. */
  readonly issuer: string;
  readonly port: number;
  /** The public keys access tokens are signed with (what the JWKS endpoint serves). */
  readonly jwks: JSONWebKeySet;
  readonly clients: AuthorizationServerClients;
  readonly counts: AuthorizationServerCounts;
  /**
   * Makes `resource` (its RFC 8707 URI) a known resource: tokens for it are JWTs whose `aud` is
   * `resource`, carrying at most `scopes`. A request naming an unknown resource is `invalid_target`.
   */
  registerResource(resource: string, scopes?: readonly string[]): void;
  /**
   * Plays the browser for an authorization URL: signs in the scripted account, grants the requested
   * scopes and resolves with the callback URL the server redirected to (with `code`, `state`,
   * `iss`, or an `error`). This is a test's `authorize` hook.
   * @throws Error when the server stops redirecting before reaching the redirect URI.
   */
  interact(authorizationUrl: string | URL): Promise<string>;
  /** Deletes every refresh token issued so far; resolves with how many. Their next use fails. */
  revokeRefreshTokens(): number;
  /** Stops listening (connections refused) while keeping every token, client and grant. */
  stop(): Promise<void>;
  /** Listens again on the same port after {@link AuthorizationServer.stop}. */
  start(): Promise<void>;
  /** Stops for good. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

interface ResourceInfo {
  readonly scopes: readonly string[];
}

/**
 * Starts an authorization server on 127.0.0.1 and resolves once it listens. Nothing outlives
 * {@link AuthorizationServer.close}.
 */
export async function startAuthorizationServer(
  options: AuthorizationServerOptions = {},
): Promise<AuthorizationServer> {
  const scopes = options.scopes ?? ['mcp:read', 'mcp:write', 'mcp:admin'];
  const ttl = options.accessTokenTtlSeconds ?? 3600;
  const account = options.account ?? 'alice';
  const http = createServer();
  await listen(http, options.port ?? 0);
  const { port } = http.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${String(port)}`;

  const signing = await generateKeyPair('RS256', { extractable: true });
  // An explicit kid: the provider derives one otherwise, and verifiers match tokens by it.
  const kid = await calculateJwkThumbprint(await exportJWK(signing.publicKey));
  const signingJwk = { ...(await exportJWK(signing.privateKey)), alg: 'RS256', use: 'sig', kid };
  const publicJwk = { ...(await exportJWK(signing.publicKey)), alg: 'RS256', use: 'sig', kid };
  const clientKey = await generateKeyPair('ES256', { extractable: true });
  const clients: AuthorizationServerClients = {
    public: {
      clientId: 'stepbind-public',
      redirectUris: [...DEFAULT_REDIRECT_URIS, ...(options.redirectUris ?? [])],
    },
    secretBasic: { clientId: 'stepbind-basic', clientSecret: secret() },
    secretPost: { clientId: 'stepbind-post', clientSecret: secret() },
    privateKeyJwt: {
      clientId: 'stepbind-jwt',
      privateKey: await exportPKCS8(clientKey.privateKey),
      alg: 'ES256',
    },
  };

  const resources = new Map<string, ResourceInfo>();
  const counts = {
    grants: {} as Record<string, number>,
    refreshes: 0,
    refusals: {} as Record<string, number>,
    authorizations: 0,
    registrations: 0,
  };
  const store = new AdapterStore();
  store.onUpsert = (model) => {
    if (model === 'Client') counts.registrations += 1;
    if (model === 'AuthorizationCode') counts.authorizations += 1;
  };

  // Loaded on first use: importing the testkit must not load oidc-provider (it warns on Node 20).
  const { default: Provider, errors } = await import('oidc-provider');
  const provider = new Provider(issuer, {
    adapter: store.adapterFor(),
    clients: [
      {
        client_id: clients.public.clientId,
        token_endpoint_auth_method: 'none',
        application_type: 'native',
        redirect_uris: clients.public.redirectUris,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      },
      ...[
        ['client_secret_basic', clients.secretBasic] as const,
        ['client_secret_post', clients.secretPost] as const,
      ].map(([method, client]) => ({
        client_id: client.clientId,
        client_secret: client.clientSecret,
        token_endpoint_auth_method: method,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
      })),
      {
        client_id: clients.privateKeyJwt.clientId,
        token_endpoint_auth_method: 'private_key_jwt',
        token_endpoint_auth_signing_alg: 'ES256',
        jwks: { keys: [{ ...(await exportJWK(clientKey.publicKey)), alg: 'ES256' }] },
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
      },
    ],
    jwks: { keys: [signingJwk] },
    cookies: { keys: [secret()] },
    scopes: ['openid', 'offline_access', ...scopes],
    findAccount: (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: () => ({ sub: id }),
    }),
    // Every lifetime written out: the library warns about each default it falls back to.
    ttl: {
      AccessToken: ttl,
      ClientCredentials: ttl,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 600,
      Session: 86_400,
      Grant: 14 * 86_400,
      RefreshToken: 14 * 86_400,
    },
    pkce: { required: () => true },
    rotateRefreshToken: true,
    // Every code grant gets a refresh token, asked for `offline_access` or not: the runtime's
    // refresh is what the tests exercise.
    issueRefreshToken: (_ctx: unknown, client: ProviderClient) =>
      client.grantTypeAllowed('refresh_token'),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      registration: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      dPoP: { enabled: options.dpop !== false },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => {
          const info = resources.get(resource);
          if (info === undefined) throw new errors.InvalidTarget(`unknown resource ${resource}`);
          return {
            scope: info.scopes.join(' '),
            audience: resource,
            accessTokenTTL: ttl,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });
  const tally = (table: Record<string, number>, ctx: ProviderContext): void => {
    const type = ctx.oidc.params?.['grant_type'];
    const name = typeof type === 'string' ? type : 'unknown';
    table[name] = (table[name] ?? 0) + 1;
  };
  provider.on('grant.success', (ctx) => {
    tally(counts.grants, ctx);
    counts.refreshes = counts.grants['refresh_token'] ?? 0;
  });
  provider.on('grant.error', (ctx) => tally(counts.refusals, ctx));

  const callback = provider.callback();
  const interaction = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId: account } });
      return;
    }
    // Consent: grant exactly what the prompt says is missing (the scripted user says yes).
    const clientId = String(details.params['client_id']);
    const existing =
      details.grantId === undefined ? undefined : await provider.Grant.find(details.grantId);
    const grant = existing ?? new provider.Grant({ accountId: account, clientId });
    const missing = details.prompt.details;
    const oidcScopes = missing['missingOIDCScope'];
    if (Array.isArray(oidcScopes)) grant.addOIDCScope(oidcScopes.join(' '));
    const resourceScopes = missing['missingResourceScopes'];
    if (typeof resourceScopes === 'object' && resourceScopes !== null) {
      for (const [resource, granted] of Object.entries(resourceScopes)) {
        if (Array.isArray(granted)) grant.addResourceScope(resource, granted.join(' '));
      }
    }
    const grantId = await grant.save();
    await provider.interactionFinished(
      req,
      res,
      { consent: { grantId } },
      { mergeWithLastSubmission: true },
    );
  };
  http.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', issuer).pathname;
    if (path.startsWith('/interaction/')) {
      interaction(req, res).catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(error));
        else res.destroy();
      });
      return;
    }
    if (options.oauthMetadata !== false && path === '/.well-known/oauth-authorization-server') {
      // RFC 8414: the same document as OIDC discovery (the issuer has no path).
      req.url = '/.well-known/openid-configuration';
    }
    callback(req, res);
  });

  let open = true;
  let closed = false;
  const stop = async (): Promise<void> => {
    if (!open) return;
    open = false;
    const done = new Promise<void>((resolve) => http.close(() => resolve()));
    http.closeAllConnections();
    await done;
  };
  const close = async (): Promise<void> => {
    closed = true;
    await stop();
  };
  return {
    issuer,
    port,
    jwks: { keys: [publicJwk] },
    clients,
    counts,
    registerResource(resource, resourceScopes = scopes) {
      resources.set(resource, { scopes: [...resourceScopes] });
    },
    interact: (authorizationUrl) => walkAuthorization(authorizationUrl, issuer),
    revokeRefreshTokens() {
      const tokens = store.model('RefreshToken');
      const revoked = tokens.size;
      tokens.clear();
      return revoked;
    },
    stop,
    async start() {
      if (closed) throw new Error('authorization server closed');
      if (open) return;
      await listen(http, port);
      open = true;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

function secret(): string {
  return randomBytes(24).toString('base64url');
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}
