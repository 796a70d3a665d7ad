/**
 * The stored-login helpers of an {@link OAuthSession} (`session.ts`): which server and client a
 * login belongs to, when it wants a refresh, the secrets it teaches the redactor, and logout's
 * removal and revocation.
 */
import { RuntimeError } from '@stepbind/binding';
import { abortedError } from '@stepbind/binding/internal';
import * as oauth from 'oauth4webapi';

import type { ResolvedClient } from './client.js';
import { insecureFor, type Discovery } from './discovery.js';
import type {
  AuthStatus,
  OAuthTokens,
  StoredLogin,
  StoredLoginSummary,
  TokenKey,
  TokenStore,
} from './types.js';

/** Where a session logs in: the discovered authorization server and its client there. */
export interface Where {
  readonly discovery: Discovery;
  readonly client: ResolvedClient;
}

/** True when `where` is the authorization server and client `key` was issued by and to. */
export function matches(where: Where, key: TokenKey): boolean {
  return where.discovery.as.issuer === key.issuer && where.client.clientId === key.clientId;
}

/** The scopes a login's token was granted (as the server answered). */
export function granted(login: StoredLogin): string[] {
  return login.tokens.scope?.split(' ').filter((s) => s !== '') ?? [];
}

/**
 * Fresh unless it expires within the margin: `marginMs`, or half the token's lifetime (from its
 * write to its expiry) for a short-lived token, which would otherwise be refreshed on every use.
 */
export function fresh(login: StoredLogin, now: number, marginMs: number): boolean {
  const expiresAt = login.tokens.expiresAt;
  if (expiresAt === undefined) return true;
  const lifetime = Math.max(0, expiresAt - login.updatedAt);
  return expiresAt - Math.min(marginMs, lifetime / 2) > now;
}

/** Teaches the redactor a login's secrets: its tokens and DPoP key. */
export function learnLogin(login: StoredLogin, learnSecret: (secret: string) => void): void {
  learnSecret(login.tokens.accessToken);
  if (login.tokens.refreshToken !== undefined) learnSecret(login.tokens.refreshToken);
  if (login.tokens.dpopKey !== undefined) learnKey(login.tokens.dpopKey, learnSecret);
}

/** The key JSON and each of its private members are secrets. */
function learnKey(jwkJson: string, learnSecret: (secret: string) => void): void {
  learnSecret(jwkJson);
  try {
    const jwk = JSON.parse(jwkJson) as Record<string, unknown>;
    for (const name of ['d', 'p', 'q', 'dp', 'dq', 'qi']) {
      const value = jwk[name];
      if (typeof value === 'string') learnSecret(value);
    }
  } catch {
    // Not JSON: the whole string was learnt.
  }
}

/**
 * `tokens` with the DPoP key they are bound to, the one the grant was made with (stored with
 * them for other processes).
 */
export function withKey(
  tokens: OAuthTokens,
  dpopKey: string | undefined,
  learnSecret: (secret: string) => void,
): OAuthTokens {
  if (tokens.tokenType !== 'DPoP' || dpopKey === undefined) return tokens;
  learnKey(dpopKey, learnSecret);
  return Object.freeze({ ...tokens, dpopKey });
}

/**
 * Deletes each of `summaries`' logins under its key's lock (a refresh under way then finds it
 * gone and stores nothing); returns what was stored.
 */
export async function removeAll(
  store: TokenStore,
  summaries: readonly StoredLoginSummary[],
  signal: AbortSignal | undefined,
): Promise<{ readonly key: TokenKey; readonly login: StoredLogin }[]> {
  const removed: { readonly key: TokenKey; readonly login: StoredLogin }[] = [];
  for (const { key } of summaries) {
    const login = await store.withLock(
      key,
      async () => {
        const stored = await store.get(key);
        await store.delete(key);
        return stored;
      },
      signal,
    );
    if (login !== undefined) removed.push({ key, login });
  }
  return removed;
}

/** Revokes `login`'s refresh token at `where` (a courtesy: a failure is ignored). */
export async function revoke(
  where: Where,
  login: StoredLogin,
  fetchImpl: typeof fetch,
  signal: AbortSignal | undefined,
): Promise<void> {
  const refreshToken = login.tokens.refreshToken;
  const endpoint = where.discovery.as.revocation_endpoint;
  if (refreshToken === undefined || endpoint === undefined) return;
  try {
    const response = await oauth.revocationRequest(
      where.discovery.as,
      where.client.client,
      where.client.clientAuth,
      refreshToken,
      {
        [oauth.customFetch]: fetchImpl,
        ...insecureFor(endpoint),
        ...(signal === undefined ? {} : { signal }),
      },
    );
    await oauth.processRevocationResponse(response);
  } catch {
    // Revocation is a courtesy: the login is forgotten here either way.
  }
}

/** What `stepbind auth status` shows of `current` (no secrets). */
export function statusOf(
  server: string,
  current: { readonly key: TokenKey; readonly login: StoredLogin } | undefined,
  now: number,
): AuthStatus {
  if (current === undefined) return Object.freeze({ server, state: 'logged-out' });
  const { login, key } = current;
  const expired = login.tokens.expiresAt !== undefined && login.tokens.expiresAt <= now;
  return Object.freeze({
    server,
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

/** A call on a closed session (the runtime closed), and what aborts its login in flight. */
export function closedError(server: string): Error {
  return abortedError(
    `server "${server}": its authorization was closed (the runtime closed); create the runtime again`,
    undefined,
    { as: RuntimeError },
  );
}

/** A caller stopped waiting for the shared login (it goes on for the others). */
export function loginWaitAborted(reason: unknown): Error {
  return abortedError('the wait for an OAuth login was cancelled (the login goes on)', reason, {
    as: RuntimeError,
    keepStepbindReason: true,
  });
}
