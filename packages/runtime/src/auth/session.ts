/**
 * One server's OAuth state, owned by its authorizer and kept across reconnects: where it logs in
 * (discovery), as which client, the current login and the scopes asked so far. The request side
 * (`authorized-fetch.ts`) asks it for a token, and on a refusal to recover (401) or step up (403);
 * it never touches the connection, so a refreshed token never restarts one.
 */
import { isStepbindError } from '@stepbind/binding';
import { randomUUID } from 'node:crypto';

import * as oauth from 'oauth4webapi';

import { authFailed, authRequired, describe, type AuthErrorContext } from './auth-error.js';
import { resolveClient, type ResolvedClient } from './client.js';
import {
  canonicalResource,
  discoverAuthorizationServer,
  discoverProtectedResource,
  insecureFor,
  type Discovery,
} from './discovery.js';
import { DpopBinding } from './dpop.js';
import {
  authorizationCodeGrant,
  clientCredentialsGrant,
  refreshGrant,
  selectScopes,
  unionScopes,
  type Grant,
  type GrantContext,
} from './flows.js';
import { refreshSingleFlight } from './refresh.js';
import type {
  AuthorizeHook,
  AuthStatus,
  OAuthConfig,
  OAuthTokens,
  StoredLogin,
  TokenKey,
  TokenStore,
} from './types.js';

/** A token is refreshed this long before it expires (clock skew, a slow request). */
export const REFRESH_MARGIN_MS = 60_000;

/** What an {@link OAuthSession} needs. */
export interface OAuthSessionOptions {
  readonly server: string;
  readonly url: string;
  readonly config: OAuthConfig;
  readonly store: TokenStore;
  readonly authorize?: AuthorizeHook;
  readonly redirectUri: string;
  readonly learnSecret: (secret: string) => void;
  readonly command: string;
  readonly fetch: typeof fetch;
  /** ms since the epoch. @default Date.now */
  readonly now?: () => number;
}

/** The login in use and the key it is stored under. */
export interface CurrentLogin {
  readonly key: TokenKey;
  readonly login: StoredLogin;
}

/** What a resource's challenge said (`WWW-Authenticate: Bearer ...` or `DPoP ...`). */
export interface Challenge {
  readonly resourceMetadata?: string;
  readonly scopes?: readonly string[];
  readonly error?: string;
  /** The resource challenged with the DPoP scheme. */
  readonly dpop: boolean;
}

interface Where {
  readonly discovery: Discovery;
  readonly client: ResolvedClient;
}

/** See the file comment. */
export class OAuthSession {
  readonly context: AuthErrorContext;
  readonly dpop = new DpopBinding();
  readonly #options: OAuthSessionOptions;
  readonly #resource: string;
  #where: Where | undefined;
  #current: CurrentLogin | undefined;
  /** The first read of the store (one per session, shared by concurrent first requests). */
  #loading: Promise<void> | undefined;
  #scopes: readonly string[] | undefined;
  #loginFlight: Promise<CurrentLogin> | undefined;

  constructor(options: OAuthSessionOptions) {
    this.#options = options;
    this.#resource = canonicalResource(options.url);
    this.context = Object.freeze({
      server: options.server,
      resource: this.#resource,
      command: options.command,
    });
  }

  get #now(): number {
    return (this.#options.now ?? Date.now)();
  }

