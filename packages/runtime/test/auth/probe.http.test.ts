/**
 * The era probe and the authorize hook (issue 18 review): a first login that outlives the
 * `server/discover` budget is not cut short by it, and the application's hook is called one at a
 * time across servers (they share the loopback redirect port). Real parts: the testkit's
 * oidc-provider authorization server and protected MCP servers on loopback, the runtime as
 * applications open it.
 */
import { McpRuntime, MemoryTokenStore, type AuthorizeHook } from '@stepbind/runtime';
import {
  startAuthorizationServer,
  startProtectedMcpServer,
  type AuthorizationServer,
  type ProtectedMcpServer,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { serializedHook } from '../../src/server/authorizers.js';
import { within } from '../support/wait.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function authorizationServer(): Promise<AuthorizationServer> {
  const as = await startAuthorizationServer();
  cleanups.push(() => as.close());
  return as;
}

async function protectedServer(as: AuthorizationServer): Promise<ProtectedMcpServer> {
  const mcp = await startProtectedMcpServer({ authorizationServer: as });
  cleanups.push(() => mcp.close());
  return mcp;
}

/** Resolves when `signal` aborts. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** Calls `<server>__whoami` in a fresh step and returns its parsed answer. */
async function whoami(runtime: McpRuntime, server: string): Promise<Record<string, unknown>> {
  await using step = await runtime.captureBinding();
  const { result } = await step.prepareCall(`${server}__whoami`).run({});
  const [first] = result.content as { type: string; text?: string }[];
  return JSON.parse(first?.text ?? '{}') as Record<string, unknown>;
}

describe('the era probe under a first login', () => {
  it('a login whose authorize hook outlasts discoverTimeoutMs is neither cancelled nor repeated', async () => {
    const as = await authorizationServer();
    const mcp = await protectedServer(as);
    const budgetMs = 400;
    const signals: AbortSignal[] = [];
    const cancelled: boolean[] = [];
    // A user who takes several probe budgets to log in: the hook ends early only if the runtime
    // cancels it (the probe giving up on the server/discover request that needed the login).
    const hook: AuthorizeHook = async (request) => {
      signals.push(request.signal);
      await aborted(AbortSignal.any([request.signal, AbortSignal.timeout(budgetMs * 4)]));
      cancelled.push(request.signal.aborted);
      request.signal.throwIfAborted();
      return as.interact(request.authorizationUrl);
    };
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          remote: {
            type: 'http',
            url: mcp.url,
            approval: 'none',
            discoverTimeoutMs: budgetMs,
            auth: { type: 'oauth', clientId: as.clients.public.clientId },
          },
        },
      },
      { approval: 'none', authorize: hook, tokenStore: new MemoryTokenStore() },
    );
    cleanups.push(() => runtime.close());
    expect(await whoami(runtime, 'remote')).toMatchObject({ sub: 'alice' });
    expect(signals).toHaveLength(1);
    expect(cancelled).toEqual([false]);
    expect(as.counts.authorizations).toBe(1);
    // The server answered the probe (after the login) rather than timing out: one MCP session.
    expect(mcp.counts.initializes).toBe(1);
  });

  it('a login longer than startupTimeoutMs leaves initialize its share of the start budget', async () => {
    const as = await authorizationServer();
    const mcp = await protectedServer(as);
    const startupMs = 1000;
    const hook: AuthorizeHook = async (request) => {
      await aborted(AbortSignal.any([request.signal, AbortSignal.timeout(startupMs * 1.5)]));
      request.signal.throwIfAborted();
      return as.interact(request.authorizationUrl);
    };
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          remote: {
            type: 'http',
            url: mcp.url,
            approval: 'none',
            startupTimeoutMs: startupMs,
            discoverTimeoutMs: startupMs / 5,
            auth: { type: 'oauth', clientId: as.clients.public.clientId },
          },
        },
      },
      { approval: 'none', authorize: hook, tokenStore: new MemoryTokenStore() },
    );
    cleanups.push(() => runtime.close());
    expect(await whoami(runtime, 'remote')).toMatchObject({ sub: 'alice' });
    expect(as.counts.authorizations).toBe(1);
  });
});

describe('the authorize hook, one call at a time', () => {
  it('two servers logging in at once never run the hook concurrently; both log in', async () => {
    const as = await authorizationServer();
    const one = await protectedServer(as);
    const two = await protectedServer(as);
    let active = 0;
    let most = 0;
    const servers: string[] = [];
    const hook: AuthorizeHook = async (request) => {
      active += 1;
      most = Math.max(most, active);
      servers.push(request.server);
      try {
        return await as.interact(request.authorizationUrl);
      } finally {
        active -= 1;
      }
    };
    const auth = { type: 'oauth', clientId: as.clients.public.clientId };
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          one: { type: 'http', url: one.url, approval: 'none', auth },
          two: { type: 'http', url: two.url, approval: 'none', auth },
        },
      },
      { approval: 'none', authorize: hook, tokenStore: new MemoryTokenStore() },
    );
    cleanups.push(() => runtime.close());
    expect(await whoami(runtime, 'one')).toMatchObject({ sub: 'alice' });
    expect(await whoami(runtime, 'two')).toMatchObject({ sub: 'alice' });
    expect([...servers].sort()).toEqual(['one', 'two']);
    expect(most).toBe(1);
  });

  it('serializedHook: a second call waits for the first to settle; a waiting call gives up on abort', async () => {
    const started: string[] = [];
    const finish = new Map<string, (url: string) => void>();
    let cArrived!: () => void;
    const cCalled = new Promise<void>((resolve) => (cArrived = resolve));
    const inner: AuthorizeHook = (request) => {
      started.push(request.server);
      if (request.server === 'c') cArrived();
      return new Promise((resolve) => finish.set(request.server, resolve));
    };
    const hook = serializedHook(inner);
    const request = (server: string, signal = new AbortController().signal) => ({
      server,
      authorizationUrl: new URL('https://as.example/authorize'),
      redirectUri: 'http://127.0.0.1:33418/callback',
      signal,
    });
    const a = hook(request('a'));
    const cancel = new AbortController();
    const b = hook(request('b', cancel.signal));
    const c = hook(request('c'));
    // Let every queued continuation run: only the first call reached the application's hook.
    for (let i = 0; i < 10; i += 1) await Promise.resolve();
    expect(started).toEqual(['a']);
    cancel.abort(new Error('cancelled b'));
    await expect(b).rejects.toThrow('cancelled b');
    expect(started).toEqual(['a']);
    finish.get('a')?.('http://127.0.0.1:33418/callback?code=a');
    expect(String(await a)).toContain('code=a');
    await within(cCalled, "c's hook call");
    expect(started).toEqual(['a', 'c']);
    finish.get('c')?.('http://127.0.0.1:33418/callback?code=c');
    expect(String(await c)).toContain('code=c');
  });
});
