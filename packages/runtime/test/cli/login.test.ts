/**
 * `stepbind login|logout|auth status` end to end: a real authorization server (oidc-provider) in
 * front of a protected MCP server over Streamable HTTP, both on loopback, the CLI's loopback
 * redirect and a scripted browser.
 */
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  startAuthorizationServer,
  startProtectedMcpServer,
  type AuthorizationServer,
  type ProtectedMcpServer,
} from '@stepbind/testkit';
import { MemoryTokenStore } from '../../src/auth/memory-token-store.js';
import type { StoredLogin } from '../../src/auth/types.js';
import { runCli } from '../../src/cli/run.js';
import { cliSandbox, type CliSandbox } from './support.js';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

let sandbox: CliSandbox;
let as: AuthorizationServer;
let mcp: ProtectedMcpServer;
beforeEach(async () => {
  sandbox = await cliSandbox();
  as = await startAuthorizationServer();
  mcp = await startProtectedMcpServer({ authorizationServer: as });
});
afterEach(async () => {
  await mcp.close();
  await as.close();
  await sandbox.cleanup();
});

/** The scripted browser: logs in at the authorization server, then follows the redirect home. */
function browser(): { open: (url: string) => void; done: Promise<void> } {
  let open!: (url: string) => void;
  const done = new Promise<void>((resolve, reject) => {
    open = (url) => {
      as.interact(url)
        .then(async (callback) => {
          await (await fetch(callback)).text();
          resolve();
        })
        .catch(reject);
    };
  });
  return { open, done };
}

async function cli(
  args: string[],
  store: MemoryTokenStore,
  open: (url: string) => void = () => undefined,
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    tokenStore: store,
    openBrowser: open,
  });
  return { code, out, err };
}

/** Every secret the store holds: none may appear in what the CLI printed. */
async function secretsOf(store: MemoryTokenStore): Promise<string[]> {
  const secrets: string[] = [];
  for (const summary of await store.list()) {
    const login = (await store.get(summary.key)) as StoredLogin;
    secrets.push(login.tokens.accessToken);
    if (login.tokens.refreshToken !== undefined) secrets.push(login.tokens.refreshToken);
  }
  return secrets;
}

async function refused(port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', agent: false }, () =>
      resolve(false),
    );
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    req.end();
  });
}

describe('stepbind login against a real authorization server', () => {
  it('logs in through the loopback redirect, stores the login, shows it, and logs out', async () => {
    const config = await sandbox.config('remote', {
      remote: { url: mcp.url, auth: { type: 'oauth' } },
    });
    const store = new MemoryTokenStore();
    const user = browser();

    const login = await cli(
      ['login', 'remote', '--config', config, '--redirect-uri', 'http://127.0.0.1:0/callback'],
      store,
      user.open,
    );
    await user.done;

    expect(login.err).toContain('open this URL in a browser');
    expect(login.out).toContain('✔ logged in to "remote" as ');
    expect(login.out).toContain(`issuer  ${as.issuer}`);
    expect(login.code).toBe(0);
    expect(as.counts.authorizations).toBe(1);
    const [stored] = await store.list();
    expect(stored).toMatchObject({ server: 'remote', key: { issuer: as.issuer } });
    const status = await cli(['auth', 'status', '--config', config, '--json'], store);
    expect(JSON.parse(status.out)).toMatchObject({
      servers: [{ server: 'remote', state: 'logged-in', issuer: as.issuer }],
    });
    const secrets = await secretsOf(store);
    expect(secrets.length).toBeGreaterThan(0);
    const logout = await cli(['logout', 'remote', '--config', config], store);
    expect(logout.code).toBe(0);
    expect(await store.list()).toEqual([]);
    const printed = [login, status, logout].map((r) => r.out + r.err).join('\n');
    for (const secret of secrets) expect(printed).not.toContain(secret);
  });

  it('logs in with client credentials without a browser and never prints the client secret', async () => {
    const { clientId, clientSecret } = as.clients.secretBasic;
    const config = await sandbox.config('headless', {
      remote: {
        url: mcp.url,
        auth: { type: 'oauth', grant: 'client_credentials', clientId, clientSecret },
      },
    });
    const store = new MemoryTokenStore();
    const opened: string[] = [];

    const { code, out, err } = await cli(
      ['login', 'remote', '--config', config, '--json'],
      store,
      (url) => opened.push(url),
    );

    expect(code).toBe(0);
    expect(opened).toEqual([]);
    expect(JSON.parse(out)).toMatchObject({ ok: true, server: 'remote', state: 'logged-in' });
    expect(out + err).not.toContain(clientSecret);
    for (const secret of await secretsOf(store)) expect(out + err).not.toContain(secret);
  });

  it('fails AUTH_FAILED with the oauth error when the user denies the login', async () => {
    const config = await sandbox.config('denied', {
      remote: { url: mcp.url, auth: { type: 'oauth' } },
    });
    const store = new MemoryTokenStore();
    // The "browser" comes straight back with the refusal, as an authorization server would.
    const deny = (url: string): void => {
      const request = new URL(url).searchParams;
      const back = new URL(request.get('redirect_uri') ?? '');
      back.searchParams.set('error', 'access_denied');
      back.searchParams.set('state', request.get('state') ?? '');
      void fetch(back)
        .then(async (r) => await r.text())
        .catch(() => undefined);
    };

    const { code, out } = await cli(
      ['login', 'remote', '--config', config, '--redirect-uri', 'http://127.0.0.1:0/cb', '--json'],
      store,
      deny,
    );

    expect(code).toBe(1);
    expect(JSON.parse(out)).toMatchObject({
      ok: false,
      error: { code: 'AUTH_FAILED', detail: { oauthError: 'access_denied' } },
    });
    expect(await store.list()).toEqual([]);
  });

  it('ends on Ctrl-C while waiting for the browser: exit 130 and the loopback port closed', async () => {
    const config = await sandbox.config('interrupt', {
      remote: { url: mcp.url, auth: { type: 'oauth' } },
    });
    const child = spawn(
      process.execPath,
      [CLI, 'login', 'remote', '--config', config, '--redirect-uri', 'http://127.0.0.1:0/callback'],
      // No browser opener on PATH: the URL is only printed.
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: '' } },
    );
    const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    const printed = await new Promise<string>((resolve) => {
      let err = '';
      child.stderr.on('data', (chunk: Buffer) => {
        err += chunk.toString('utf8');
        const url = /https?:\/\/\S+/.exec(err.slice(err.indexOf('open this URL')));
        if (url !== null && err.endsWith('\n')) resolve(url[0]);
      });
    });
    const port = Number(new URL(new URL(printed).searchParams.get('redirect_uri') ?? '').port);

    child.kill('SIGINT');

    expect(await exited).toBe(130);
    expect(await refused(port)).toBe(true);
  });
});
