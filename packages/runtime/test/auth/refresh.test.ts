/**
 * refreshSingleFlight within one process: one refresh per key however many callers, a newer login
 * adopted under the lock, persisted before use, the caller's abort ends only its wait, a failed
 * or timed-out refresh leaves the stored login as it was and the next caller tries again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileTokenStore } from '../../src/auth/file-token-store.js';
import { MemoryTokenStore } from '../../src/auth/memory-token-store.js';
import { refreshSingleFlight, type RefreshRequest } from '../../src/auth/refresh.js';
import type { StoredLogin, TokenKey, TokenStore } from '../../src/auth/types.js';

const KEY: TokenKey = {
  issuer: 'https://as.example',
  resource: 'https://mcp.example/mcp',
  clientId: 'client-1',
};

const login = (n: number, expiresAt: number): Omit<StoredLogin, 'version' | 'updatedAt'> => ({
  principal: 'https://as.example user-1',
  tokens: {
    accessToken: `at-${n}`,
    tokenType: 'Bearer',
    refreshToken: `rt-${n}`,
    expiresAt,
  },
});

/** A refresh whose grants the test answers; counts them. */
function grants() {
  const calls: {
    login: StoredLogin;
    signal: AbortSignal;
    answer(n: number): void;
    fail(e: Error): void;
  }[] = [];
  let onCall: () => void = () => undefined;
  return {
    calls,
    /** Resolves when the next grant was asked for. */
    next: () => new Promise<void>((resolve) => (onCall = resolve)),
    refresh: (held: StoredLogin, signal: AbortSignal) =>
      new Promise<Omit<StoredLogin, 'version' | 'updatedAt'>>((resolve, reject) => {
        calls.push({
          login: held,
          signal,
          answer: (n) => resolve(login(n, 2)),
          fail: reject,
        });
        onCall();
      }),
  };
}

const usable = (l: StoredLogin): boolean => (l.tokens.expiresAt ?? 0) > 1;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'stepbind-refresh-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const stores: [string, () => TokenStore][] = [
  ['MemoryTokenStore', () => new MemoryTokenStore()],
  ['FileTokenStore', () => new FileTokenStore({ path: join(dir, 'tokens.json') })],
];

