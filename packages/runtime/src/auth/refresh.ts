/**
 * Single-flight token refresh (DESIGN §16): one refresh per key at a time across the threads of
 * this process (a shared promise), other processes and the fleet (the store's lock). Under the lock
 * the login is read again and a newer one another process wrote is adopted instead of refreshing a
 * rotated-away refresh token (reusing one makes a careful authorization server revoke the whole
 * token family, logging every process out); a new login is persisted before anyone uses it. The
 * caller's signal ends only its own wait: the refresh itself runs to its end (bounded by
 * `timeoutMs`), so a cancelled call never loses the login for everyone else. A refresh that fails
 * changes nothing stored, and the next caller tries again.
 */
import { ErrorCode, RuntimeError } from '@stepbind/binding';
import { abortedError, untilAborted } from '@stepbind/binding/internal';

import { tokenKeyId } from './memory-token-store.js';
import type { StoredLogin, TokenKey, TokenStore } from './types.js';

/** How long one refresh grant (the lock wait excluded) may take before it is abandoned. */
export const REFRESH_TIMEOUT_MS = 30_000;

/** What {@link refreshSingleFlight} needs. */
export interface RefreshRequest {
  readonly store: TokenStore;
  readonly key: TokenKey;
  /** The login the caller holds (and found wanting), or none. */
  readonly seen: StoredLogin | undefined;
  /** True when a stored login is good enough to use as it is (not about to expire, scopes met). */
  usable(login: StoredLogin): boolean;
  /**
   * The refresh grant itself, over the network. Throws a typed `AUTH_*` error on refusal. An
   * answer without a refresh token keeps the old one (RFC 6749 §6: the server did not rotate).
   */
  refresh(
    login: StoredLogin,
    signal: AbortSignal,
  ): Promise<Omit<StoredLogin, 'version' | 'updatedAt'>>;
  /** The caller's signal: ends this caller's wait only. */
  readonly signal?: AbortSignal;
  /** Bound on the refresh grant. @default REFRESH_TIMEOUT_MS */
  readonly timeoutMs?: number;
  /** The configured server name, for errors. */
  readonly server?: string;
  /** The command that logs in again (`stepbind login NAME --config FILE`), for `AUTH_REQUIRED`. */
  readonly command?: string;
}

const inFlight = new WeakMap<TokenStore, Map<string, Promise<StoredLogin>>>();

/**
 * The login to use after `seen` was found wanting: a newer stored one, or a refreshed one.
 * Callers that arrive while a refresh of the same key and store is under way share it (and its
 * result: the first caller's `usable` and `refresh` decide).
 *
 * @throws what the refresh threw (nothing stored changes then); RuntimeError `AUTH_REQUIRED` when
 *   the login was removed from the store meanwhile (`stepbind logout`); `AUTH_FAILED`
 *   (`reason: 'unreachable'`) when the grant did not answer within `timeoutMs`; the store's
 *   errors; `ABORTED` (or the signal's stepbind reason) when the caller's signal ended its wait.
 */
export async function refreshSingleFlight(request: RefreshRequest): Promise<StoredLogin> {
  const { store, key } = request;
  let flights = inFlight.get(store);
  if (flights === undefined) {
    flights = new Map();
    inFlight.set(store, flights);
  }
  const id = tokenKeyId(key);
  let flight = flights.get(id);
  if (flight === undefined) {
    const own = flights;
    flight = runFlight(request).finally(() => own.delete(id));
    flights.set(id, flight);
  }
  return await waitFor(flight, request.signal);
}

/** Lock, read again, adopt or refresh, persist: one flight of one key. */
async function runFlight(request: RefreshRequest): Promise<StoredLogin> {
  const { store, key, seen } = request;
  // No caller's signal here: the flight is everyone's. The store bounds its own lock wait.
  return await store.withLock(key, async () => {
    // Read again under the lock: another process may have refreshed (and rotated) already.
    const current = await store.get(key);
    if (current === undefined) throw removedError(request);
    if (isNewer(current, seen) && request.usable(current)) return current;
    return await refreshAndPersist(request, current);
  });
}

/** True when `current` is another login than the one the caller saw (a logout and login restart versions). */
function isNewer(current: StoredLogin, seen: StoredLogin | undefined): boolean {
  return (
    seen === undefined ||
    current.version !== seen.version ||
    current.tokens.accessToken !== seen.tokens.accessToken
  );
}

async function refreshAndPersist(
  request: RefreshRequest,
  login: StoredLogin,
): Promise<StoredLogin> {
  const timeoutMs = request.timeoutMs ?? REFRESH_TIMEOUT_MS;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(timeoutError(request, timeoutMs)), timeoutMs);
  let next: Omit<StoredLogin, 'version' | 'updatedAt'>;
  try {
    next = await untilAborted(request.refresh(login, deadline.signal), deadline.signal, () =>
      timeoutError(request, timeoutMs),
    );
  } finally {
    clearTimeout(timer);
  }
  const refreshToken = next.tokens.refreshToken ?? login.tokens.refreshToken;
  const kept =
    refreshToken === undefined ? next : { ...next, tokens: { ...next.tokens, refreshToken } };
  // Persisted before anyone uses it, and never cancelled: a rotated refresh token lives only here.
  return await request.store.put(request.key, kept);
}

function removedError(request: RefreshRequest): RuntimeError {
  const { key, server, command } = request;
  return new RuntimeError(
    ErrorCode.AUTH_REQUIRED,
    `The login${server === undefined ? '' : ` of server "${server}"`} at ${key.issuer} was removed from the token store ${request.store.location} (logged out) while it was in use; log in again${command === undefined ? '' : ` (${command})`}.`,
    {
      detail: {
        ...(server === undefined ? {} : { server }),
        resource: key.resource,
        issuer: key.issuer,
        ...(command === undefined ? {} : { command }),
      },
    },
  );
}

function timeoutError(request: RefreshRequest, timeoutMs: number): RuntimeError {
  const { key, server } = request;
  return new RuntimeError(
    ErrorCode.AUTH_FAILED,
    `The token refresh${server === undefined ? '' : ` of server "${server}"`} at ${key.issuer} did not answer within ${timeoutMs} ms; the stored login was left as it was. Check that the authorization server is reachable; the next call tries again.`,
    {
      detail: {
        ...(server === undefined ? {} : { server }),
        reason: 'unreachable',
        resource: key.resource,
        issuer: key.issuer,
        timeoutMs,
      },
    },
  );
}

async function waitFor<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  return await untilAborted(work, signal, (reason) =>
    abortedError('the wait for a token refresh was cancelled (the refresh goes on)', reason, {
      as: RuntimeError,
      keepStepbindReason: true,
    }),
  );
}
