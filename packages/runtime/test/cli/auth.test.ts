import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RuntimeError } from '@stepbind/binding';
import { MemoryTokenStore } from '../../src/auth/memory-token-store.js';
import type { TokenKey } from '../../src/auth/types.js';
import { errorJson, Scrubber } from '../../src/cli/auth.js';
import { runCli } from '../../src/cli/run.js';
import { cliSandbox, type CliSandbox } from './support.js';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** Whether this tree's configuration schema knows `auth` (slice A2); the tests using it wait for it. */
const ACCESS = 'at-5ecret-access-token-value';
const REFRESH = 'rt-5ecret-refresh-token-value';
const KEY: TokenKey = {
  issuer: 'https://as.example',
  resource: 'https://mcp.example/mcp',
  clientId: 'client-1',
};

let sandbox: CliSandbox;
beforeEach(async () => {
  sandbox = await cliSandbox();
});
afterEach(async () => {
  await sandbox.cleanup();
});

async function cli(
  args: string[],
  store = new MemoryTokenStore(),
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    tokenStore: store,
    openBrowser: () => {
      throw new Error('no browser in this test');
    },
  });
  return { code, out, err };
}

async function storeWithLogin(): Promise<MemoryTokenStore> {
  const store = new MemoryTokenStore();
  await store.put(KEY, {
    tokens: {
      accessToken: ACCESS,
      tokenType: 'Bearer',
      refreshToken: REFRESH,
      expiresAt: Date.parse('2030-01-02T03:04:05.000Z'),
      scope: 'mcp:read',
    },
    principal: 'https://as.example alice',
    server: 'remote',
    scopes: ['mcp:read'],
  });
  return store;
}

describe('stepbind login / logout / auth status: usage', () => {
  it('lists the auth commands in the help', async () => {
    const { code, out } = await cli(['--help']);

    expect(code).toBe(0);
    expect(out).toContain('stepbind login CONFIG NAME [--redirect-uri URI] [--json]');
    expect(out).toContain('stepbind logout CONFIG NAME [--json]');
    expect(out).toContain('stepbind auth status [CONFIG] [--json]');
  });

  it.each([
    [['login'], 'expected NAME'],
    [['login', 'a', 'b', '--config', 'x.json'], 'the configuration is given twice'],
    [['login', 'a', 'b', 'c'], 'unexpected argument "c"'],
    [['login', 'a', '--config', 'x.json', '--bogus'], 'unknown option "--bogus"'],
    [['logout', 'a', '--config', 'x.json', '--redirect-uri', 'http://127.0.0.1:1/'], 'unknown'],
    [['login', 'a'], 'the configuration file is required: give CONFIG or --config FILE'],
    [['auth'], 'expected "auth status"'],
    [['auth', 'login'], 'expected "auth status"'],
    [['auth', 'status', 'a.json', 'extra'], 'unexpected argument "extra"'],
    [['auth', 'status', '--store', 'x'], 'unknown option "--store"'],
  ])('stepbind %j exits 2 saying %s', async (args, message) => {
    const { code, out, err } = await cli(args);

    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err).toContain(message);
    expect(err).toContain('Usage:');
  });

  it('refuses a server that is not configured, naming the config file and the servers there', async () => {
    const config = await sandbox.config('one', { files: { command: 'true' } });

    const { code, out } = await cli(['login', 'remote', '--config', config, '--json']);

    expect(code).toBe(2);
    const { error } = JSON.parse(out) as { error: { code: string; message: string } };
    expect(error).toMatchObject({
      code: 'INVALID_CONFIG',
      detail: { server: 'remote', path: '$.mcpServers.remote' },
    });
    expect(error.message).toContain(config);
    expect(error.message).toContain('configured: files');
  });

  it('refuses a stdio server: only remote servers log in', async () => {
    const config = await sandbox.config('stdio', { files: { command: 'true' } });

    const { code, err } = await cli(['logout', 'files', '--config', config]);

    expect(code).toBe(2);
    expect(err).toContain('INVALID_CONFIG');
    expect(err).toContain('server "files" runs over stdio');
  });

  it('refuses an HTTP server without an auth block, saying what to add', async () => {
    const config = await sandbox.config('plain', { remote: { url: 'http://127.0.0.1:9/mcp' } });

    const { code, out } = await cli(['login', 'remote', '--config', config, '--json']);

    expect(code).toBe(2);
    expect(JSON.parse(out)).toMatchObject({
      ok: false,
      error: {
        code: 'INVALID_CONFIG',
        message: expect.stringContaining('"auth": { "type": "oauth" }') as unknown,
        detail: { server: 'remote', path: '$.mcpServers.remote.auth' },
      },
    });
  });

  it('refuses to log in to a bearer-token server and never prints its token', async () => {
    const config = await sandbox.config('bearer', {
      remote: {
        url: 'http://127.0.0.1:9/mcp',
        auth: { type: 'bearer', token: 'bearer-5ecret-in-config' },
      },
    });

    const { code, out, err } = await cli(['login', 'remote', '--config', config]);

    expect(code).toBe(2);
    expect(err).toContain('uses a bearer token');
    expect(out + err).not.toContain('bearer-5ecret-in-config');
  });

  it('refuses a non-loopback --redirect-uri with INVALID_OPTIONS before anything is sent', async () => {
    const config = await sandbox.config('redirect', {
      remote: { url: 'http://127.0.0.1:9/mcp', auth: { type: 'oauth' } },
    });

    const { code, out } = await cli([
      'login',
      'remote',
      '--config',
      config,
      '--redirect-uri',
      'http://203.0.113.7:8080/callback',
      '--json',
    ]);

    expect(code).toBe(2);
    expect(JSON.parse(out)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_OPTIONS', detail: { option: 'redirectUri' } },
    });
  });

  it('exits 2 from the built binary for a stdio server', async () => {
    const config = await sandbox.config('bin', { files: { command: 'true' } });
    const child = spawn(process.execPath, [CLI, 'login', 'files', '--config', config], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));

    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));

    expect(code).toBe(2);
    expect(err).toContain('runs over stdio');
  });
});

