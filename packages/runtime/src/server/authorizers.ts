/**
 * The runtime's authorizers (DESIGN §16): one {@link ServerAuthorizer} per HTTP server entry with
 * `auth`, made once and kept for as long as that entry (name and identity key) is configured, so
 * a reconnect reuses it and a refreshed token never restarts a connection. Each comes with the
 * server's redactor, which learns every token the authorizer sees. The token store is opened at
 * the first OAuth server and closed with the runtime.
 */
import type { AuthorizeHook, AuthStatus, ServerAuthorizer, TokenStore } from '../auth/types.js';
import { DEFAULT_REDIRECT_URI } from '../auth/types.js';
import { openDefaultTokenStore } from '../auth/default-store.js';
import { createServerAuth, type ServerAuthOptions } from '../auth/server-auth.js';
import type { ServerConfig } from '../config.js';
import type { McpRuntimeOptions, ServerAuthStatus } from '../options.js';
import { bearerAuthorizer } from '../transports/http-auth.js';
import { httpRedactor, type HttpAuthOptions } from '../transports/http.js';
import { identityKeyOf } from '../transports/index.js';
import type { LearningRedactor } from '../redact.js';

/** One server's authorization as connections use it (see {@link HttpAuthOptions}). */
export interface ServerAuthorization extends HttpAuthOptions {
  readonly authorizer: ServerAuthorizer;
  readonly redactor: LearningRedactor;
}

/** Makes one OAuth server's authorizer; `createServerAuth` unless a test swaps it in. */
export type ServerAuthFactory = (options: ServerAuthOptions) => ServerAuthorizer;

/**
 * Where a runtime's options carry a replacement {@link ServerAuthFactory} (tests only, through
 * `@stepbind/runtime/internal`): a symbol, so no JSON or string key can set it.
 */
export const SERVER_AUTH_FACTORY: unique symbol = Symbol('stepbind.serverAuthFactory');

/** The options the authorizers read. */
export type AuthorizerOptions = Pick<
  McpRuntimeOptions,
  'authorize' | 'tokenStore' | 'redirectUri'
> & {
  readonly [SERVER_AUTH_FACTORY]?: ServerAuthFactory;
};

/**
 * The command that fixes `AUTH_REQUIRED` for server `name` (the CLI needs the config file; the
 * runtime is given a parsed config, so `FILE` stands for it). `name` is shell-quoted when needed.
 */
export function loginCommand(name: string): string {
  return `stepbind login ${shellQuote(name)} --config FILE`;
}