describe.each(stores)('refreshSingleFlight on a %s', (_name, open) => {
  it('runs one refresh for many concurrent callers, persists it before any caller gets it, and all get it', async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    const g = grants();
    const asked = g.next();
    const request: RefreshRequest = { store, key: KEY, seen, usable, refresh: g.refresh };
    const callers = Array.from({ length: 5 }, () => refreshSingleFlight(request));
    await asked;
    g.calls[0]!.answer(1);
    const results = await Promise.all(callers);
    expect(g.calls.length).toBe(1);
    expect(g.calls[0]!.login.tokens.refreshToken).toBe('rt-0');
    expect(new Set(results.map((r) => r.version))).toEqual(new Set([2]));
    expect(await store.get(KEY)).toEqual(results[0]);
  });

  it('adopts a newer usable login another process stored, without refreshing', async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    const newer = await store.put(KEY, login(7, 5));
    const g = grants();
    const result = await refreshSingleFlight({ store, key: KEY, seen, usable, refresh: g.refresh });
    expect(result).toEqual(newer);
    expect(g.calls.length).toBe(0);
  });

  it('refreshes with the newest stored refresh token when the newer login is expired too', async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    await store.put(KEY, login(3, 1));
    const g = grants();
    const asked = g.next();
    const result = refreshSingleFlight({ store, key: KEY, seen, usable, refresh: g.refresh });
    await asked;
    expect(g.calls[0]!.login.tokens.refreshToken).toBe('rt-3');
    g.calls[0]!.answer(4);
    expect((await result).tokens.accessToken).toBe('at-4');
  });

  it('leaves the stored login untouched when the refresh fails, and the next caller tries again', async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    const g = grants();
    let asked = g.next();
    const failing = refreshSingleFlight({ store, key: KEY, seen, usable, refresh: g.refresh });
    await asked;
    g.calls[0]!.fail(new Error('invalid_grant'));
    await expect(failing).rejects.toThrow('invalid_grant');
    expect(await store.get(KEY)).toEqual(seen);
    asked = g.next();
    const retry = refreshSingleFlight({ store, key: KEY, seen, usable, refresh: g.refresh });
    await asked;
    g.calls[1]!.answer(1);
    expect((await retry).tokens.accessToken).toBe('at-1');
  });

  it("ends only the aborted caller's wait: the refresh goes on and is stored for the others", async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    const g = grants();
    const asked = g.next();
    const controller = new AbortController();
    const impatient = refreshSingleFlight({
      store,
      key: KEY,
      seen,
      usable,
      refresh: g.refresh,
      signal: controller.signal,
    });
    const patient = refreshSingleFlight({ store, key: KEY, seen, usable, refresh: g.refresh });
    await asked;
    controller.abort();
    await expect(impatient).rejects.toMatchObject({ code: 'ABORTED' });
    expect(g.calls[0]!.signal.aborted).toBe(false);
    g.calls[0]!.answer(1);
    expect((await patient).tokens.accessToken).toBe('at-1');
    expect((await store.get(KEY))?.tokens.accessToken).toBe('at-1');
  });

  it('abandons a refresh that does not answer within timeoutMs with AUTH_FAILED, leaving the login as it was', async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    const g = grants();
    const error = await refreshSingleFlight({
      store,
      key: KEY,
      seen,
      usable,
      refresh: g.refresh,
      timeoutMs: 20,
      server: 'docs',
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'AUTH_FAILED',
      detail: { reason: 'unreachable', server: 'docs', issuer: KEY.issuer },
    });
    expect(g.calls[0]!.signal.aborted).toBe(true);
    expect(await store.get(KEY)).toEqual(seen);
  });

  it('fails AUTH_REQUIRED, naming the command, when the login was removed meanwhile (never stores it again)', async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    await store.delete(KEY);
    const g = grants();
    await expect(
      refreshSingleFlight({
        store,
        key: KEY,
        seen,
        usable,
        refresh: g.refresh,
        command: 'stepbind login docs --config mcp.json',
      }),
    ).rejects.toMatchObject({
      code: 'AUTH_REQUIRED',
      detail: { command: 'stepbind login docs --config mcp.json' },
    });
    expect(g.calls.length).toBe(0);
    expect(await store.get(KEY)).toBeUndefined();
  });

  it('keeps the old refresh token when the server answers without a new one', async () => {
    const store = open();
    const seen = await store.put(KEY, login(0, 1));
    const result = await refreshSingleFlight({
      store,
      key: KEY,
      seen,
      usable,
      refresh: async () => ({
        principal: seen.principal,
        tokens: { accessToken: 'at-1', tokenType: 'Bearer', expiresAt: 2 },
      }),
    });
    expect(result.tokens).toEqual({
      accessToken: 'at-1',
      tokenType: 'Bearer',
      expiresAt: 2,
      refreshToken: 'rt-0',
    });
  });
});

describe('MemoryTokenStore.withLock', () => {
  it('ends a wait on abort, and the lock still passes to the next waiter', async () => {
    const store = new MemoryTokenStore();
    let release: () => void = () => undefined;
    let entered: () => void = () => undefined;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const holder = store.withLock(KEY, async () => {
      const held = new Promise<void>((resolve) => (release = resolve));
      entered();
      await held;
    });
    await inside;
    const controller = new AbortController();
    const aborted = store.withLock(KEY, async () => 'never', controller.signal);
    const next = store.withLock(KEY, async () => 'next');
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ code: 'ABORTED' });
    release();
    await holder;
    expect(await next).toBe('next');
  });
});
