import { isStepbindError, type StepbindError } from '@stepbind/binding';
import { describe, expect, it } from 'vitest';

import { MAX_STEP_UPS } from '../../src/auth/authorized-fetch.js';
import { MemoryTokenStore } from '../../src/auth/memory-token-store.js';
import { createServerAuth, type ServerAuthOptions } from '../../src/auth/server-auth.js';
import type { AuthorizeHook, OAuthConfig } from '../../src/auth/types.js';
import { startTinyOAuth, type TinyOAuth } from './tiny-oauth.js';

/** A browser that follows the authorization URL and hands back the redirect. */
function browser(calls: URL[] = []): AuthorizeHook {
  return async ({ authorizationUrl }) => {
    calls.push(authorizationUrl);
    const response = await fetch(authorizationUrl, { redirect: 'manual' });
    await response.body?.cancel();
    return response.headers.get('location') ?? '';
  };
}

interface Harness {
  readonly secrets: string[];
  readonly store: MemoryTokenStore;
  readonly fetch: typeof fetch;
  readonly auth: ReturnType<typeof createServerAuth>;
}

function harness(
  tiny: TinyOAuth,
  config: Partial<OAuthConfig> = {},
  extra: Partial<ServerAuthOptions> = {},
): Harness {
  const secrets: string[] = [];
  const store = new MemoryTokenStore();
  const auth = createServerAuth({
    server: 'tiny',
    url: tiny.mcpUrl,
    config: { type: 'oauth', ...config },
    store,
    learnSecret: (s) => secrets.push(s),
    ...extra,
  });
  return { secrets, store, auth, fetch: auth.wrap(fetch) };
}

async function call(h: Harness, tiny: TinyOAuth): Promise<Response> {
  const response = await h.fetch(tiny.mcpUrl, { method: 'POST', body: '{}' });
  await response.body?.cancel();
  return response;
}

async function refusal(promise: Promise<unknown>): Promise<StepbindError> {
  const error: unknown = await promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  if (!isStepbindError(error)) throw error;
  return error;
}

/** Everything an error shows: message and detail. */
const shown = (error: StepbindError): string => `${error.message} ${JSON.stringify(error.detail)}`;

