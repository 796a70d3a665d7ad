/**
 * `createServerAuth`: one server's {@link ServerAuthorizer} for its `auth` block. A bearer block
 * sends its token as is; an OAuth block runs the MCP authorization spec through an
 * {@link OAuthSession} (discovery, client, grants, refresh) and `authorized-fetch.ts` (the request
 * side). The authorizer outlives reconnects: a refreshed token never restarts a connection.
 */
import type { Redactor } from '../redact.js';
import { authorizedFetch } from './authorized-fetch.js';
import { OAuthSession } from './session.js';
import {
  DEFAULT_REDIRECT_URI,
  type AuthorizeHook,
  type AuthStatus,
  type BearerAuthConfig,
  type OAuthConfig,
  type ServerAuthConfig,
  type ServerAuthorizer,
  type TokenStore,
} from './types.js';

/** What {@link createServerAuth} needs for one server. */
export interface ServerAuthOptions {
  /** The configured server name. */
  readonly server: string;
  /** The server's MCP endpoint URL (the protected resource). */
  readonly url: string;
  readonly config: ServerAuthConfig;
  readonly store: TokenStore;
  /** The application's hook for the authorization code flow. */
  readonly authorize?: AuthorizeHook;
  /** The redirect URI the hook's callback URL comes back to. @default DEFAULT_REDIRECT_URI */
  readonly redirectUri?: string;
  /** Told every new secret (access and refresh tokens, codes) so logs and errors scrub it. */
  readonly learnSecret?: (secret: string) => void;
  /**
   * The command that fixes `AUTH_REQUIRED` (for its message and detail).
   * @default 'stepbind login NAME --config FILE'
   */
  readonly loginCommand?: string;
  /** For the authorization server's endpoints. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
  /** The redactor of the server's URL. */
  readonly redactor?: Redactor;
  /** ms since the epoch, for token expiry. @default Date.now */
  readonly now?: () => number;
}

/**
 * One server's {@link ServerAuthorizer}. Nothing happens on the network until the first request
 * (or `login()`); a stored login for this server's resource is picked up then.
 */
export function createServerAuth(options: ServerAuthOptions): ServerAuthorizer {
  const learnSecret = options.learnSecret ?? (() => undefined);
  if (options.config.type === 'bearer')
    return bearerAuth(options.server, options.config, learnSecret);
  return oauthAuth(options, options.config, learnSecret);
}

function bearerAuth(
  server: string,
  config: BearerAuthConfig,
  learnSecret: (secret: string) => void,
): ServerAuthorizer {
  learnSecret(config.token);
  const status: AuthStatus = Object.freeze({ server, state: 'bearer' });
  return Object.freeze({
    server,
    wrap:
      (base: typeof fetch): typeof fetch =>
      (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set('authorization', `Bearer ${config.token}`);
        return base(input, { ...init, headers });
      },
    principal: () => undefined,
    login: () => Promise.resolve(status),
    logout: () => Promise.resolve(),
    status: () => Promise.resolve(status),
  });
}

function oauthAuth(
  options: ServerAuthOptions,
  config: OAuthConfig,
  learnSecret: (secret: string) => void,
): ServerAuthorizer {
  if (config.clientSecret !== undefined) learnSecret(config.clientSecret);
  if (config.privateKey !== undefined) learnSecret(config.privateKey);
  // The hook's calls in progress: busy() holds for them even without the session's own flag.
  let hooks = 0;
  // Requests inside the authorizer's own work (token, discovery, registration, login), not `base`.
  let authorizing = 0;
  const given = options.authorize;
  const authorize: AuthorizeHook | undefined =
    given === undefined
      ? undefined
      : async (request) => {
          hooks += 1;
          try {
            return await given(request);
          } finally {
            hooks -= 1;
          }
        };
  const session = new OAuthSession({
    server: options.server,
    url: options.url,
    config,
    store: options.store,
    redirectUri: options.redirectUri ?? DEFAULT_REDIRECT_URI,
    learnSecret,
    command: options.loginCommand ?? `stepbind login ${options.server} --config FILE`,
    fetch: options.fetch ?? globalThis.fetch,
    ...(authorize === undefined ? {} : { authorize }),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  return Object.freeze({
    server: options.server,
    wrap: (base: typeof fetch): typeof fetch => {
      // A request is authorizing (not waiting for the server) from its start until it reaches
      // `base`, and again from `base`'s answer until it returns (a 401's refresh or login).
      const sending: typeof fetch = async (input, init) => {
        authorizing -= 1;
        try {
          return await base(input, init);
        } finally {
          authorizing += 1;
        }
      };
      const authorized = authorizedFetch(session, sending);
      return async (input, init) => {
        authorizing += 1;
        try {
          return await authorized(input, init);
        } finally {
          authorizing -= 1;
        }
      };
    },
    principal: () => session.principal(),
    login: async (signal?: AbortSignal) => {
      await session.login(signal);
      return await session.status();
    },
    logout: (signal?: AbortSignal) => session.logout(signal),
    status: () => session.status(),
    busy: () => authorizing > 0 || hooks > 0 || session.busy,
    close: () => {
      session.close();
      return Promise.resolve();
    },
  });
}
