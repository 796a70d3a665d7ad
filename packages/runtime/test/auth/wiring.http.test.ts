import { randomBytes } from 'node:crypto';
import { ErrorCode, isStepbindError, RuntimeError } from '@stepbind/binding';
import {
  DEFAULT_REDIRECT_URI,
  McpRuntime,
  MemoryTokenStore,
  parseConfig,
  type AuthStatus,
  type AuthorizeHook,
  type RuntimeEvent,
  type ServerAuthorizer,
} from '@stepbind/runtime';
import { SERVER_AUTH_FACTORY, type ServerAuthFactory } from '@stepbind/runtime/internal';
import { spawnHttpServer } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerAuthOptions } from '../../src/auth/server-auth.js';
import { legacyServer, modernServer, type AuthTestServer } from './wiring-servers.js';

const ISSUER = 'https://as.example';
const ALICE = `${ISSUER} alice`;

/**
 * A hand-written OAuth authorizer (our own interface, not the SDK): `wrap` adds the current
 * token, or throws AUTH_REQUIRED without one, as the real one does without a login or hook.
 */
class TestAuthorizer implements ServerAuthorizer {
  readonly server: string;
  readonly options: ServerAuthOptions;
  token: string | undefined;
  who: string = ALICE;

  constructor(options: ServerAuthOptions, token: string | undefined) {
    this.server = options.server;
    this.options = options;
    this.token = token;
    if (token !== undefined) options.learnSecret?.(token);
  }

  /** A refresh: a new access token for `who`, told to the redactor as the real one does. */
  refresh(token: string, who: string = this.who): void {
    this.options.learnSecret?.(token);
    this.token = token;
    this.who = who;
  }

  wrap(base: typeof fetch): typeof fetch {
    return async (input, init) => {
      const token = this.token;
      if (token === undefined) {
        throw new RuntimeError(
          ErrorCode.AUTH_REQUIRED,
          `Server "${this.server}" needs a login: run ${String(this.options.loginCommand)}.`,
          { detail: { server: this.server, command: this.options.loginCommand } },
        );
      }
      const headers = new Headers(init?.headers);
      headers.set('authorization', `Bearer ${token}`);
      return base(input, { ...init, headers });
    };
  }

  principal(): string | undefined {
    return this.token === undefined ? undefined : this.who;
  }

  login(): Promise<AuthStatus> {
    return this.status();
  }

  logout(): Promise<void> {
    this.token = undefined;
    return Promise.resolve();
  }

  status(): Promise<AuthStatus> {
    const principal = this.principal();
    return Promise.resolve(
      principal === undefined
        ? { server: this.server, state: 'logged-out' }
        : { server: this.server, state: 'logged-in', issuer: ISSUER, principal },
    );
  }
}

const secret = (): string => `at-${randomBytes(16).toString('hex')}`;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Everything an error or event carries that could be shown. */
function dump(value: unknown, depth = 0): string {
  if (depth > 8) return '';
  if (value instanceof Error) {
    const { detail } = value as { detail?: unknown };
    return [
      value.message,
      value.stack ?? '',
      JSON.stringify(detail ?? null),
      dump((value as { cause?: unknown }).cause, depth + 1),
    ].join('\n');
  }
  return JSON.stringify(value, (_k, v: unknown) => (v instanceof Error ? dump(v, depth + 1) : v));
}

interface Opened {
  readonly runtime: McpRuntime;
  readonly authorizers: TestAuthorizer[];
  readonly made: ServerAuthOptions[];
  readonly events: RuntimeEvent[];
}

async function open(
  server: AuthTestServer,
  protocol: string,
  token: string | undefined,
  more: {
    required?: boolean;
    authorize?: AuthorizeHook;
    tokenStore?: MemoryTokenStore;
    who?: string;
    onEvent?: (event: RuntimeEvent) => void;
  } = {},
): Promise<Opened> {
  const authorizers: TestAuthorizer[] = [];
  const made: ServerAuthOptions[] = [];
  const events: RuntimeEvent[] = [];
  const factory: ServerAuthFactory = (options) => {
    made.push(options);
    const authorizer = new TestAuthorizer(options, token);
    if (more.who !== undefined) authorizer.who = more.who;
    authorizers.push(authorizer);
    return authorizer;
  };
  const config = parseConfig({
    mcpServers: {
      web: {
        url: server.url,
        protocol,
        approval: 'none',
        required: more.required ?? true,
        auth: { type: 'oauth', clientId: 'stepbind-test', scopes: ['tools'] },
      },
    },
  });
  const runtime = await McpRuntime.open(config, {
    onEvent: (e) => {
      events.push(e);
      more.onEvent?.(e);
    },
    ...(more.authorize === undefined ? {} : { authorize: more.authorize }),
    // Never the per-user default store: a test leaves nothing behind.
    tokenStore: more.tokenStore ?? new MemoryTokenStore(),
    [SERVER_AUTH_FACTORY]: factory,
  } as Parameters<typeof McpRuntime.open>[1]);
  cleanups.push(() => runtime.close());
  return { runtime, authorizers, made, events };
}