describe('OAuth flows against a real loopback authorization server', () => {
  it('logs in through the hook with PKCE S256 and the resource indicator, then sends the token', async () => {
    await using tiny = await startTinyOAuth();
    const calls: URL[] = [];
    const h = harness(tiny, {}, { authorize: browser(calls) });

    const response = await call(h, tiny);

    expect(response.status).toBe(200);
    expect(calls).toHaveLength(1);
    const authorization = tiny.log.authorizations[0]!;
    expect(authorization.get('code_challenge_method')).toBe('S256');
    expect(authorization.get('resource')).toBe(tiny.mcpUrl);
    expect(authorization.get('scope')).toBe('mcp:read');
    expect(tiny.log.tokenRequests[0]!.get('resource')).toBe(tiny.mcpUrl);
    expect(tiny.log.resourceAuth.at(-1)).toMatch(/^Bearer at-/);
    // No subject from the server: a user login gets its own principal (DESIGN §16).
    expect(h.auth.principal()).toMatch(/^http:\/\/127\.0\.0\.1:\d+ login:/);
    expect((await h.store.list()).map((s) => s.key)).toEqual([
      { issuer: tiny.origin, resource: tiny.mcpUrl, clientId: 'tiny-client' },
    ]);
  });

  it('refuses authorization server metadata whose issuer is not the one asked about', async () => {
    await using tiny = await startTinyOAuth({ metadataIssuer: 'http://127.0.0.1:1/elsewhere' });
    const calls: URL[] = [];
    const h = harness(tiny, {}, { authorize: browser(calls) });

    const error = await refusal(call(h, tiny));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.detail['reason']).toBe('issuer-mismatch');
    expect(calls).toEqual([]);
  });

  it('refuses an authorization server that does not advertise PKCE S256', async () => {
    await using tiny = await startTinyOAuth({ codeChallengeMethods: ['plain'] });
    const calls: URL[] = [];
    const h = harness(tiny, {}, { authorize: browser(calls) });

    const error = await refusal(call(h, tiny));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.detail['reason']).toBe('pkce');
    expect(calls).toEqual([]);
    expect(tiny.log.tokenRequests).toEqual([]);
  });

  it('steps up with the union of scopes at most MAX_STEP_UPS times, then fails AUTH_FAILED', async () => {
    await using tiny = await startTinyOAuth({ alwaysInsufficientScope: true });
    const calls: URL[] = [];
    const h = harness(tiny, {}, { authorize: browser(calls) });

    const error = await refusal(call(h, tiny));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.detail['reason']).toBe('insufficient-scope');
    expect(error.detail['oauthError']).toBe('insufficient_scope');
    expect(calls).toHaveLength(1 + MAX_STEP_UPS);
    const scopes = tiny.log.authorizations.map((a) => a.get('scope'));
    expect(scopes[1]).toBe('mcp:read mcp:admin');
  });

  it('fails AUTH_REQUIRED naming the server, its config path and the login command without a hook', async () => {
    await using tiny = await startTinyOAuth();
    const h = harness(tiny, {}, { loginCommand: 'stepbind login tiny --config mcp.json' });

    const error = await refusal(call(h, tiny));

    expect(error.code).toBe('AUTH_REQUIRED');
    expect(error.detail).toMatchObject({
      server: 'tiny',
      command: 'stepbind login tiny --config mcp.json',
      issuer: tiny.origin,
      resource: tiny.mcpUrl,
    });
    expect(error.message).toContain('"tiny"');
    expect(error.message).toContain('$.mcpServers.tiny.auth');
    expect(error.message).toContain('stepbind login tiny --config mcp.json');
    expect(tiny.log.tokenRequests).toEqual([]);
  });

  it('refreshes a token that expires within the margin before sending it, without a 401', async () => {
    // 30 s of life: the margin is half of it (15 s). 16 s later the next request refreshes first.
    await using tiny = await startTinyOAuth({ expiresIn: 30 });
    let skewMs = 0;
    const h = harness(tiny, {}, { authorize: browser(), now: () => Date.now() + skewMs });
    await call(h, tiny);
    await call(h, tiny);
    expect(tiny.log.tokenRequests.map((t) => t.get('grant_type'))).toEqual(['authorization_code']);
    const firstToken = tiny.log.resourceAuth.at(-1);
    const requestsBefore = tiny.log.resourceAuth.length;
    skewMs = 16_000;

    const response = await call(h, tiny);

    expect(response.status).toBe(200);
    const grants = tiny.log.tokenRequests.map((t) => t.get('grant_type'));
    expect(grants).toEqual(['authorization_code', 'refresh_token']);
    expect(tiny.log.tokenRequests[1]!.get('resource')).toBe(tiny.mcpUrl);
    expect(tiny.log.resourceAuth.length).toBe(requestsBefore + 1);
    expect(tiny.log.resourceAuth.at(-1)).not.toBe(firstToken);
    expect((await h.store.list())[0]?.hasRefreshToken).toBe(true);
  });

  it('puts no code, verifier, token or client secret in the error of a refused exchange', async () => {
    await using tiny = await startTinyOAuth({ refuseCode: 'invalid_grant' });
    const h = harness(
      tiny,
      { clientId: 'pre-registered', clientSecret: 'tiny-secret-value-123' },
      { authorize: browser() },
    );

    const error = await refusal(call(h, tiny));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.detail['oauthError']).toBe('invalid_grant');
    const code = tiny.log.tokenRequests[0]!.get('code')!;
    const verifier = tiny.log.tokenRequests[0]!.get('code_verifier')!;
    expect(h.secrets).toEqual(expect.arrayContaining(['tiny-secret-value-123', code, verifier]));
    for (const secret of [...h.secrets, ...tiny.log.issued]) {
      expect(shown(error)).not.toContain(secret);
    }
  });

  it('login() logs in again whatever is stored, and logout() forgets the login', async () => {
    await using tiny = await startTinyOAuth();
    const calls: URL[] = [];
    const h = harness(tiny, {}, { authorize: browser(calls) });
    await call(h, tiny);

    const status = await h.auth.login();
    await h.auth.logout();

    expect(calls).toHaveLength(2);
    expect(status).toMatchObject({ server: 'tiny', state: 'logged-in', issuer: tiny.origin });
    expect(await h.store.list()).toEqual([]);
    expect((await h.auth.status()).state).toBe('logged-out');
  });
});
