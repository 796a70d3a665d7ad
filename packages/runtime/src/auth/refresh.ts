/**
 * Single-flight token refresh (DESIGN §16): one refresh per key at a time across the threads of
 * this process (a shared promise), other processes and the fleet (the store's lock). Under the lock
 * the login is read again and a newer one another process wrote is adopted instead of refreshing a
 * rotated-away refresh token; a new login is persisted before anyone uses it. The caller's signal
 * ends only its own wait: the refresh itself runs to its end (bounded by `timeoutMs`), so a
 * cancelled call never loses the login for everyone else.
 */
import { RuntimeError } from '@stepbind/binding';
import { abortedError, untilAborted } from '@stepbind/binding/internal';

import { tokenKeyId } from './memory-token-store.js';
import type { StoredLogin, TokenKey, TokenStore } from './types.js';

/** How long one refresh (lock wait excluded) may take before it is abandoned. */
export const REFRESH_TIMEOUT_MS = 30_000;

/** What {@link refreshSingleFlight} needs. */
export interface RefreshRequest {
  readonly store: TokenStore;
  readonly key: TokenKey;
  /** The login the caller holds (and found wanting), or none. */
  readonly seen: StoredLogin | undefined;
  /** True when a stored login is good enough to use as it is (not about to expire, scopes met). */
  usable(login: StoredLogin): boolean;
  /** The refresh grant itself, over the network. Throws a typed `AUTH_*` error on refusal. */
  refresh(
    login: StoredLogin,
    signal: AbortSignal,
  ): Promise<Omit<StoredLogin, 'version' | 'updatedAt'>>;
  /** The caller's signal: ends this caller's wait only. */
  readonly signal?: AbortSignal;
  /** Bound on the refresh. @default REFRESH_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

const inFlight = new WeakMap<TokenStore, Map<string, Promise<StoredLogin>>>();

/**
 * The login to use after `seen` was found wanting: a newer stored one, or a refreshed one. Throws
 * what the refresh threw (nothing stored changes then) or `signal`'s reason.
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
    flight = runFlight(request).finally(() => flights.delete(id));
    flights.set(id, flight);
  }
  return await waitFor(flight, request.signal);
}

async function runFlight(request: RefreshRequest): Promise<StoredLogin> {
  const { store, key, seen } = request;
  const timeout = AbortSignal.timeout(request.timeoutMs ?? REFRESH_TIMEOUT_MS);
  return await store.withLock(
    key,
    async () => {
      // Read again under the lock: another process may have refreshed already.
      const current = await store.get(key);
      if (current === undefined) {
        if (seen === undefined) throw new Error('refreshSingleFlight: nothing stored to refresh');
        return await persist(request, seen, timeout);
      }
      const newer = seen === undefined || current.version !== seen.version;
      if (newer && request.usable(current)) return current;
      return await persist(request, current, timeout);
    },
    timeout,
  );
}

async function persist(
  request: RefreshRequest,
  login: StoredLogin,
  signal: AbortSignal,
): Promise<StoredLogin> {
  const next = await request.refresh(login, signal);
  // Persisted before anyone uses it: a rotated refresh token lives only in the store.
  return await request.store.put(request.key, next);
}

async function waitFor<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  return await untilAborted(work, signal, (reason) =>
    abortedError('the wait for a token refresh was cancelled (the refresh goes on)', reason, {
      as: RuntimeError,
      keepStepbindReason: true,
    }),
  );
}
