/**
 * The authorized fetch and discovery at their edges, against the tiny loopback authorization
 * server: what is refused as an authorization failure (not a network failure of the MCP server),
 * which discovered URLs are refused, and where no token goes.
 */
import { isStepbindError, type StepbindError } from '@stepbind/binding';
import { describe, expect, it } from 'vitest';

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

function authorized(
  tiny: TinyOAuth,
  config: Partial<OAuthConfig> = {},
  extra: Partial<ServerAuthOptions> = {},
): typeof fetch {
  const auth = createServerAuth({
    server: 'tiny',
    url: tiny.mcpUrl,
    config: { type: 'oauth', ...config },
    store: new MemoryTokenStore(),
    learnSecret: () => undefined,
    ...extra,
  });
  return auth.wrap(fetch);
}

async function post(f: typeof fetch, url: string): Promise<Response> {
  const response = await f(url, { method: 'POST', body: '{}' });
  await response.body?.cancel();
  return response;
}

/** The rejection of `promise`, which must be a StepbindError. */
async function refusal(promise: Promise<unknown>): Promise<StepbindError> {
  const error: unknown = await promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  if (!isStepbindError(error)) throw error;
  return error;
}

const shown = (error: StepbindError): string => `${error.message} ${JSON.stringify(error.detail)}`;

describe('authorized fetch: authorizer failures are AUTH_FAILED', () => {
  it('turns a hook that rejects with a plain Error into AUTH_FAILED (reason authorization)', async () => {
    await using tiny = await startTinyOAuth();
    const f = authorized(tiny, {}, { authorize: () => Promise.reject(new Error('user closed')) });

    const error = await refusal(post(f, tiny.mcpUrl));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.detail).toMatchObject({ server: 'tiny', reason: 'authorization' });
    expect(error.message).toContain('user closed');
  });

  it('refuses a callback that is not a URL without quoting it', async () => {
    await using tiny = await startTinyOAuth();
    const f = authorized(tiny, {}, { authorize: () => Promise.resolve('code=secret-code-42') });

    const error = await refusal(post(f, tiny.mcpUrl));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.message).toContain('not a URL');
    expect(shown(error)).not.toContain('secret-code-42');
    expect(tiny.log.tokenRequests).toEqual([]);
  });

  it('says a JWK private key is not valid JSON without quoting the key', async () => {
    await using tiny = await startTinyOAuth();
    const f = authorized(
      tiny,
      { clientId: 'jwt-client', privateKey: '{"kty":"EC","d":"secret-d-value' },
      { authorize: browser() },
    );

    const error = await refusal(post(f, tiny.mcpUrl));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.message).toContain('not valid JSON');
    expect(shown(error)).not.toContain('secret-d-value');
  });
});

describe('discovery refuses what a network attacker could change', () => {
  it('refuses a plain-http resource_metadata URL off loopback, sending nothing to it', async () => {
    await using tiny = await startTinyOAuth({
      challengeMetadata: 'http://metadata.example/.well-known/oauth-protected-resource?k=v',
    });
    const calls: URL[] = [];
    const f = authorized(tiny, {}, { authorize: browser(calls) });

    const error = await refusal(post(f, tiny.mcpUrl));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.detail['reason']).toBe('metadata');
    expect(error.message).toContain('http://metadata.example/.well-known/oauth-protected-resource');
    expect(error.message).not.toContain('k=v');
    expect(calls).toEqual([]);
  });

  it('refuses a plain-http issuer off loopback', async () => {
    await using tiny = await startTinyOAuth({ authorizationServers: ['http://as.example'] });
    const f = authorized(tiny, {}, { authorize: browser() });

    const error = await refusal(post(f, tiny.mcpUrl));

    expect(error.detail['reason']).toBe('metadata');
    expect(error.message).toContain('http://as.example');
  });

  it('refuses a plain-http authorization_endpoint off loopback before the user is sent there', async () => {
    await using tiny = await startTinyOAuth({
      authorizationEndpoint: 'http://login.example/authorize',
    });
    const calls: URL[] = [];
    const f = authorized(tiny, {}, { authorize: browser(calls) });

    const error = await refusal(post(f, tiny.mcpUrl));

    expect(error.detail['reason']).toBe('metadata');
    expect(error.message).toContain('authorization_endpoint');
    expect(calls).toEqual([]);
  });

  it('does not follow a redirect of a metadata request', async () => {
    await using tiny = await startTinyOAuth({ pathMetadata: 'redirect' });
    const calls: URL[] = [];
    const f = authorized(tiny, {}, { authorize: browser(calls) });

    const error = await refusal(post(f, tiny.mcpUrl));

    expect(error.code).toBe('AUTH_FAILED');
    expect(calls).toEqual([]);
  });

  it('tries the root resource metadata URL after a 5xx at the path-based one', async () => {
    await using tiny = await startTinyOAuth({ pathMetadata: 503 });
    const f = authorized(tiny, {}, { authorize: browser() });

    const response = await post(f, tiny.mcpUrl);

    expect(response.status).toBe(200);
  });
});

describe('authorized fetch: where the token goes', () => {
  it('sends no token to a URL outside the resource (another origin)', async () => {
    await using tiny = await startTinyOAuth();
    const f = authorized(tiny, {}, { authorize: browser() });
    expect((await post(f, tiny.mcpUrl)).status).toBe(200);

    const elsewhere = tiny.mcpUrl.replace('127.0.0.1', 'localhost');
    const response = await post(f, elsewhere);

    expect(response.status).toBe(401);
    expect(tiny.log.resourceAuth.at(-1)).toBe('');
  });

  it('refuses a Request object as input', async () => {
    await using tiny = await startTinyOAuth();
    const f = authorized(tiny, {}, { authorize: browser() });

    const error = await refusal(f(new Request(tiny.mcpUrl, { method: 'POST', body: '{}' })));

    expect(error.code).toBe('AUTH_FAILED');
    expect(error.detail['reason']).toBe('config');
    expect(tiny.log.resourceAuth).toEqual([]);
  });

  it('does not replay a body it cannot send twice (an async iterable) after a 401', async () => {
    await using tiny = await startTinyOAuth();
    const calls: URL[] = [];
    const f = authorized(tiny, {}, { authorize: browser(calls) });
    async function* chunks(): AsyncGenerator<Uint8Array> {
      yield new TextEncoder().encode('{}');
    }

    // No login yet: the request goes out without a token, and its 401 is the answer.
    const init = { method: 'POST', body: chunks(), duplex: 'half' } as unknown as RequestInit;
    const response = await f(tiny.mcpUrl, init);
    await response.body?.cancel();

    expect(response.status).toBe(401);
    expect(calls).toEqual([]);
    expect(tiny.log.resourceAuth).toEqual(['']);
  });
});
