/**
 * The shared vocabulary of OAuth 2.1 authorization for remote MCP servers (DESIGN §16): what a
 * server's `auth` configuration says, what a token store keeps, and the application's `authorize`
 * hook. The flows live in `oauth.ts`, the stores in `token-store.ts` and `file-token-store.ts`,
 * single-flight refresh in `refresh.ts`, the request side in `authorized-fetch.ts`.
 */

/**
 * The redirect URI the runtime's authorization code flow uses unless told otherwise, and the one
 * `stepbind login` listens on (a loopback address, RFC 8252).
 */
export const DEFAULT_REDIRECT_URI = 'http://127.0.0.1:33418/callback';

/** A static bearer token (`Authorization: Bearer <token>`), typically `${env:NAME}`. */
export interface BearerAuthConfig {
  readonly type: 'bearer';
  readonly token: string;
}

/** How the client proves itself at the token endpoint. */
export type TokenEndpointAuthMethod =
  'none' | 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt';

/**
 * OAuth 2.1 by the MCP authorization spec. Every field is optional: without `clientId` the client
 * registers itself (Client ID Metadata Document when `clientMetadataUrl` is set and the
 * authorization server supports it, else dynamic registration).
 */
export interface OAuthConfig {
  readonly type: 'oauth';
  /** A pre-registered client id. */
  readonly clientId?: string;
  /** The pre-registered client's secret (`client_secret_basic` or `_post`, as the server says). */
  readonly clientSecret?: string;
  /** Scopes to ask for; by default the challenge's, else the resource's `scopes_supported`. */
  readonly scopes?: readonly string[];
  /** `authorization_code` (a user logs in; the default) or `client_credentials` (headless). */
  readonly grant?: 'authorization_code' | 'client_credentials';
  /** The HTTPS URL of this client's Client ID Metadata Document (used as its `client_id`). */
  readonly clientMetadataUrl?: string;
  /** A private key for `private_key_jwt` (PEM PKCS#8 or a JWK as JSON), with `clientId`. */
  readonly privateKey?: string;
  /** The `alg` of `privateKey`. @default 'ES256' for EC keys, 'RS256' for RSA keys */
  readonly privateKeyAlg?: string;
}

/** The `auth` block of an HTTP server entry. */
export type ServerAuthConfig = BearerAuthConfig | OAuthConfig;

/** The tokens of one (issuer, resource, client) login. Secrets: never logged, never in errors. */
export interface OAuthTokens {
  readonly accessToken: string;
  /** `Bearer`, or `DPoP` when the token is bound to this client's DPoP key. */
  readonly tokenType: 'Bearer' | 'DPoP';
  readonly refreshToken?: string;
  /** When the access token expires, ms since the epoch (from `expires_in`); none: unknown. */
  readonly expiresAt?: number;
  /** The scopes granted (space-separated, as the server answered), when it said. */
  readonly scope?: string;
  /**
   * For a DPoP-bound token: the private key it is bound to, as JWK JSON (with its `alg`), so that
   * another process sharing the store can use and refresh the login. A secret like the tokens.
   */
  readonly dpopKey?: string;
}

/**
 * What identifies one stored login: the authorization server's issuer, the protected resource
 * (RFC 8707 canonical URI) and the client id.
 */
export interface TokenKey {
  readonly issuer: string;
  readonly resource: string;
  readonly clientId: string;
}

/** One stored login. `version` grows by one on every write of the same key. */
export interface StoredLogin {
  readonly tokens: OAuthTokens;
  /**
   * Who the tokens act for: `issuer + ' ' + subject` (the id token's `sub`); without a subject,
   * `issuer + ' login:' + id` (a random id made at login and kept by every refresh, so two users of
   * one client never share a principal) or, for client credentials, `issuer + ' client:' +
   * clientId`. Goes into audience and listing keys; the token never does.
   */
  readonly principal: string;
  /** ms since the epoch of the write. */
  readonly updatedAt: number;
  readonly version: number;
  /** The server's configured name at login time (for `stepbind auth status`). */
  readonly server?: string;
  /** The scopes the login asked for. */
  readonly scopes?: readonly string[];
}

/** A client this runtime registered dynamically (RFC 7591) at one authorization server. */
export interface ClientRegistration {
  readonly issuer: string;
  /** The redirect URI it was registered with ('' for a client-credentials client). */
  readonly redirectUri: string;
  readonly clientId: string;
  readonly clientSecret?: string;
  readonly tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  /** ms since the epoch when the secret expires (`client_secret_expires_at`); none: never. */
  readonly secretExpiresAt?: number;
}

