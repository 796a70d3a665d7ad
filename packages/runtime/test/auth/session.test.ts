/**
 * OAuthSession against the tiny loopback authorization server: which server a refresh token goes
 * to, logout, the races of logout with a login or the first read, the shared login's signals and
 * the refresh margin of short-lived tokens.
 */
import { isStepbindError, type StepbindError } from '@stepbind/binding';
import { describe, expect, it } from 'vitest';

import { MemoryTokenStore } from '../../src/auth/memory-token-store.js';
import { OAuthSession } from '../../src/auth/session.js';
import {
  DEFAULT_REDIRECT_URI,
  type AuthorizeHook,
  type StoredLogin,
  type TokenKey,
  type TokenStore,
} from '../../src/auth/types.js';
import { startTinyOAuth, type TinyOAuth } from './tiny-oauth.js';

/** A browser that follows the authorization URL and hands back the redirect. */
async function follow(authorizationUrl: URL): Promise<string> {
  const response = await fetch(authorizationUrl, { redirect: 'manual' });
  await response.body?.cancel();
  return response.headers.get('location') ?? '';
}

const browser: AuthorizeHook = async ({ authorizationUrl }) => await follow(authorizationUrl);

/** A browser the test lets through: `entered` resolves when the hook runs, `release()` goes on. */
function gatedBrowser(): {
  hook: AuthorizeHook;
  entered: Promise<AbortSignal>;
  release: () => void;
} {
  let enter!: (signal: AbortSignal) => void;
  let release!: () => void;
  const entered = new Promise<AbortSignal>((resolve) => (enter = resolve));
  const gate = new Promise<void>((resolve) => (release = resolve));
  const hook: AuthorizeHook = async ({ authorizationUrl, signal }) => {
    enter(signal);
    await Promise.race([
      gate,
      new Promise((_, reject) =>
        signal.addEventListener('abort', () =>
          reject(signal.reason instanceof Error ? signal.reason : new Error('aborted')),
        ),
      ),
    ]);
    return await follow(authorizationUrl);
  };
  return { hook, entered, release };
}