const ERAS = {
  '2025-11-25': { start: legacyServer, protocol: '2025-11-25' },
  '2026-07-28': { start: modernServer, protocol: 'auto' },
} as const;

describe.each(Object.entries(ERAS))('OAuth wiring, %s era', (_era, { start, protocol }) => {
  it('fails discovery AUTH_REQUIRED naming the server and the login command; nothing reaches the server', async () => {
    const server = await start(() => true);
    cleanups.push(() => server.close());
    const error: unknown = await open(server, protocol, undefined).catch((e: unknown) => e);
    expect(isStepbindError(error, 'REQUIRED_SERVERS_FAILED')).toBe(true);
    const failure = (error as { detail: { failures: { code: string; message: string }[] } }).detail
      .failures[0];
    expect(failure).toMatchObject({ server: 'web', code: 'AUTH_REQUIRED' });
    expect(failure?.message).toContain('Server "web"');
    expect(failure?.message).toContain('stepbind login web');
    expect(server.seen).toEqual([]);
  });

  it('fails a call the authorizer refuses with CallError AUTH_REQUIRED, delivery not-sent, and the session stays', async () => {
    const server = await start(() => true);
    cleanups.push(() => server.close());
    const { runtime, authorizers } = await open(server, protocol, secret());
    await using step = await runtime.captureBinding();
    const authorizer = authorizers[0];
    if (authorizer === undefined) throw new Error('no authorizer');
    await authorizer.logout();
    const error: unknown = await step
      .prepareCall('web__alpha')
      .run({})
      .catch((e: unknown) => e);
    expect(isStepbindError(error, 'AUTH_REQUIRED')).toBe(true);
    expect(error).toMatchObject({
      name: 'CallError',
      detail: {
        server: 'web',
        tool: 'alpha',
        delivery: 'not-sent',
        command: 'stepbind login web --config FILE',
      },
    });
    expect(server.seen.filter((s) => s.method === 'tools/call')).toEqual([]);
    // Logged in again, the same connection serves the next call.
    authorizer.refresh(secret());
    await using next = await runtime.captureBinding();
    const { result } = await next.prepareCall('web__alpha').run({});
    expect(result.isError).not.toBe(true);
    expect(server.seen.filter((s) => s.method === 'initialize').length).toBeLessThanOrEqual(1);
  });

  it('fails a re-list the authorizer refuses AUTH_REQUIRED naming the server; the catalog stays', async () => {
    const server = await start(() => true);
    cleanups.push(() => server.close());
    const { runtime, authorizers } = await open(server, protocol, secret());
    const before = runtime.status().servers[0];
    await authorizers[0]?.logout();
    const error: unknown = await runtime.hardRefresh('web').catch((e: unknown) => e);
    expect(isStepbindError(error, 'AUTH_REQUIRED')).toBe(true);
    expect(error).toMatchObject({
      detail: { server: 'web', command: 'stepbind login web --config FILE' },
    });
    expect(runtime.status().servers[0]).toMatchObject({
      state: 'ready',
      revision: before?.revision,
    });
  });

  it('a refresh mid-run (new token, same principal) neither reconnects nor changes the catalog', async () => {
    const server = await start(() => true);
    cleanups.push(() => server.close());
    const first = secret();
    const { runtime, authorizers, made, events } = await open(server, protocol, first);
    const before = runtime.status().servers[0];
    const fresh = secret();
    authorizers[0]?.refresh(fresh);
    expect(await runtime.hardRefresh('web')).toBe(false);
    await using step = await runtime.captureBinding();
    const { result } = await step.prepareCall('web__alpha').run({});
    expect(result.isError).not.toBe(true);
    const after = runtime.status().servers[0];
    expect([after?.generation, after?.revision]).toEqual([before?.generation, before?.revision]);
    expect(made).toHaveLength(1);
    expect(server.seen.filter((s) => s.method === 'initialize').length).toBeLessThanOrEqual(1);
    expect(server.seen.at(-1)?.authorization).toBe(`Bearer ${fresh}`);
    expect(events.filter((e) => e.type === 'catalog-swapped')).toEqual([]);
    expect(dump([events, runtime.status()])).not.toContain(first);
    expect(dump([events, runtime.status()])).not.toContain(fresh);
  });

  it('hands the factory the server, its URL, the store, the hook, the default redirect URI and the login command', async () => {
    const server = await start(() => true);
    cleanups.push(() => server.close());
    const tokenStore = new MemoryTokenStore();
    const authorize: AuthorizeHook = () => Promise.reject(new Error('no browser here'));
    const { made, runtime } = await open(server, protocol, secret(), { authorize, tokenStore });
    expect(made).toHaveLength(1);
    expect(made[0]).toMatchObject({
      server: 'web',
      url: server.url,
      config: { type: 'oauth', clientId: 'stepbind-test', scopes: ['tools'] },
      redirectUri: DEFAULT_REDIRECT_URI,
      loginCommand: 'stepbind login web --config FILE',
    });
    expect(made[0]?.store).toBe(tokenStore);
    // The hook itself, behind the runtime-wide one-login-at-a-time lock.
    const hook = made[0]?.authorize;
    if (hook === undefined) throw new Error('no hook handed to the factory');
    await expect(
      hook({
        server: 'web',
        authorizationUrl: new URL('https://as.example/authorize'),
        redirectUri: DEFAULT_REDIRECT_URI,
        signal: new AbortController().signal,
      }),
    ).rejects.toThrow('no browser here');
    expect(runtime.status().servers[0]?.auth).toEqual({
      type: 'oauth',
      state: 'logged-in',
      principal: ALICE,
      issuer: ISSUER,
    });
    expect(await runtime.authStatus()).toEqual([
      { server: 'web', state: 'logged-in', issuer: ISSUER, principal: ALICE },
    ]);
  });
});