/**
 * Where logins and client registrations live. The default is a file per user (mode 0600, atomic
 * replace, a lock file); with a fleet `store`, PostgreSQL. Every method may be called from many
 * processes at once; `withLock` is the cross-process mutual exclusion refresh runs under.
 */
export interface TokenStore {
  /** A short description for status and errors (a path or a redacted URL), no secrets. */
  readonly location: string;
  get(key: TokenKey): Promise<StoredLogin | undefined>;
  /** Writes `login` (its `version` is the store's business: it stores previous + 1). */
  put(key: TokenKey, login: Omit<StoredLogin, 'version' | 'updatedAt'>): Promise<StoredLogin>;
  delete(key: TokenKey): Promise<boolean>;
  /** Every stored login, without tokens (for `stepbind auth status`). */
  list(): Promise<readonly StoredLoginSummary[]>;
  getRegistration(issuer: string, redirectUri: string): Promise<ClientRegistration | undefined>;
  putRegistration(registration: ClientRegistration): Promise<void>;
  /**
   * Runs `work` holding the key's exclusive lock across threads, processes and (for a shared
   * store) the fleet. `signal` ends the wait for the lock, never `work` once it started.
   */
  withLock<T>(key: TokenKey, work: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** Releases handles (a database pool); a file store has none. */
  close?(): Promise<void>;
}

/** A stored login without its secrets. */
export interface StoredLoginSummary {
  readonly key: TokenKey;
  readonly principal: string;
  readonly server?: string;
  readonly scopes?: readonly string[];
  readonly expiresAt?: number;
  readonly hasRefreshToken: boolean;
  readonly updatedAt: number;
}

/** What the `authorize` hook is asked to do: send a user to `authorizationUrl`. */
export interface AuthorizeRequest {
  /** The configured server name. */
  readonly server: string;
  /** Where the user logs in (has `state`, `code_challenge`, `resource`; never a secret). */
  readonly authorizationUrl: URL;
  /** Where the authorization server sends the browser back; the hook returns that URL. */
  readonly redirectUri: string;
  /** Aborted when the runtime closes or the operation that needed the login is cancelled. */
  readonly signal: AbortSignal;
}

/**
 * The application's part of the authorization code flow: open a browser, a device page or a chat
 * message, and resolve with the full callback URL the authorization server redirected to (with its
 * `code`, `state` and `iss`). Reject (or let `signal` abort) to give up.
 */
export type AuthorizeHook = (request: AuthorizeRequest) => Promise<string | URL>;

/** What `stepbind auth status` and `McpRuntime.authStatus()` show per server; no secrets. */
export interface AuthStatus {
  readonly server: string;
  /** `none` (no auth block), `bearer`, `logged-in`, `expired` (refreshable), `logged-out`. */
  readonly state: 'none' | 'bearer' | 'logged-in' | 'expired' | 'logged-out';
  readonly issuer?: string;
  readonly principal?: string;
  readonly scopes?: readonly string[];
  readonly expiresAt?: number;
}

/**
 * One server's authorization, owned by its `ManagedServer` and kept across reconnects: a refreshed
 * token never restarts a connection. Built by `createServerAuth` (`server-auth.ts`).
 */
export interface ServerAuthorizer {
  /** The configured server name. */
  readonly server: string;
  /**
   * `base` with authorization: each request gets the current access token (and a DPoP proof when
   * the token is DPoP-bound); a `401` refreshes or logs in and retries once; a `403
   * insufficient_scope` steps up (the union of scopes, a bounded number of times) and retries.
   * Throws `AUTH_REQUIRED` / `AUTH_FAILED` (RuntimeError) when it cannot authorize; such a request
   * was refused by the server, never processed. `init` (a dispatcher, a signal) passes through.
   */
  wrap(base: typeof fetch): typeof fetch;
  /** Who the current tokens act for, when logged in (for audience and listing keys). */
  principal(): string | undefined;
  /** Runs the login now (the `authorize` hook, or client credentials), whatever is stored. */
  login(signal?: AbortSignal): Promise<AuthStatus>;
  /** Forgets the stored login (and revokes the refresh token where the server supports it). */
  logout(signal?: AbortSignal): Promise<void>;
  status(): Promise<AuthStatus>;
  /**
   * True while a login is in progress (discovery, registration, the `authorize` hook): a request
   * waiting for it is not a slow server, so the era probe's budget does not run meanwhile.
   * @default never busy
   */
  busy?(): boolean;
  /**
   * Ends the authorizer with its runtime: a login in progress is aborted (its hook's signal fires)
   * and later requests fail `ABORTED`. @default nothing to end
   */
  close?(): Promise<void>;
}