/** A store whose next `get` (once `hold` is set) answers only when released. */
class HeldFirstGet extends MemoryTokenStore {
  hold = false;
  #enter!: () => void;
  #gate: Promise<void>;
  release!: () => void;
  readonly entered = new Promise<void>((resolve) => (this.#enter = resolve));

  constructor() {
    super();
    this.#gate = new Promise<void>((resolve) => (this.release = resolve));
  }

  override async get(key: TokenKey): Promise<StoredLogin | undefined> {
    const login = await super.get(key);
    if (!this.hold) return login;
    this.hold = false;
    this.#enter();
    await this.#gate;
    return login;
  }
}

function session(
  tiny: TinyOAuth,
  store: TokenStore,
  authorize: AuthorizeHook | undefined = browser,
  scopes?: readonly string[],
): OAuthSession {
  return new OAuthSession({
    server: 'tiny',
    url: tiny.mcpUrl,
    config: { type: 'oauth', ...(scopes === undefined ? {} : { scopes }) },
    store,
    redirectUri: DEFAULT_REDIRECT_URI,
    learnSecret: () => undefined,
    command: 'stepbind login tiny --config mcp.json',
    fetch,
    ...(authorize === undefined ? {} : { authorize }),
  });
}

async function refusal(promise: Promise<unknown>): Promise<StepbindError> {
  const error: unknown = await promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  if (!isStepbindError(error)) throw error;
  return error;
}

const refreshGrants = (tiny: TinyOAuth): string[] =>
  tiny.log.tokenRequests
    .filter((r) => r.get('grant_type') === 'refresh_token')
    .map((r) => r.get('refresh_token') ?? '');

describe('OAuthSession', () => {
  it("never sends a stored login's refresh token to another authorization server", async () => {
    await using tiny = await startTinyOAuth();
    const store = new MemoryTokenStore();
    // A login of another issuer for the same resource and client id, about to expire.
    await store.put(
      { issuer: 'http://127.0.0.1:1', resource: tiny.mcpUrl, clientId: 'tiny-client' },
      {
        tokens: {
          accessToken: 'at-foreign',
          tokenType: 'Bearer',
          refreshToken: 'rt-foreign',
          expiresAt: Date.now() + 1000,
        },
        principal: 'http://127.0.0.1:1 someone',
      },
    );
    const s = session(tiny, store);

    const login = await s.token(undefined);

    expect(login?.login.tokens.accessToken).toBe('at-foreign');
    expect(refreshGrants(tiny)).not.toContain('rt-foreign');
  });

  it('logout in a fresh process removes every stored login of the resource', async () => {
    await using tiny = await startTinyOAuth();
    const store = new MemoryTokenStore();
    await session(tiny, store).login(undefined);
    await store.put(
      { issuer: 'http://127.0.0.1:1', resource: tiny.mcpUrl, clientId: 'other' },
      { tokens: { accessToken: 'at-old', tokenType: 'Bearer' }, principal: 'x y' },
    );
    expect(await store.list()).toHaveLength(2);

    await session(tiny, store).logout(undefined);

    expect(await store.list()).toEqual([]);
  });

  it('a logout during the first read of the store is not undone by that read', async () => {
    await using tiny = await startTinyOAuth();
    const store = new HeldFirstGet();
    await session(tiny, store).login(undefined);
    const s = session(tiny, store);
    store.hold = true;
    const first = s.token(undefined);
    await store.entered;

    await s.logout(undefined);
    store.release();
    await first;

    expect(await s.token(undefined)).toBeUndefined();
    expect(await store.list()).toEqual([]);
  });

  it('a login that finishes after a logout is neither stored nor used', async () => {
    await using tiny = await startTinyOAuth();
    const store = new MemoryTokenStore();
    const gated = gatedBrowser();
    const s = session(tiny, store, gated.hook);
    const login = s.login(undefined);
    await gated.entered;
    expect(s.busy).toBe(true);

    await s.logout(undefined);
    gated.release();

    expect((await refusal(login)).code).toBe('AUTH_REQUIRED');
    expect(await store.list()).toEqual([]);
    expect(await s.token(undefined)).toBeUndefined();
    expect(s.busy).toBe(false);
  });

  it("a waiter's signal ends only its own wait; the shared login goes on for the others", async () => {
    await using tiny = await startTinyOAuth();
    const store = new MemoryTokenStore();
    const gated = gatedBrowser();
    const s = session(tiny, store, gated.hook);
    const first = new AbortController();
    const leaving = s.login(first.signal);
    const hookSignal = await gated.entered;
    const staying = s.login(undefined);

    first.abort();
    expect((await refusal(leaving)).code).toBe('ABORTED');
    expect(hookSignal.aborted).toBe(false);
    gated.release();

    const login = await staying;
    expect(login.login.tokens.accessToken).toMatch(/^at-/);
    expect(tiny.log.authorizations).toHaveLength(1);
  });

  it('close() aborts the login in flight and later calls fail ABORTED', async () => {
    await using tiny = await startTinyOAuth();
    const gated = gatedBrowser();
    const s = session(tiny, new MemoryTokenStore(), gated.hook);
    const login = s.login(undefined);
    const hookSignal = await gated.entered;

    s.close();

    expect(hookSignal.aborted).toBe(true);
    expect((await refusal(login)).code).toBe('ABORTED');
    expect((await refusal(s.token(undefined))).code).toBe('ABORTED');
  });

  it('does not refresh a short-lived token on every request (margin: half its lifetime)', async () => {
    await using tiny = await startTinyOAuth({ expiresIn: 30 });
    const s = session(tiny, new MemoryTokenStore());
    const login = await s.login(undefined);

    expect(await s.token(undefined)).toEqual(login);
    expect(refreshGrants(tiny)).toEqual([]);
  });

  it('after a 401, adopts a login another process stored instead of logging in again', async () => {
    await using tiny = await startTinyOAuth();
    const store = new MemoryTokenStore();
    // A login without a refresh token: the 401 cannot refresh it.
    await store.put(
      { issuer: tiny.origin, resource: tiny.mcpUrl, clientId: 'tiny-client' },
      { tokens: { accessToken: 'at-dead', tokenType: 'Bearer' }, principal: 'p' },
    );
    const s = session(tiny, store);
    const refused = await s.token(undefined);
    const elsewhere = await session(tiny, store).login(undefined); // `stepbind login`

    const login = await s.recover({ dpop: false }, refused, undefined);

    expect(login.login.tokens.accessToken).toBe(elsewhere.login.tokens.accessToken);
    expect(tiny.log.authorizations).toHaveLength(1);
  });

  it('a step-up adopts a newer login that covers the challenged scopes', async () => {
    await using tiny = await startTinyOAuth();
    const store = new MemoryTokenStore();
    await store.put(
      { issuer: tiny.origin, resource: tiny.mcpUrl, clientId: 'tiny-client' },
      {
        tokens: { accessToken: 'at-read', tokenType: 'Bearer', scope: 'mcp:read' },
        principal: 'p',
      },
    );
    const s = session(tiny, store);
    const refused = await s.token(undefined);
    const wider = await session(tiny, store, browser, ['mcp:read', 'mcp:admin']).login(undefined);

    const login = await s.stepUp({ dpop: false, scopes: ['mcp:admin'] }, undefined, refused);

    expect(login.login.tokens.accessToken).toBe(wider.login.tokens.accessToken);
    expect(tiny.log.authorizations).toHaveLength(1);
  });
});