  get #codeFlow(): boolean {
    return this.#options.config.grant !== 'client_credentials';
  }

  /** Who the current tokens act for. */
  principal(): string | undefined {
    return this.#current?.login.principal;
  }

  /**
   * The login to send with a request: the one in use (refreshed first when it expires within
   * {@link REFRESH_MARGIN_MS}), else a stored one for this resource, else none (the server's 401
   * then says how to log in).
   */
  async token(signal: AbortSignal | undefined): Promise<CurrentLogin | undefined> {
    // One shared read: a second request at the same moment must not go out without the token.
    this.#loading ??= this.#stored().then((stored) => {
      this.#current ??= stored;
    });
    await this.#loading;
    const current = this.#current;
    if (current === undefined || this.#fresh(current.login)) return current;
    if (current.login.tokens.refreshToken === undefined) return current;
    try {
      return await this.#refresh(current, signal);
    } catch (error) {
      if (signal?.aborted === true) throw error;
      // A refusal here is not final: the token may still be accepted, and a 401 logs in again.
      return current;
    }
  }

  /**
   * After a 401: discover again (the resource may have moved to another authorization server),
   * then refresh the login that was refused, or log in.
   */
  async recover(
    challenge: Challenge,
    refused: CurrentLogin | undefined,
    signal: AbortSignal | undefined,
  ): Promise<CurrentLogin> {
    const where = await this.#discover(challenge, signal);
    const sameIssuer = refused !== undefined && refused.key.issuer === where.discovery.as.issuer;
    const newer = this.#current !== undefined && this.#current !== refused;
    if (newer && this.#current?.key.issuer === where.discovery.as.issuer) return this.#current;
    if (sameIssuer && refused.login.tokens.refreshToken !== undefined) {
      try {
        return await this.#refresh(refused, signal);
      } catch (error) {
        if (signal?.aborted === true) throw error;
        // The refresh token is dead too: a new login below.
      }
    }
    return await this.#login(where, this.#scopesFor(challenge, where), signal);
  }

  /** The scopes of a new login: configured, else challenged, else the resource's, else none. */
  #scopesFor(challenge: Challenge, where: Where): readonly string[] {
    return selectScopes({
      ...(this.#options.config.scopes === undefined
        ? {}
        : { configured: this.#options.config.scopes }),
      ...(challenge.scopes === undefined ? {} : { challenged: challenge.scopes }),
      ...(where.discovery.protectedResource?.scopesSupported === undefined
        ? {}
        : { supported: where.discovery.protectedResource.scopesSupported }),
      as: where.discovery.as,
      userLogin: this.#codeFlow,
    });
  }

  /** After a 403 `insufficient_scope`: log in again for the union of the scopes asked so far. */
  async stepUp(challenge: Challenge, signal: AbortSignal | undefined): Promise<CurrentLogin> {
    const where = await this.#discover(challenge, signal);
    const granted = this.#current?.login.tokens.scope?.split(' ').filter((s) => s !== '');
    const scopes = unionScopes(this.#scopes, granted, challenge.scopes);
    return await this.#login(where, scopes, signal);
  }

  /** Logs in now, whatever is stored (`stepbind login`). */
  async login(signal: AbortSignal | undefined): Promise<CurrentLogin> {
    const where = await this.#discover({ dpop: false }, signal);
    return await this.#login(where, this.#scopesFor({ dpop: false }, where), signal);
  }

  /** Forgets the login (revoking its refresh token where the server supports revocation). */
  async logout(signal: AbortSignal | undefined): Promise<void> {
    const current = this.#current ?? (await this.#stored());
    this.#current = undefined;
    this.#loading = Promise.resolve();
    if (current === undefined) return;
    await this.#options.store.delete(current.key);
    const refreshToken = current.login.tokens.refreshToken;
    const where = this.#where;
    if (refreshToken === undefined || where?.discovery.as.revocation_endpoint === undefined) return;
    try {
      const response = await oauth.revocationRequest(
        where.discovery.as,
        where.client.client,
        where.client.clientAuth,
        refreshToken,
        {
          [oauth.customFetch]: this.#options.fetch,
          ...insecureFor(where.discovery.as.revocation_endpoint),
          ...(signal === undefined ? {} : { signal }),
        },
      );
      await oauth.processRevocationResponse(response);
    } catch {
      // Revocation is a courtesy: the login is forgotten here either way.
    }
  }

  /** The login state, without secrets. */
  async status(): Promise<AuthStatus> {
    const current = this.#current ?? (await this.#stored());
    if (current === undefined)
      return Object.freeze({ server: this.#options.server, state: 'logged-out' });
    const { login, key } = current;
    const expired = login.tokens.expiresAt !== undefined && login.tokens.expiresAt <= this.#now;
    return Object.freeze({
      server: this.#options.server,
      state: expired
        ? login.tokens.refreshToken === undefined
          ? 'logged-out'
          : 'expired'
        : 'logged-in',
      issuer: key.issuer,
      principal: login.principal,
      ...(login.scopes === undefined ? {} : { scopes: login.scopes }),
      ...(login.tokens.expiresAt === undefined ? {} : { expiresAt: login.tokens.expiresAt }),
    });
  }

  #fresh(login: StoredLogin): boolean {
    const expiresAt = login.tokens.expiresAt;
    return expiresAt === undefined || expiresAt - REFRESH_MARGIN_MS > this.#now;
  }

  /** The newest stored login for this resource (and the configured client, when one is). */
  async #stored(): Promise<CurrentLogin | undefined> {
    const clientId = this.#options.config.clientId;
    const summaries = (await this.#options.store.list()).filter(
      (s) =>
        s.key.resource === this.#resource &&
        (clientId === undefined || s.key.clientId === clientId),
    );
    const newest = summaries.sort((a, b) => b.updatedAt - a.updatedAt)[0];
    if (newest === undefined) return undefined;
    const login = await this.#options.store.get(newest.key);
    if (login === undefined) return undefined;
    this.#learn(login);
    // A DPoP-bound token is usable only with its key, stored with it (a login without one is not).
    if (login.tokens.tokenType === 'DPoP' && !(await this.#adoptKey(login))) return undefined;
    return { key: newest.key, login };
  }

  #learn(login: StoredLogin): void {
    this.#options.learnSecret(login.tokens.accessToken);
    if (login.tokens.refreshToken !== undefined)
      this.#options.learnSecret(login.tokens.refreshToken);
    if (login.tokens.dpopKey !== undefined) this.#learnKey(login.tokens.dpopKey);
  }

  /** The key JSON and each of its private members are secrets. */
  #learnKey(jwkJson: string): void {
    this.#options.learnSecret(jwkJson);
    try {
      const jwk = JSON.parse(jwkJson) as Record<string, unknown>;
      for (const name of ['d', 'p', 'q', 'dp', 'dq', 'qi']) {
        const value = jwk[name];
        if (typeof value === 'string') this.#options.learnSecret(value);
      }
    } catch {
      // Not JSON: the whole string was learnt.
    }
  }

  /** Uses a DPoP-bound login's stored key; false when it has none or it does not import. */
  async #adoptKey(login: StoredLogin): Promise<boolean> {
    const key = login.tokens.dpopKey;
    if (key === undefined) return login.tokens.tokenType !== 'DPoP';
    try {
      await this.dpop.adopt(key);
      return true;
    } catch {
      return false;
    }
  }

  /** `tokens` with the DPoP key they are bound to (stored with them for other processes). */
  async #withKey(tokens: OAuthTokens): Promise<OAuthTokens> {
    if (tokens.tokenType !== 'DPoP') return tokens;
    const dpopKey = await this.dpop.exportKey();
    if (dpopKey === undefined) return tokens;
    this.#learnKey(dpopKey);
    return Object.freeze({ ...tokens, dpopKey });
  }

  /** Resource metadata, then its authorization server, then the client there. */
  async #discover(challenge: Challenge, signal: AbortSignal | undefined): Promise<Where> {
    const io = {
      fetch: this.#options.fetch,
      context: this.context,
      ...(signal === undefined ? {} : { signal }),
    };
    const resource = await discoverProtectedResource(
      this.#options.url,
      challenge.resourceMetadata,
      io,
    );
    // 2025-03-26: no resource metadata; the MCP server's origin is the authorization server.
    const issuer = resource?.authorizationServers[0] ?? new URL(this.#options.url).origin;
    const previous = this.#where;
    const as = await discoverAuthorizationServer(issuer, io, resource === undefined);
    await this.dpop.handleFor(as, challenge.dpop);
    const discovery: Discovery = {
      resource: resource?.resource ?? this.#resource,
      as,
      ...(resource === undefined ? {} : { protectedResource: resource }),
    };
    // A new authorization server gets its own client: credentials never cross servers.
    const client =
      previous !== undefined && previous.discovery.as.issuer === as.issuer
        ? previous.client
        : await resolveClient({
            config: this.#options.config,
            as,
            store: this.#options.store,
            redirectUri: this.#codeFlow ? this.#options.redirectUri : '',
            wantsRefresh: this.#codeFlow,
            fetch: this.#options.fetch,
            context: this.context,
            learnSecret: this.#options.learnSecret,
            ...(signal === undefined ? {} : { signal }),
          });
    this.#where = { discovery, client };
    return this.#where;
  }

  async #grantContext(where: Where, signal: AbortSignal | undefined): Promise<GrantContext> {
    const dpop = await this.dpop.handleFor(where.discovery.as, false);
    return {
      as: where.discovery.as,
      client: where.client,
      resource: where.discovery.resource,
      fetch: this.#options.fetch,
      context: this.context,
      learnSecret: this.#options.learnSecret,
      ...(signal === undefined ? {} : { signal }),
      ...(dpop === undefined ? {} : { dpop }),
    };
  }

  /** A new login, one at a time: concurrent refusals share the first one's login. */
  async #login(
    where: Where,
    scopes: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<CurrentLogin> {
    this.#loginFlight ??= this.#runLogin(where, scopes, signal).finally(() => {
      this.#loginFlight = undefined;
    });
    return await this.#loginFlight;
  }

  async #runLogin(
    where: Where,
    scopes: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<CurrentLogin> {
    const { as } = where.discovery;
    const grant = await this.#grantContext(where, signal);
    let result: Grant;
    if (!this.#codeFlow) {
      result = await clientCredentialsGrant(grant, scopes);
    } else {
      const authorize = this.#options.authorize;
      if (authorize === undefined) {
        throw authRequired(
          this.context,
          'no usable token is stored and the runtime has no authorize hook',
          {
            issuer: as.issuer,
            scopes,
          },
        );
      }
      result = await authorizationCodeGrant(grant, {
        authorize,
        redirectUri: this.#options.redirectUri,
        scopes,
        signal: signal ?? new AbortController().signal,
      });
    }
    this.#scopes = scopes;
    const key: TokenKey = {
      issuer: as.issuer,
      resource: this.#resource,
      clientId: where.client.clientId,
    };
    const login = await this.#options.store.put(key, {
      tokens: await this.#withKey(result.tokens),
      principal: this.#principal(as.issuer, where.client.clientId, result.subject),
      server: this.#options.server,
      scopes,
    });
    this.#current = { key, login };
    return this.#current;
  }

  /**
   * Who a new login acts for: the subject when the token response named one; else, for a user's
   * login, an id of this login (kept by its refreshes) so that two users of one client never
   * share a principal; for client credentials, the client.
   */
  #principal(issuer: string, clientId: string, subject: string | undefined): string {
    if (subject !== undefined) return `${issuer} ${subject}`;
    return this.#codeFlow ? `${issuer} login:${randomUUID()}` : `${issuer} client:${clientId}`;
  }

  /** Refresh through the single flight (threads, processes, the fleet); adopts a newer login. */
  async #refresh(current: CurrentLogin, signal: AbortSignal | undefined): Promise<CurrentLogin> {
    const where = this.#where ?? (await this.#discoverIssuer(current.key.issuer, signal));
    const login = await refreshSingleFlight({
      store: this.#options.store,
      key: current.key,
      seen: current.login,
      usable: (l) => this.#fresh(l),
      refresh: async (stored, refreshSignal) => {
        const refreshToken = stored.tokens.refreshToken;
        if (refreshToken === undefined) {
          throw authRequired(this.context, 'the stored login has expired and cannot be refreshed', {
            issuer: current.key.issuer,
          });
        }
        // Refreshed with the key the stored login is bound to (another process may have made it).
        if (!(await this.#adoptKey(stored))) {
          throw authRequired(this.context, 'the stored DPoP-bound login has no usable key', {
            issuer: current.key.issuer,
          });
        }
        const grant = await this.#grantContext(where, refreshSignal);
        const result = await refreshGrant(grant, refreshToken);
        return {
          tokens: await this.#withKey(result.tokens),
          principal: stored.principal,
          ...(stored.server === undefined ? {} : { server: stored.server }),
          ...(stored.scopes === undefined ? {} : { scopes: stored.scopes }),
        };
      },
      ...(signal === undefined ? {} : { signal }),
    });
    this.#learn(login);
    // A newer login another process wrote may be bound to its own key.
    await this.#adoptKey(login);
    this.#current = { key: current.key, login };
    return this.#current;
  }

  /** Discovery from a stored login's issuer alone (no challenge yet in this process). */
  async #discoverIssuer(issuer: string, signal: AbortSignal | undefined): Promise<Where> {
    try {
      return await this.#discover({ dpop: false }, signal);
    } catch (error) {
      if (isStepbindError(error)) throw error;
      throw authFailed(this.context, { reason: 'metadata', message: describe(error), issuer });
    }
  }
}
