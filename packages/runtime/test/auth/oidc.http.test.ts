/**
 * OAuth 2.1 end to end (issue 18): the runtime against a real authorization server (oidc-provider)
 * in front of a protected MCP server over Streamable HTTP, both on loopback. Nothing is mocked: the
 * authorization code flow runs through the `authorize` hook (the testkit's scripted browser), tokens
 * are real JWTs the MCP server verifies, and every secret of the run is grepped for afterwards.
 */
import { mkdtempSync } from 'node:fs';
import { readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStepbindError } from '@stepbind/binding';
import { McpRuntime, type McpRuntimeOptions } from '@stepbind/runtime';
import {
  startAuthorizationServer,
  startProtectedMcpServer,
  tempDir,
  type AuthorizationServer,
  type ProtectedMcpServer,
  type ProtectedMcpServerOptions,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { FileTokenStore } from '../../src/auth/file-token-store.js';
import { MemoryTokenStore } from '../../src/auth/memory-token-store.js';
import type {
  AuthorizeHook,
  AuthorizeRequest,
  OAuthConfig,
  StoredLogin,
  TokenKey,
} from '../../src/auth/types.js';
import { eventLog, type EventLog } from '../support/events.js';

/** A memory store that remembers every token written to it, for the secrets grep. */
class RecordingStore extends MemoryTokenStore {
  readonly secrets = new Set<string>();
  override put(
    key: TokenKey,
    login: Omit<StoredLogin, 'version' | 'updatedAt'>,
  ): Promise<StoredLogin> {
    this.secrets.add(login.tokens.accessToken);
    if (login.tokens.refreshToken !== undefined) this.secrets.add(login.tokens.refreshToken);
    if (login.tokens.dpopKey !== undefined) {
      this.secrets.add(login.tokens.dpopKey);
      this.secrets.add(String((JSON.parse(login.tokens.dpopKey) as { d?: unknown }).d));
    }
    return super.put(key, login);
  }
}

/** The scripted browser as an `authorize` hook that counts and keeps what it was asked. */
function scriptedHook(as: AuthorizationServer): {
  readonly hook: AuthorizeHook;
  readonly requests: AuthorizeRequest[];
  readonly codes: string[];
} {
  const requests: AuthorizeRequest[] = [];
  const codes: string[] = [];
  const hook: AuthorizeHook = async (request) => {
    requests.push(request);
    const callback = await as.interact(request.authorizationUrl);
    const code = new URL(callback).searchParams.get('code');
    if (code !== null) codes.push(code);
    return callback;
  };
  return { hook, requests, codes };
}

interface Harness {
  readonly as: AuthorizationServer;
  readonly mcp: ProtectedMcpServer;
}
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function harness(
  mcpOptions: Omit<ProtectedMcpServerOptions, 'authorizationServer'> = {},
): Promise<Harness> {
  const as = await startAuthorizationServer();
  cleanups.push(() => as.close());
  const mcp = await startProtectedMcpServer({ authorizationServer: as, ...mcpOptions });
  cleanups.push(() => mcp.close());
  return { as, mcp };
}

async function open(
  h: Harness,
  auth: OAuthConfig,
  options: McpRuntimeOptions,
  server: Record<string, unknown> = {},
): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    { mcpServers: { remote: { type: 'http', url: h.mcp.url, approval: 'none', auth, ...server } } },
    { approval: 'none', ...options },
  );
  cleanups.push(() => runtime.close());
  return runtime;
}

/** Calls `remote__<tool>` in a fresh step and returns its first text. */
async function call(runtime: McpRuntime, tool: string): Promise<string> {
  await using step = await runtime.captureBinding();
  const { result } = await step.prepareCall(`remote__${tool}`).run({});
  const [first] = result.content as { type: string; text?: string }[];
  return first?.text ?? '';
}

async function whoami(runtime: McpRuntime): Promise<Record<string, unknown>> {
  return JSON.parse(await call(runtime, 'whoami')) as Record<string, unknown>;
}

