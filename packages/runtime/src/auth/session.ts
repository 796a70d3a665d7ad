/**
 * One server's OAuth state, owned by its authorizer and kept across reconnects: where it logs in
 * (discovery), as which client, the current login and the scopes asked so far. The request side
 * (`authorized-fetch.ts`) asks it for a token, and on a refusal to recover (401) or step up (403);
 * it never touches the connection, so a refreshed token never restarts one.
 */
import { isStepbindError } from '@stepbind/binding';
import { untilAborted } from '@stepbind/binding/internal';
import { randomUUID } from 'node:crypto';

import type * as oauth from 'oauth4webapi';

import { authFailed, authRequired, describe, type AuthErrorContext } from './auth-error.js';
import { resolveClient } from './client.js';
import {
  canonicalResource,
  discoverAuthorizationServer,
  discoverProtectedResource,
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
import {
  fresh,
  granted,
  learnLogin,
  matches,
  removeAll,
  closedError,
  loginWaitAborted,
  revoke,
  statusOf,
  withKey,
  type Where,
} from './session-logins.js';
import type {
  AuthorizeHook,
  AuthStatus,
  OAuthConfig,
  OAuthTokens,
  StoredLogin,
  StoredLoginSummary,
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
  /** The shared login runs on its own signal: aborted only by {@link close}. */
  #loginAbort: AbortController | undefined;
  /** Refreshes of this session under way. */
  #refreshing = 0;
  /** Grows with every logout and new login: an outdated result never becomes `#current`. */
  #generation = 0;
  #closed = false;

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

  /** True while a login or a refresh of this session is in flight. */
  get busy(): boolean {
    return this.#loginFlight !== undefined || this.#refreshing > 0;
  }

  /** Aborts a login in flight; later calls fail `ABORTED`. */
  close(): void {
    this.#closed = true;
    this.#loginAbort?.abort(closedError(this.context.server));
  }

  #open(): void {
    if (this.#closed) throw closedError(this.context.server);
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
    this.#open();
    // One shared read: a second request at the same moment must not go out without the token.
    if (this.#loading === undefined) {
      const generation = this.#generation;
      const loading = this.#stored().then((stored) => {
        // A logout (or a login) meanwhile wins over what was read before it.
        if (generation === this.#generation) this.#current ??= stored;
      });
      this.#loading = loading;
      // A failed read is not kept: the next request reads again.
      loading.catch(() => {
        if (this.#loading === loading) this.#loading = undefined;
      });
    }
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
    this.#open();
    const where = await this.#discover(challenge, signal);
    const adopted = await this.#newerThan(refused, where);
    if (adopted !== undefined) return adopted;
    if (
      refused !== undefined &&
      matches(where, refused.key) &&
      refused.login.tokens.refreshToken !== undefined
    ) {
      try {
        return await this.#refresh(refused, signal);
      } catch (error) {
        if (signal?.aborted === true) throw error;
        // The refresh token is dead too: a new login below.
      }
    }
    return await this.#login(where, this.#scopesFor(challenge, where), signal);
  }

  /**
   * A login other than `refused` at `where`'s server and client: the one in use, else one in the
   * store (another process, `stepbind login`, may have logged in meanwhile).
   */
  async #newerThan(
    refused: CurrentLogin | undefined,
    where: Where,
    covers: (login: StoredLogin) => boolean = () => true,
  ): Promise<CurrentLogin | undefined> {
    const other = (c: CurrentLogin | undefined): c is CurrentLogin =>
      c !== undefined &&
      matches(where, c.key) &&
      covers(c.login) &&
      (refused === undefined || c.login.tokens.accessToken !== refused.login.tokens.accessToken);
    if (other(this.#current)) return this.#current;
    const generation = this.#generation;
    const stored = await this.#stored(where);
    if (!other(stored) || generation !== this.#generation) return undefined;
    this.#current = stored;
    return stored;
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

  /**
   * After a 403 `insufficient_scope`: log in again for the union of the scopes asked so far,
   * unless a login other than `refused` that covers the challenged scopes is already there.
   */
  async stepUp(
    challenge: Challenge,
    signal: AbortSignal | undefined,
    refused?: CurrentLogin,
  ): Promise<CurrentLogin> {
    this.#open();
    const where = await this.#discover(challenge, signal);
    const wanted = challenge.scopes ?? [];
    const covers = (login: StoredLogin): boolean => {
      const has = new Set([...granted(login), ...(login.scopes ?? [])]);
      return wanted.every((s) => has.has(s));
    };
    if (refused !== undefined) {
      const newer = await this.#newerThan(refused, where, covers);
      if (newer !== undefined) return newer;
    }
    const current = this.#current;
    const asked = this.#scopes ?? current?.login.scopes;
    const scopes = unionScopes(
      asked,
      current === undefined ? undefined : granted(current.login),
      challenge.scopes,
    );
    return await this.#login(where, scopes, signal);
  }

  /** Logs in now, whatever is stored (`stepbind login`). */
  async login(signal: AbortSignal | undefined): Promise<CurrentLogin> {
    this.#open();
    const where = await this.#discover({ dpop: false }, signal);
    return await this.#login(where, this.#scopesFor({ dpop: false }, where), signal);
  }

  /**
   * Forgets every stored login of this resource (and the configured client), each under its key's
   * lock so that a refresh under way cannot bring it back, then revokes their refresh tokens at
   * the authorization server that issued them to this client (a courtesy: a failure is ignored).
   */
  async logout(signal: AbortSignal | undefined): Promise<void> {
    this.#generation++;
    this.#current = undefined;
    this.#loading = Promise.resolve();
    const removed = await removeAll(this.#options.store, await this.#summaries(), signal);
    const revocable = removed.filter((r) => r.login.tokens.refreshToken !== undefined);
    if (revocable.length === 0) return;
    let where: Where;
    try {
      where = this.#where ?? (await this.#discover({ dpop: false }, signal));
    } catch {
      return; // Revocation is a courtesy: the logins are forgotten here either way.
    }
    for (const { key, login } of revocable) {
      if (matches(where, key)) await revoke(where, login, this.#options.fetch, signal);
    }
  }

  /** The login state, without secrets. */
  async status(): Promise<AuthStatus> {
    return statusOf(this.#options.server, this.#current ?? (await this.#stored()), this.#now);
  }

  /** The stored logins for this resource (and the configured client, when one is). */
  async #summaries(): Promise<readonly StoredLoginSummary[]> {
    const clientId = this.#options.config.clientId;
    return (await this.#options.store.list()).filter(
      (s) =>
        s.key.resource === this.#resource &&
        (clientId === undefined || s.key.clientId === clientId),
    );
  }

  #fresh(login: StoredLogin): boolean {
    return fresh(login, this.#now, REFRESH_MARGIN_MS);
  }

  #learn(login: StoredLogin): void {
    learnLogin(login, this.#options.learnSecret);
  }

  #withKey(tokens: OAuthTokens, dpopKey: string | undefined): OAuthTokens {
    return withKey(tokens, dpopKey, this.#options.learnSecret);
  }

  async #stored(where: Where | undefined = this.#where): Promise<CurrentLogin | undefined> {
    const rank = (s: StoredLoginSummary): number =>
      where !== undefined && matches(where, s.key) ? 1 : 0;
    const summaries = [...(await this.#summaries())];
    const newest = summaries.sort((a, b) => rank(b) - rank(a) || b.updatedAt - a.updatedAt)[0];
    if (newest === undefined) return undefined;
    const login = await this.#options.store.get(newest.key);
    if (login === undefined) return undefined;
    this.#learn(login);
    // A DPoP-bound token is usable only with its key, stored with it (a login without one is not).
    if (login.tokens.tokenType === 'DPoP' && !(await this.#adoptKey(login))) return undefined;
    return { key: newest.key, login };
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

  /** The grant's context, and the DPoP key of its proof maker (captured together). */
  async #grantContext(
    where: Where,
    signal: AbortSignal | undefined,
  ): Promise<GrantContext & { readonly dpopKey?: string }> {
    let dpop: oauth.DPoPHandle | undefined;
    let dpopKey: string | undefined;
    // An adopt between the two reads swaps the pair: read again until they belong together.
    do {
      dpop = await this.dpop.handleFor(where.discovery.as, false);
      dpopKey = dpop === undefined ? undefined : await this.dpop.exportKey();
    } while (dpop !== undefined && (await this.dpop.current()) !== dpop);
    return {
      ...(dpopKey === undefined ? {} : { dpopKey }),
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

  /**
   * A new login, one at a time: concurrent refusals share it. It runs on its own signal (aborted
   * by {@link close} only); each caller's signal ends that caller's wait, and a login every caller
   * left goes on (the user may be in the browser): a later caller joins it.
   */
  async #login(
    where: Where,
    scopes: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<CurrentLogin> {
    if (this.#loginFlight === undefined) {
      const abort = new AbortController();
      this.#loginAbort = abort;
      const flight = this.#runLogin(where, scopes, abort.signal).finally(() => {
        if (this.#loginFlight === flight) this.#loginFlight = undefined;
        if (this.#loginAbort === abort) this.#loginAbort = undefined;
      });
      flight.catch(() => undefined);
      this.#loginFlight = flight;
    }
    return await untilAborted(this.#loginFlight, signal, loginWaitAborted);
  }

  async #runLogin(
    where: Where,
    scopes: readonly string[],
    signal: AbortSignal,
  ): Promise<CurrentLogin> {
    const generation = this.#generation;
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
        signal,
      });
    }
    const key: TokenKey = {
      issuer: as.issuer,
      resource: this.#resource,
      clientId: where.client.clientId,
    };
    const tokens = this.#withKey(result.tokens, grant.dpopKey);
    const principal = this.#principal(as.issuer, where.client.clientId, result.subject);
    // Under the key's lock (a refresh under way cannot overwrite it), and never after a logout.
    const login = await this.#options.store.withLock(key, async () => {
      if (generation !== this.#generation) {
        throw authRequired(this.context, 'the login was logged out while it was under way', {
          issuer: as.issuer,
        });
      }
      return await this.#options.store.put(key, {
        tokens,
        principal,
        server: this.#options.server,
        scopes,
      });
    });
    this.#generation++;
    this.#scopes = scopes;
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

  /**
   * Refresh through the single flight (threads, processes, the fleet); adopts a newer login. Only
   * at the authorization server and client the login came from: a refresh token never goes
   * elsewhere (then AUTH_REQUIRED, and a 401 logs in again).
   */
  async #refresh(current: CurrentLogin, signal: AbortSignal | undefined): Promise<CurrentLogin> {
    this.#refreshing++;
    try {
      return await this.#runRefresh(current, signal);
    } finally {
      this.#refreshing--;
    }
  }

  async #runRefresh(current: CurrentLogin, signal: AbortSignal | undefined): Promise<CurrentLogin> {
    const generation = this.#generation;
    const where = this.#where ?? (await this.#discoverIssuer(current.key.issuer, signal));
    if (!matches(where, current.key)) {
      throw authRequired(
        this.context,
        'the stored login is from another authorization server or client than the resource names now',
        { issuer: where.discovery.as.issuer },
      );
    }
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
          tokens: this.#withKey(result.tokens, grant.dpopKey),
          principal: stored.principal,
          ...(stored.server === undefined ? {} : { server: stored.server }),
          ...(stored.scopes === undefined ? {} : { scopes: stored.scopes }),
        };
      },
      server: this.#options.server,
      command: this.#options.command,
      ...(signal === undefined ? {} : { signal }),
    });
    this.#learn(login);
    const next = { key: current.key, login };
    // A logout or a new login (a step-up) meanwhile wins: this result is not the session's login.
    if (generation !== this.#generation) {
      if (this.#current !== undefined) return this.#current;
      throw authRequired(this.context, 'the login was logged out while it was refreshed', {
        issuer: current.key.issuer,
      });
    }
    // A newer login another process wrote may be bound to its own key.
    await this.#adoptKey(login);
    this.#current = next;
    return next;
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
