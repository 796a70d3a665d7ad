/**
 * FileTokenStore: one 0600 file in a 0700 directory, replaced atomically, a typed error naming a
 * corrupt file (never an empty store), and lock files that exclude other processes, are taken
 * over from a dead owner, and whose wait is bounded and ends on abort.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostname } from 'node:os';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDefaultTokenStore, stateDirectory } from '../../src/auth/default-store.js';
import { withFileLock } from '../../src/auth/file-lock.js';
import { FileTokenStore, type FileTokenStoreOptions } from '../../src/auth/file-token-store.js';
import type { StoredLogin, TokenKey } from '../../src/auth/types.js';

const KEY: TokenKey = {
  issuer: 'https://as.example',
  resource: 'https://mcp.example/mcp',
  clientId: 'client-1',
};
const LOGIN: Omit<StoredLogin, 'version' | 'updatedAt'> = {
  principal: 'https://as.example user-1',
  server: 'docs',
  scopes: ['read'],
  tokens: {
    accessToken: 'at-secret-0001',
    tokenType: 'Bearer',
    refreshToken: 'rt-secret-0001',
    expiresAt: 1_900_000_000_000,
  },
};

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'stepbind-tokens-'));
  path = join(dir, 'state', 'tokens.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** This boot's id as the lock records it (absent where unreadable). */
function bootId(): { boot?: string } {
  try {
    return { boot: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() };
  } catch {
    return {};
  }
}

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  return Number(child.stdout);
}

describe('FileTokenStore', () => {
  it('reads nothing from a missing file and creates file 0600 and directory 0700 at the first write', async () => {
    const store = new FileTokenStore({ path });
    expect(await store.get(KEY)).toBeUndefined();
    expect(await store.list()).toEqual([]);
    const stored = await store.put(KEY, LOGIN);
    expect(stored).toMatchObject({ ...LOGIN, version: 1 });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'state')).mode & 0o777).toBe(0o700);
    // Atomic replace leaves no temp file and no lock file behind.
    expect(readdirSync(join(dir, 'state'))).toEqual(['tokens.json']);
  });

  it('grows the version by one per write, and a second instance on the same file reads what the first wrote', async () => {
    const a = new FileTokenStore({ path });
    const b = new FileTokenStore({ path });
    await a.put(KEY, LOGIN);
    const second = await b.put(KEY, {
      ...LOGIN,
      tokens: { ...LOGIN.tokens, accessToken: 'at-secret-0002' },
    });
    expect(second.version).toBe(2);
    expect(await a.get(KEY)).toEqual(second);
    expect(await a.get({ ...KEY, clientId: 'other' })).toBeUndefined();
  });

  it('keeps every login when writes of different keys race (the whole-file lock)', async () => {
    const stores = Array.from({ length: 4 }, () => new FileTokenStore({ path }));
    await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        stores[i % 4]!.put({ ...KEY, clientId: `client-${i}` }, LOGIN),
      ),
    );
    expect((await stores[0]!.list()).length).toBe(16);
  });

  it('lists logins without their tokens, deletes one, and keeps client registrations', async () => {
    const store = new FileTokenStore({ path });
    await store.put(KEY, LOGIN);
    const [summary] = await store.list();
    expect(summary).toMatchObject({ key: KEY, principal: LOGIN.principal, hasRefreshToken: true });
    expect(JSON.stringify(summary)).not.toContain('secret');
    await store.putRegistration({
      issuer: KEY.issuer,
      redirectUri: 'http://127.0.0.1:33418/callback',
      clientId: 'dyn-1',
      clientSecret: 'cs-secret',
      tokenEndpointAuthMethod: 'client_secret_basic',
    });
    expect(
      await store.getRegistration(KEY.issuer, 'http://127.0.0.1:33418/callback'),
    ).toMatchObject({ clientId: 'dyn-1' });
    expect(await store.getRegistration(KEY.issuer, 'http://other/')).toBeUndefined();
    expect(await store.delete(KEY)).toBe(true);
    expect(await store.delete(KEY)).toBe(false);
    expect(await store.get(KEY)).toBeUndefined();
    expect(
      await store.getRegistration(KEY.issuer, 'http://127.0.0.1:33418/callback'),
    ).toBeDefined();
  });

  it('refuses a corrupt file with AUTH_FAILED naming the path, without quoting its content, and changes nothing', async () => {
    const store = new FileTokenStore({ path });
    await store.put(KEY, LOGIN);
    const broken = readFileSync(path, 'utf8').slice(0, -20);
    writeFileSync(path, broken);
    const error = await store.get(KEY).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'AUTH_FAILED', detail: { reason: 'store', path } });
    expect((error as Error).message).toContain(path);
    expect((error as Error).message).toMatch(/log in again/);
    expect(JSON.stringify(error)).not.toContain('secret');
    expect(String((error as Error).message)).not.toContain('secret');
    expect((error as Error).cause).toBeUndefined();
    // A write refuses too: the logins in the file are never silently replaced.
    await expect(store.put({ ...KEY, clientId: 'x' }, LOGIN)).rejects.toMatchObject({
      code: 'AUTH_FAILED',
    });
    expect(readFileSync(path, 'utf8')).toBe(broken);
  });

  it('refuses a file of a newer format, and one whose logins are malformed', async () => {
    const store = new FileTokenStore({ path: join(dir, 'tokens.json') });
    writeFileSync(
      join(dir, 'tokens.json'),
      JSON.stringify({ version: 2, logins: [], registrations: [] }),
    );
    await expect(store.list()).rejects.toThrow(/newer stepbind/);
    writeFileSync(
      join(dir, 'tokens.json'),
      JSON.stringify({ version: 1, logins: [{ key: KEY }], registrations: [] }),
    );
    await expect(store.list()).rejects.toThrow(/logins are malformed/);
  });

  it('opens the default store under STEPBIND_STATE_DIR, else XDG_STATE_HOME/stepbind, else ~/.local/state/stepbind', () => {
    expect(openDefaultTokenStore({ STEPBIND_STATE_DIR: dir }).path).toBe(join(dir, 'tokens.json'));
    expect(stateDirectory({ XDG_STATE_HOME: '/x', STEPBIND_STATE_DIR: '' })).toBe('/x/stepbind');
    expect(stateDirectory({})).toMatch(/\.local\/state\/stepbind$/);
  });
});