describe('OAuth wiring, 2026-07-28 listing freshness', () => {
  it('keeps a private listing across a refresh of the same principal, never for another principal', async () => {
    const server = await modernServer(() => true);
    cleanups.push(() => server.close());
    const { runtime, authorizers } = await open(server, 'auto', secret());
    expect(runtime.status().servers[0]?.listing).toMatchObject({ fresh: true, scope: 'private' });
    authorizers[0]?.refresh(secret());
    expect(runtime.status().servers[0]?.listing).toMatchObject({ fresh: true });
    authorizers[0]?.refresh(secret(), `${ISSUER} mallory`);
    expect(runtime.status().servers[0]?.listing).toMatchObject({
      fresh: false,
      reason: 'principal',
    });
  });

  it('scrubs a learned token out of a call error even when the server repeats it', async () => {
    const server = await modernServer(() => true);
    cleanups.push(() => server.close());
    const { runtime, authorizers } = await open(server, 'auto', secret());
    const later = secret();
    authorizers[0]?.refresh(later);
    await using step = await runtime.captureBinding();
    const error: unknown = await step
      .prepareCall('web__beta')
      .run({})
      .catch((e: unknown) => e);
    expect(dump(error)).toContain('denied for Bearer ***');
    expect(dump(error)).not.toContain(later);
  });
});

describe('OAuth wiring across a reconnect', () => {
  it('keeps the one authorizer of a server when its lost session is reopened', async () => {
    const token = secret();
    const server = await spawnHttpServer(
      { scenario: 'single' },
      { requireHeaders: { authorization: `Bearer ${token}` } },
    );
    cleanups.push(() => server.close());
    const fake = { url: server.url, seen: [], accept: () => true, close: () => server.close() };
    let onEvent: (event: RuntimeEvent) => void = () => undefined;
    const { runtime, made } = await open(fake, '2025-11-25', token, {
      onEvent: (e) => onEvent(e),
    });
    const reconnected = new Promise<void>((resolve) => {
      onEvent = (e) => {
        if (e.type === 'server-reconnected') resolve();
      };
    });
    expect(await server.forgetSessions()).toBe(1);
    expect(await runtime.hardRefresh('web')).toBe(false);
    await reconnected;
    await using step = await runtime.captureBinding();
    const { result } = await step.prepareCall('web__alpha').run({});
    expect(result.isError).not.toBe(true);
    expect(made).toHaveLength(1);
    expect(server.events.filter((e) => e.event === 'session')).toHaveLength(2);
  });
});

describe('OAuth principal in the catalog identity', () => {
  it('gives two principals of one configuration two identities; two tokens of one principal one', async () => {
    const server = await modernServer(() => true);
    cleanups.push(() => server.close());
    const digest = async (who: string): Promise<string | undefined> => {
      const token = secret();
      const { runtime } = await open(server, 'auto', token, { who });
      const identity = runtime.registry.identityOf('web');
      expect(JSON.stringify(identity)).not.toContain(token);
      return identity?.transportDigest;
    };
    const alice = await digest(ALICE);
    expect(alice).toBeDefined();
    expect(await digest(ALICE)).toBe(alice);
    expect(await digest(`${ISSUER} bob`)).not.toBe(alice);
  });
});

describe('OAuth options', () => {
  const config = { mcpServers: { web: { url: 'http://127.0.0.1:9/mcp' } } };
  it.each([
    ['authorize not a function', { authorize: 'open a browser' }],
    ['tokenStore without its methods', { tokenStore: { get: () => undefined } }],
    ['redirectUri not a URL', { redirectUri: 'callback' }],
    ['redirectUri with a fragment', { redirectUri: 'http://127.0.0.1:1/cb#x' }],
    ['redirectUri on port 0', { redirectUri: 'http://127.0.0.1:0/cb' }],
  ])('refuses %s with INVALID_OPTIONS before starting anything', async (_, options) => {
    const error: unknown = await McpRuntime.open(
      config,
      options as Parameters<typeof McpRuntime.open>[1],
    ).catch((e: unknown) => e);
    expect(isStepbindError(error, 'INVALID_OPTIONS')).toBe(true);
    expect((error as Error).message).toContain(`"${Object.keys(options)[0]}"`);
  });
});
