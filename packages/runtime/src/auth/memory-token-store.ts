/**
 * A token store in this process's memory: for tests and for applications that keep nothing on
 * disk. Locks are per key and in-process only; a waiter's signal ends its wait.
 */
import { RuntimeError } from '@stepbind/binding';
import { abortedError, untilAborted } from '@stepbind/binding/internal';
import { Mutex } from 'async-mutex';

import type {
  ClientRegistration,
  StoredLogin,
  StoredLoginSummary,
  TokenKey,
  TokenStore,
} from './types.js';

/** The string a {@link TokenKey} is filed under. */
export function tokenKeyId(key: TokenKey): string {
  return JSON.stringify([key.issuer, key.resource, key.clientId]);
}

/** A {@link TokenStore} in memory: nothing survives the process. */
export class MemoryTokenStore implements TokenStore {
  readonly location = 'memory';
  readonly #logins = new Map<string, { key: TokenKey; login: StoredLogin }>();
  readonly #registrations = new Map<string, ClientRegistration>();
  readonly #locks = new Map<string, Mutex>();

  get(key: TokenKey): Promise<StoredLogin | undefined> {
    return Promise.resolve(this.#logins.get(tokenKeyId(key))?.login);
  }

  put(key: TokenKey, login: Omit<StoredLogin, 'version' | 'updatedAt'>): Promise<StoredLogin> {
    const id = tokenKeyId(key);
    const version = (this.#logins.get(id)?.login.version ?? 0) + 1;
    const stored: StoredLogin = Object.freeze({ ...login, version, updatedAt: Date.now() });
    this.#logins.set(id, { key, login: stored });
    return Promise.resolve(stored);
  }

  delete(key: TokenKey): Promise<boolean> {
    return Promise.resolve(this.#logins.delete(tokenKeyId(key)));
  }

  list(): Promise<readonly StoredLoginSummary[]> {
    return Promise.resolve(
      [...this.#logins.values()].map(({ key, login }) => summarize(key, login)),
    );
  }

  getRegistration(issuer: string, redirectUri: string): Promise<ClientRegistration | undefined> {
    return Promise.resolve(this.#registrations.get(JSON.stringify([issuer, redirectUri])));
  }

  putRegistration(registration: ClientRegistration): Promise<void> {
    this.#registrations.set(
      JSON.stringify([registration.issuer, registration.redirectUri]),
      Object.freeze({ ...registration }),
    );
    return Promise.resolve();
  }

  async withLock<T>(key: TokenKey, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const id = tokenKeyId(key);
    let lock = this.#locks.get(id);
    if (lock === undefined) {
      lock = new Mutex();
      this.#locks.set(id, lock);
    }
    signal?.throwIfAborted();
    const acquiring = lock.acquire();
    let release: () => void;
    try {
      release = await untilAborted(acquiring, signal, (reason) =>
        abortedError('the wait for a token lock was cancelled', reason, {
          as: RuntimeError,
          keepStepbindReason: true,
        }),
      );
    } catch (error) {
      // The lock is still granted later: handed straight back, so the next waiter is not stuck.
      void acquiring.then((late) => late());
      throw error;
    }
    try {
      return await work();
    } finally {
      release();
    }
  }
}

/** A stored login without its secrets. */
export function summarize(key: TokenKey, login: StoredLogin): StoredLoginSummary {
  return Object.freeze({
    key,
    principal: login.principal,
    ...(login.server === undefined ? {} : { server: login.server }),
    ...(login.scopes === undefined ? {} : { scopes: login.scopes }),
    ...(login.tokens.expiresAt === undefined ? {} : { expiresAt: login.tokens.expiresAt }),
    hasRefreshToken: login.tokens.refreshToken !== undefined,
    updatedAt: login.updatedAt,
  });
}