/** `word` as one POSIX shell word: as is when it is plainly safe, else in single quotes. */
function shellQuote(word: string): string {
  return /^[A-Za-z0-9_.,:@%+=/-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * `hook` called one at a time: two servers logging in at once would both listen on the one
 * loopback redirect port. A waiting call gives up when its request's signal aborts.
 */
export function serializedHook(hook: AuthorizeHook): AuthorizeHook {
  let tail: Promise<unknown> = Promise.resolve();
  return async (request) => {
    const previous = tail;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => {
      done = resolve;
    });
    tail = previous.then(() => mine);
    try {
      await untilSettledOrAborted(previous, request.signal);
      return await hook(request);
    } finally {
      done();
    }
  };
}

/** Resolves when `promise` settles; rejects with the signal's reason when it aborts first. */
async function untilSettledOrAborted(
  promise: Promise<unknown>,
  signal: AbortSignal,
): Promise<void> {
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([
      promise.then(
        () => undefined,
        () => undefined,
      ),
      new Promise<never>((_, reject) => {
        onAbort = () => reject(signal.reason as Error);
        signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}

/** See the module comment. */
export class ServerAuthorizers {
  readonly #options: AuthorizerOptions;
  readonly #byKey = new Map<string, ServerAuthorization>();
  #store: TokenStore | undefined;
  /** True when the runtime opened the store (and so closes it); a given store is the caller's. */
  #ownsStore = false;
  /** The application's `authorize` hook, one call at a time across this runtime's servers. */
  readonly #authorize: AuthorizeHook | undefined;

  /** The fleet's PostgreSQL token store, when the runtime has a fleet `store`. */
  readonly #fleetStore: (() => TokenStore) | undefined;

  constructor(options: AuthorizerOptions, fleetStore?: () => TokenStore) {
    this.#options = options;
    this.#fleetStore = fleetStore;
    this.#authorize =
      options.authorize === undefined ? undefined : serializedHook(options.authorize);
  }

  /**
   * The authorization of `config` as server `name`: its authorizer and redactor, the same objects
   * for every connection of an unchanged entry; `undefined` for a server without `auth`.
   */
  for(name: string, config: ServerConfig): ServerAuthorization | undefined {
    if (config.transport !== 'http' || config.auth === undefined) return undefined;
    const key = keyOf(name, config);
    const known = this.#byKey.get(key);
    if (known !== undefined) return known;
    const redactor = httpRedactor(config);
    const auth = config.auth;
    const authorizer =
      auth.type === 'bearer'
        ? bearerAuthorizer(name, auth)
        : (this.#options[SERVER_AUTH_FACTORY] ?? createServerAuth)({
            server: name,
            url: config.url,
            config: auth,
            store: this.#tokenStore(),
            ...(this.#authorize === undefined ? {} : { authorize: this.#authorize }),
            redirectUri: this.#options.redirectUri ?? DEFAULT_REDIRECT_URI,
            learnSecret: (secret) => redactor.learn(secret),
            loginCommand: loginCommand(name),
            redactor,
          });
    const entry = Object.freeze({ authorizer, redactor });
    this.#byKey.set(key, entry);
    return entry;
  }

  /**
   * Who `config`'s requests act for, for audience and listing keys: the principal of the
   * authorizer its connections use, when logged in; `''` when it is not, has none yet, or the
   * server has no OAuth. Never a token.
   */
  principalOf(name: string, config: ServerConfig): string {
    if (config.transport !== 'http' || config.auth?.type !== 'oauth') return '';
    return this.#byKey.get(keyOf(name, config))?.authorizer.principal() ?? '';
  }

  /** What `status()` shows of `config`'s authorization, without asking the store. */
  statusOf(name: string, config: ServerConfig): ServerAuthStatus | undefined {
    if (config.transport !== 'http' || config.auth === undefined) return undefined;
    if (config.auth.type === 'bearer') return { type: 'bearer' };
    // Only an authorizer a connection made: status() never creates one (nor opens the store).
    const principal = this.#byKey.get(keyOf(name, config))?.authorizer.principal();
    return principal === undefined
      ? { type: 'oauth' }
      : { type: 'oauth', state: 'logged-in', principal, issuer: issuerOf(principal) };
  }

  /** The {@link AuthStatus} of every configured server, in order (asks the token store). */
  async authStatus(servers: ReadonlyMap<string, ServerConfig>): Promise<readonly AuthStatus[]> {
    const out: AuthStatus[] = [];
    for (const [name, config] of servers) {
      const auth = this.for(name, config);
      out.push(
        auth === undefined ? { server: name, state: 'none' } : await auth.authorizer.status(),
      );
    }
    return Object.freeze(out);
  }

  /** Ends every authorizer (a login in progress is aborted), then closes the token store the
   * runtime opened. Idempotent. */
  async close(): Promise<void> {
    const entries = [...this.#byKey.values()];
    this.#byKey.clear();
    await Promise.all(entries.map(async (entry) => await entry.authorizer.close?.()));
    const store = this.#store;
    this.#store = undefined;
    if (store !== undefined && this.#ownsStore) await store.close?.();
  }

  /**
   * THE place the token store is chosen: the application's, else the fleet's (tokens in
   * PostgreSQL, closed with the fleet store), else the per-user file.
   */
  #tokenStore(): TokenStore {
    if (this.#store !== undefined) return this.#store;
    const given = this.#options.tokenStore ?? this.#fleetStore?.();
    this.#ownsStore = given === undefined;
    this.#store = given ?? openDefaultTokenStore();
    return this.#store;
  }
}

/** The key of one server entry's authorizer: its name and identity key. */
function keyOf(name: string, config: ServerConfig): string {
  return `${name}\u0000${identityKeyOf(config)}`;
}

/** The issuer part of a principal (`issuer + ' ' + subject` or `issuer + ' client:' + id`). */
function issuerOf(principal: string): string | undefined {
  const space = principal.indexOf(' ');
  return space <= 0 ? undefined : principal.slice(0, space);
}