describe('the lock file', () => {
  it('takes over a lock whose owner process is dead, and removes it after the work', async () => {
    const lock = join(dir, 'a.lock');
    writeFileSync(
      lock,
      JSON.stringify({ host: hostname(), ...bootId(), pid: deadPid(), at: Date.now(), nonce: 'n' }),
    );
    let tookOver = false;
    const result = await withFileLock(lock, async () => readFileSync(lock, 'utf8'), {
      onTakeover: () => (tookOver = true),
    });
    expect(tookOver).toBe(true);
    expect(JSON.parse(result)).toMatchObject({ pid: process.pid, ...bootId() });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('trusts a dead pid only within the same boot: a record from another boot waits for staleMs', async () => {
    const lock = join(dir, 'boot.lock');
    const held = JSON.stringify({
      host: hostname(),
      boot: 'another-boot',
      pid: deadPid(),
      at: Date.now(),
      nonce: 'other-boot',
    });
    writeFileSync(lock, held);
    let ran = false;
    await expect(
      withFileLock(lock, async () => (ran = true), { maxWaitMs: 30 }),
    ).rejects.toMatchObject({ name: 'FileLockTimeout', path: lock });
    expect(ran).toBe(false);
    expect(readFileSync(lock, 'utf8')).toBe(held);
  });

  it('never shows a waiter an empty lock: the owner record is complete when the lock exists, and no temp file stays', async () => {
    const lock = join(dir, 'c.lock');
    const seen = await withFileLock(lock, async () => readFileSync(lock, 'utf8'));
    expect(JSON.parse(seen)).toMatchObject({ host: hostname(), pid: process.pid });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('waits for a live owner: the wait ends with FileLockTimeout after maxWaitMs, or on abort, and the lock is left alone', async () => {
    const lock = join(dir, 'b.lock');
    const held = JSON.stringify({
      host: hostname(),
      ...bootId(),
      pid: process.pid,
      at: Date.now(),
      nonce: 'live',
    });
    writeFileSync(lock, held);
    let ran = false;
    await expect(
      withFileLock(lock, async () => (ran = true), { maxWaitMs: 30 }),
    ).rejects.toMatchObject({ name: 'FileLockTimeout', path: lock });
    const controller = new AbortController();
    const waiting = withFileLock(lock, async () => (ran = true), { signal: controller.signal });
    controller.abort(new Error('caller gave up'));
    await expect(waiting).rejects.toThrow('caller gave up');
    expect(ran).toBe(false);
    expect(readFileSync(lock, 'utf8')).toBe(held);
  });

  it('runs the work of two waiters on one key one after the other', async () => {
    const store = new FileTokenStore({ path });
    const order: string[] = [];
    let release: () => void = () => undefined;
    let entered: () => void = () => undefined;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const first = store.withLock(KEY, async () => {
      order.push('first in');
      const held = new Promise<void>((resolve) => (release = resolve));
      entered();
      await held;
      order.push('first out');
    });
    await inside;
    // The second waits on the first's lock file until the first's work ends.
    const second = store.withLock(KEY, async () => {
      order.push('second');
    });
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'first out', 'second']);
  });

  it('reports a lock held past lockTimeoutMs as AUTH_FAILED (reason store) naming the lock file', async () => {
    const store = new FileTokenStore({ path, lockTimeoutMs: 20 });
    let release: () => void = () => undefined;
    let entered: () => void = () => undefined;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const holder = store.withLock(KEY, () => {
      entered();
      return new Promise<void>((resolve) => (release = resolve));
    });
    // The holder has the lock before the second waiter starts (both race for it otherwise).
    await inside;
    const error = await store.withLock(KEY, async () => 'never').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'AUTH_FAILED', detail: { reason: 'store', path } });
    expect((error as Error).message).toMatch(/\.lock stayed held/);
    release();
    await holder;
  });

  it.each([
    ['an unknown option', { path: 'tokens.json', dir: '/tmp' }, 'dir'],
    ['no path', {}, 'path'],
    ['an empty path', { path: '' }, 'path'],
    ['a fractional lockTimeoutMs', { path: 'tokens.json', lockTimeoutMs: 1.5 }, 'lockTimeoutMs'],
    ['a zero staleLockMs', { path: 'tokens.json', staleLockMs: 0 }, 'staleLockMs'],
  ])('refuses %s with INVALID_OPTIONS naming it', (_name, options, option) => {
    let error: unknown;
    try {
      new FileTokenStore(options as unknown as FileTokenStoreOptions);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'INVALID_OPTIONS', detail: { option } });
  });
});