/** The server's entry in `status()`. */
function remoteStatus(runtime: McpRuntime): { generation?: number; revision?: number } {
  const entry = runtime.status().servers.find((s) => s.name === 'remote');
  if (entry === undefined) throw new Error('no status for remote');
  return { generation: entry.generation, revision: entry.revision };
}

/** The first error with `code` in `value`, its causes, details and lists (a failure list). */
function findCode(value: unknown, code: string, depth = 0): Record<string, unknown> | undefined {
  if (depth > 8 || typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  if (record['code'] === code) return record;
  for (const next of [
    record['cause'],
    record['detail'],
    record['error'],
    ...(Array.isArray(value) ? value : []),
    ...Object.values(record).filter((v) => typeof v === 'object'),
  ]) {
    const found = findCode(next, code, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Everything an error carries that could be shown: message, detail, stack, every cause. */
function dump(value: unknown, depth = 0): string {
  if (depth > 8) return '';
  if (value instanceof Error) {
    const { detail, cause } = value as { detail?: unknown; cause?: unknown };
    return [value.name, value.message, value.stack ?? '', JSON.stringify(detail ?? null)]
      .concat(dump(cause, depth + 1))
      .join('\n');
  }
  return JSON.stringify(value) ?? String(value);
}

function publicClient(h: Harness): OAuthConfig {
  return { type: 'oauth', clientId: h.as.clients.public.clientId };
}

describe('OAuth 2.1 end to end against oidc-provider (authorization code flow)', () => {
  it('logs in through the authorize hook with PKCE and the resource indicator, then calls as the user', async () => {
    const h = await harness();
    const store = new RecordingStore();
    const { hook, requests } = scriptedHook(h.as);
    const runtime = await open(h, publicClient(h), { authorize: hook, tokenStore: store });

    expect(await whoami(runtime)).toMatchObject({ sub: 'alice' });
    expect(requests).toHaveLength(1);
    const url = requests[0]?.authorizationUrl;
    expect(url?.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url?.searchParams.get('resource')).toBe(h.mcp.resource);
    // Scope by the challenge first: the 401 said mcp:read.
    expect(url?.searchParams.get('scope')?.split(' ')).toContain('mcp:read');
    expect(requests[0]?.server).toBe('remote');
    expect(h.as.counts.grants['authorization_code']).toBe(1);
    const [login] = await store.list();
    expect(login?.key).toMatchObject({ issuer: h.as.issuer, resource: h.mcp.resource });
    // issuer + subject, or issuer + client id when the login yields no subject (no id token).
    expect(login?.principal.startsWith(`${h.as.issuer} `)).toBe(true);
    expect(login?.principal).not.toContain('eyJ');
    expect(login?.hasRefreshToken).toBe(true);
  });

  it('hands a DPoP-bound login and its key to another runtime sharing the token file: no new login, refreshed with the stored key', async () => {
    const h = await harness();
    const dir = mkdtempSync(join(tmpdir(), 'stepbind-oidc-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'tokens.json');
    const { hook, requests } = scriptedHook(h.as);
    const first = await open(h, publicClient(h), {
      authorize: hook,
      tokenStore: new FileTokenStore({ path }),
    });
    expect(await whoami(first)).toMatchObject({ sub: 'alice', dpop: true });
    await first.close();

    const second = await open(h, publicClient(h), { tokenStore: new FileTokenStore({ path }) });
    expect(await whoami(second)).toMatchObject({ sub: 'alice', dpop: true });
    h.mcp.expireTokens();
    expect(await whoami(second)).toMatchObject({ sub: 'alice', dpop: true });
    expect(requests).toHaveLength(1);
    expect(h.as.counts.refreshes).toBe(1);
    expect(h.as.counts.refusals['refresh_token'] ?? 0).toBe(0);
    const text = await readFile(path, 'utf8');
    expect(text).toContain('"dpopKey"');
  });

  it('registers itself dynamically when no client id is configured', async () => {
    const h = await harness();
    const { hook } = scriptedHook(h.as);
    const store = new MemoryTokenStore();
    const runtime = await open(h, { type: 'oauth' }, { authorize: hook, tokenStore: store });
    const me = await whoami(runtime);
    expect(me).toMatchObject({ sub: 'alice' });
    expect(me['client_id']).not.toBe(h.as.clients.public.clientId);
    expect(h.as.counts.registrations).toBe(1);
  });

  it.each([
    ['the challenge names the metadata', { metadataAt: 'path', challengeMetadata: true }],
    ['only the path-based well-known URL has it', { metadataAt: 'path', challengeMetadata: false }],
    ['only the root well-known URL has it', { metadataAt: 'root', challengeMetadata: false }],
  ] as const)('finds the protected resource metadata when %s', async (_name, options) => {
    const h = await harness(options);
    const { hook } = scriptedHook(h.as);
    const runtime = await open(h, publicClient(h), {
      authorize: hook,
      tokenStore: new MemoryTokenStore(),
    });
    expect(await whoami(runtime)).toMatchObject({ sub: 'alice' });
  });

  it('refreshes an expired token mid-run without reconnecting or changing the catalog', async () => {
    const h = await harness();
    const { hook, requests } = scriptedHook(h.as);
    const runtime = await open(h, publicClient(h), {
      authorize: hook,
      tokenStore: new MemoryTokenStore(),
    });
    await whoami(runtime);
    const initializes = h.mcp.counts.initializes;
    const before = remoteStatus(runtime);

    expect(h.mcp.expireTokens()).toBeGreaterThan(0);
    expect(await whoami(runtime)).toMatchObject({ sub: 'alice' });

    expect(h.as.counts.refreshes).toBe(1);
    expect(requests).toHaveLength(1);
    expect(h.mcp.counts.initializes).toBe(initializes);
    expect(remoteStatus(runtime)).toEqual(before);
  });

  it('logs in again through the hook when the refresh token was revoked', async () => {
    const h = await harness();
    const { hook, requests } = scriptedHook(h.as);
    const runtime = await open(h, publicClient(h), {
      authorize: hook,
      tokenStore: new MemoryTokenStore(),
    });
    await whoami(runtime);
    h.as.revokeRefreshTokens();
    h.mcp.expireTokens();

    expect(await whoami(runtime)).toMatchObject({ sub: 'alice' });
    expect(h.as.counts.refusals['refresh_token']).toBe(1);
    expect(requests).toHaveLength(2);
  });

  it('fails discovery AUTH_REQUIRED naming the server and the login command without tokens or a hook', async () => {
    const h = await harness();
    const error = await open(h, publicClient(h), { tokenStore: new MemoryTokenStore() }).catch(
      (e: unknown) => e,
    );
    expect(isStepbindError(error, 'REQUIRED_SERVERS_FAILED'), dump(error)).toBe(true);
    const required = findCode(error, 'AUTH_REQUIRED');
    expect(required, dump(error)).toMatchObject({ server: 'remote' });
    expect(String(required?.['message'])).toContain('stepbind login remote');
    expect(h.as.counts.authorizations).toBe(0);
  });

  it('fails a call AUTH_REQUIRED with typed detail once the login is gone and there is no hook', async () => {
    const h = await harness();
    const store = new MemoryTokenStore();
    const { hook } = scriptedHook(h.as);
    await (await open(h, publicClient(h), { authorize: hook, tokenStore: store })).close();
    const runtime = await open(h, publicClient(h), { tokenStore: store });
    expect(await whoami(runtime)).toMatchObject({ sub: 'alice' });
    h.as.revokeRefreshTokens();
    h.mcp.expireTokens();

    const error = await whoami(runtime).catch((e: unknown) => e);
    expect(isStepbindError(error, 'AUTH_REQUIRED'), dump(error)).toBe(true);
    const { detail, message } = error as { detail: Record<string, unknown>; message: string };
    expect(detail).toMatchObject({ server: 'remote', resource: h.mcp.resource });
    expect(String(detail['command'])).toMatch(/^stepbind login remote\b/);
    expect(message).toContain('remote');
    // Refused by the server, never processed.
    expect(h.mcp.counts.calls['whoami']).toBe(1);
  });

  it('steps up on 403 insufficient_scope with the union of scopes', async () => {
    const h = await harness();
    const { hook, requests } = scriptedHook(h.as);
    const runtime = await open(h, publicClient(h), {
      authorize: hook,
      tokenStore: new MemoryTokenStore(),
    });
    await whoami(runtime);

    expect(await call(runtime, 'admin')).toBe('ok');
    expect(requests).toHaveLength(2);
    const scopes = requests[1]?.authorizationUrl.searchParams.get('scope')?.split(' ') ?? [];
    expect(scopes).toEqual(expect.arrayContaining(['mcp:read', 'mcp:admin']));
    expect(JSON.parse(await call(runtime, 'whoami'))).toMatchObject({
      scope: expect.stringContaining('mcp:admin'),
    });
  });

  it('gives up stepping up after its retry limit with AUTH_FAILED insufficient-scope', async () => {
    // The tool needs a scope the authorization server never grants.
    const h = await harness({ toolScopes: { admin: ['mcp:root'] } });
    const { hook, requests } = scriptedHook(h.as);
    const runtime = await open(h, publicClient(h), {
      authorize: hook,
      tokenStore: new MemoryTokenStore(),
    });
    const error = await call(runtime, 'admin').catch((e: unknown) => e);
    const failed = findCode(error, 'AUTH_FAILED');
    expect(failed, dump(error)).toBeDefined();
    expect(failed?.['detail']).toMatchObject({ server: 'remote', reason: 'insufficient-scope' });
    // Bounded: a few logins, not a loop.
    expect(requests.length).toBeLessThanOrEqual(4);
    expect(h.mcp.counts.calls['admin']).toBeUndefined();
  });
});

describe('OAuth 2.1 end to end against oidc-provider (headless clients)', () => {
  it.each(['secretBasic', 'secretPost'] as const)(
    'logs in with client credentials (%s) without a hook',
    async (which) => {
      const h = await harness();
      const { clientId, clientSecret } = h.as.clients[which];
      const runtime = await open(
        h,
        { type: 'oauth', grant: 'client_credentials', clientId, clientSecret },
        { tokenStore: new MemoryTokenStore() },
      );
      expect(await whoami(runtime)).toMatchObject({ client_id: clientId });
      expect(h.as.counts.grants['client_credentials']).toBe(1);
    },
  );

  it('logs in with client credentials and private_key_jwt', async () => {
    const h = await harness();
    const { clientId, privateKey } = h.as.clients.privateKeyJwt;
    const runtime = await open(
      h,
      { type: 'oauth', grant: 'client_credentials', clientId, privateKey },
      { tokenStore: new MemoryTokenStore() },
    );
    expect(await whoami(runtime)).toMatchObject({ client_id: clientId });
  });

  it('binds tokens to a DPoP key when the resource requires it', async () => {
    const h = await harness({ dpopRequired: true });
    const { clientId, clientSecret } = h.as.clients.secretBasic;
    const runtime = await open(
      h,
      { type: 'oauth', grant: 'client_credentials', clientId, clientSecret },
      { tokenStore: new MemoryTokenStore() },
    );
    expect(await whoami(runtime)).toMatchObject({ client_id: clientId, dpop: true });
  });

  it('fails AUTH_FAILED unreachable while the authorization server is down, and recovers', async () => {
    const h = await harness();
    const { clientId, clientSecret } = h.as.clients.secretBasic;
    const runtime = await open(
      h,
      { type: 'oauth', grant: 'client_credentials', clientId, clientSecret },
      { tokenStore: new MemoryTokenStore() },
    );
    await whoami(runtime);
    await h.as.stop();
    h.mcp.expireTokens();

    const error = await whoami(runtime).catch((e: unknown) => e);
    expect(isStepbindError(error), dump(error)).toBe(true);
    const failed = findCode(error, 'AUTH_FAILED');
    expect(failed, dump(error)).toBeDefined();
    expect(failed?.['detail']).toMatchObject({ server: 'remote', reason: 'unreachable' });

    await h.as.start();
    expect(await whoami(runtime)).toMatchObject({ client_id: clientId });
  });

  it('fails AUTH_FAILED with the server error code when the client secret is wrong', async () => {
    const h = await harness();
    const runtime = await open(
      h,
      {
        type: 'oauth',
        grant: 'client_credentials',
        clientId: h.as.clients.secretBasic.clientId,
        clientSecret: 'not-the-secret',
      },
      { tokenStore: new MemoryTokenStore() },
      { required: false },
    );
    const error = await whoami(runtime).catch((e: unknown) => e);
    const failed = findCode(error, 'AUTH_FAILED') ?? findCode(runtime.status(), 'AUTH_FAILED');
    expect(failed, dump(error)).toBeDefined();
  });
});

describe('OAuth secrets', () => {
  it('appear in no event, status, error, receipt, result or journal of a run', async () => {
    const h = await harness({ toolScopes: { admin: ['mcp:root'] } });
    await using dir = tempDir('stepbind-oidc');
    const store = new RecordingStore();
    const { hook, codes } = scriptedHook(h.as);
    const log: EventLog = eventLog();
    const shown: string[] = [];
    const runtime = await open(h, publicClient(h), {
      authorize: hook,
      tokenStore: store,
      onEvent: log.onEvent,
      journal: { path: join(dir.path, 'journal.sqlite') },
    });
    // A login, a call, a refresh, a failed step-up, a revoked refresh and a second login.
    {
      await using step = await runtime.captureBinding();
      const { result, receipt } = await step.prepareCall('remote__whoami').run({});
      shown.push(JSON.stringify(result), JSON.stringify(receipt));
    }
    h.mcp.expireTokens();
    shown.push(await call(runtime, 'echo'));
    shown.push(dump(await call(runtime, 'admin').catch((e: unknown) => e)));
    h.as.revokeRefreshTokens();
    h.mcp.expireTokens();
    shown.push(JSON.stringify(await whoami(runtime)));
    shown.push(JSON.stringify(runtime.status()));
    await runtime.close();

    // A headless client whose secret the server refuses, and one the server accepts.
    const headless = await open(
      h,
      {
        type: 'oauth',
        grant: 'client_credentials',
        clientId: h.as.clients.privateKeyJwt.clientId,
        privateKey: h.as.clients.privateKeyJwt.privateKey,
      },
      { tokenStore: store, onEvent: log.onEvent },
    );
    shown.push(JSON.stringify(await whoami(headless)));
    await headless.close();
    shown.push(
      dump(
        await open(
          h,
          {
            type: 'oauth',
            grant: 'client_credentials',
            clientId: h.as.clients.secretBasic.clientId,
            clientSecret: `${h.as.clients.secretPost.clientSecret}`,
          },
          { tokenStore: store },
        )
          .then((r) => whoami(r))
          .catch((e: unknown) => e),
      ),
    );
    for (const event of log.events) shown.push(dump(event));
    for (const file of await readdir(dir.path)) {
      shown.push((await readFile(join(dir.path, file))).toString('latin1'));
    }

    const secrets = [
      ...store.secrets,
      ...codes,
      h.as.clients.privateKeyJwt.privateKey,
      h.as.clients.secretPost.clientSecret,
    ];
    expect(store.secrets.size).toBeGreaterThanOrEqual(6);
    expect(codes.length).toBeGreaterThanOrEqual(2);
    const text = shown.join('\n');
    expect(text.length).toBeGreaterThan(1000);
    for (const secret of secrets) expect(text.includes(secret), 'a secret was shown').toBe(false);
  });
});