describe('stepbind auth status', () => {
  it('lists every stored login with principal, issuer, scopes and expiry, never a token', async () => {
    const store = await storeWithLogin();

    const { code, out, err } = await cli(['auth', 'status'], store);

    expect(code).toBe(0);
    expect(err).toBe('');
    expect(out).toContain('token store: memory');
    expect(out).toContain('1 stored login:');
    const [header, row] = out.split('\n').slice(2);
    expect(header?.trim().split(/\s{2,}/)).toEqual([
      'SERVER',
      'PRINCIPAL',
      'ISSUER',
      'RESOURCE',
      'CLIENT',
      'SCOPES',
      'EXPIRES',
      'REFRESH',
    ]);
    expect(row?.trim().split(/\s{2,}/)).toEqual([
      'remote',
      'https://as.example alice',
      'https://as.example',
      'https://mcp.example/mcp',
      'client-1',
      'mcp:read',
      expect.stringMatching(/^2030-01-02T03:04:05.000Z \(in \d+ min\)$/),
      'refreshable',
    ]);
    expect(out).not.toContain(ACCESS);
    expect(out).not.toContain(REFRESH);
  });

  it('prints the documented JSON shape with --json', async () => {
    const store = await storeWithLogin();

    const { code, out } = await cli(['auth', 'status', '--json'], store);

    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual({
      ok: true,
      store: 'memory',
      logins: [
        {
          server: 'remote',
          principal: 'https://as.example alice',
          issuer: 'https://as.example',
          resource: 'https://mcp.example/mcp',
          clientId: 'client-1',
          scopes: ['mcp:read'],
          expiresAt: '2030-01-02T03:04:05.000Z',
          refreshable: true,
          updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
        },
      ],
    });
    expect(out).not.toContain(ACCESS);
    expect(out).not.toContain(REFRESH);
  });

  it('says so when nothing is stored', async () => {
    const { code, out } = await cli(['auth', 'status']);

    expect(code).toBe(0);
    expect(out).toBe('token store: memory\nno stored logins\n');
  });

  it('with --config, gives each remote server its auth state and skips stdio servers', async () => {
    const config = await sandbox.config('mixed', {
      files: { command: 'true' },
      plain: { url: 'http://127.0.0.1:9/mcp' },
    });

    const { code, out } = await cli(['auth', 'status', '--config', config, '--json']);

    expect(code).toBe(0);
    expect((JSON.parse(out) as { servers: unknown }).servers).toEqual([
      { server: 'plain', state: 'none' },
    ]);
  });

  it('with --config, shows a bearer server as such without its token', async () => {
    const config = await sandbox.config('bearer-status', {
      remote: {
        url: 'http://127.0.0.1:9/mcp',
        auth: { type: 'bearer', token: 'bearer-5ecret-in-config' },
      },
    });

    const { code, out } = await cli(['auth', 'status', '--config', config]);

    expect(code).toBe(0);
    expect(out).toMatch(
      / {2}SERVER {2}STATE {32}DETAIL\n {2}remote {2}bearer token from the configuration\n/,
    );
    expect(out).not.toContain('bearer-5ecret-in-config');
  });

  it('exits 2 naming the file when --config is unreadable', async () => {
    const { code, err } = await cli(['auth', 'status', '--config', '/nonexistent/c.json']);

    expect(code).toBe(2);
    expect(err).toContain('INVALID_CONFIG');
    expect(err).toContain('/nonexistent/c.json');
  });
});

describe('the CLI error scrub', () => {
  it('hides a secret that is percent-encoded, JSON-escaped, a PEM line, or in detail with quotes and newlines', () => {
    const clientSecret = 'cs-"quoted"\\back\nslash-0001';
    const pemLine = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7';
    const privateKey = `-----BEGIN PRIVATE KEY-----\n${pemLine}\n-----END PRIVATE KEY-----`;
    const learned = 'rt-"learned"\n-0002';
    const scrub = new Scrubber({
      url: 'https://mcp.example/mcp?key=url-secret-0003',
      headers: {},
      auth: { type: 'oauth', clientId: 'c', clientSecret, privateKey } as never,
    });
    scrub.learn(learned);
    const error = new RuntimeError(
      'AUTH_FAILED',
      `refused ${encodeURIComponent(clientSecret)} ${JSON.stringify(learned)} line ${pemLine}`,
      {
        detail: {
          reason: 'token',
          body: JSON.stringify({ client_secret: clientSecret }),
          nested: { list: [learned, `key ${pemLine}`, encodeURIComponent('url-secret-0003')] },
        },
      },
    );
    const printed = JSON.stringify(errorJson(error, scrub));
    for (const secret of [clientSecret, learned, 'url-secret-0003']) {
      for (const form of [
        secret,
        encodeURIComponent(secret),
        JSON.stringify(secret).slice(1, -1),
      ]) {
        expect(printed).not.toContain(form);
      }
    }
    expect(printed).not.toContain(pemLine);
    expect(printed).not.toContain('quoted');
    expect(printed).not.toContain('learned');
    expect(printed).toContain('"reason":"token"');
  });
});
