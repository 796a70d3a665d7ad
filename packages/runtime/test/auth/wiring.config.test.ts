import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { isStepbindError } from '@stepbind/binding';
import { createRedactor, parseConfig, type HttpServerConfig } from '@stepbind/runtime';
import { describe, expect, it } from 'vitest';
import { configCheckJson, formatConfigCheck } from '../../src/cli/config-check.js';
import { principalOf } from '../../src/era/listing-cache.js';
import { loginCommand } from '../../src/server/authorizers.js';
import { identityKeyOf } from '../../src/transports/index.js';

const TOKEN = 'tok-0123456789abcdef0123';
const CLIENT_SECRET = 'cs-0123456789abcdef0123';
const PEM = [
  '-----BEGIN PRIVATE KEY-----',
  'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgabcdefghijklmnop',
  'qrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnop',
  '-----END PRIVATE KEY-----',
].join('\n');
const env = { MCP_TOKEN: TOKEN, CLIENT_SECRET, PRIVATE_KEY: PEM };
const URL_ = 'https://mcp.example/mcp';

function http(auth: unknown, more: Record<string, unknown> = {}): HttpServerConfig {
  const config = parseConfig({ mcpServers: { web: { url: URL_, auth, ...more } } }, { env });
  return config.servers.get('web') as HttpServerConfig;
}

/** The INVALID_CONFIG refusal of `input`: its path and message. */
function refusal(input: unknown): { path: string; message: string } {
  try {
    parseConfig(input, { env });
  } catch (error) {
    if (!isStepbindError(error, 'INVALID_CONFIG')) throw error;
    return { path: String(error.detail['path']), message: error.message };
  }
  throw new Error('expected INVALID_CONFIG');
}
const refused = (auth: unknown, more: Record<string, unknown> = {}) =>
  refusal({ mcpServers: { web: { url: URL_, auth, ...more } } });

describe('the auth block of an HTTP server', () => {
  it('reads a bearer token from the environment', () => {
    expect(http({ type: 'bearer', token: '${env:MCP_TOKEN}' }).auth).toEqual({
      type: 'bearer',
      token: TOKEN,
    });
  });

  it('reads every OAuth field, secrets interpolated', () => {
    expect(
      http({
        type: 'oauth',
        clientId: 'agent',
        privateKey: '${env:PRIVATE_KEY}',
        privateKeyAlg: 'ES256',
        grant: 'client_credentials',
        scopes: ['tools:read', 'tools:write'],
      }).auth,
    ).toEqual({
      type: 'oauth',
      clientId: 'agent',
      privateKey: PEM,
      privateKeyAlg: 'ES256',
      grant: 'client_credentials',
      scopes: ['tools:read', 'tools:write'],
    });
    expect(http({ type: 'oauth' }).auth).toEqual({ type: 'oauth' });
    expect(
      http({ type: 'oauth', clientMetadataUrl: 'https://agent.example/client.json' }).auth,
    ).toEqual({ type: 'oauth', clientMetadataUrl: 'https://agent.example/client.json' });
  });

  it.each([
    [
      'a stdio entry with auth',
      { mcpServers: { s: { command: 'x', auth: { type: 'bearer', token: 't' } } } },
      '$.mcpServers.s.auth',
      'HTTP servers',
    ],
    [
      'an unknown auth type',
      { mcpServers: { web: { url: URL_, auth: { type: 'basic' } } } },
      '$.mcpServers.web.auth.type',
      '"bearer", "oauth"',
    ],
    [
      'auth not an object',
      { mcpServers: { web: { url: URL_, auth: 'bearer' } } },
      '$.mcpServers.web.auth',
      'expected an object',
    ],
  ])('refuses %s naming its path', (_, input, path, words) => {
    const { path: at, message } = refusal(input);
    expect(at).toBe(path);
    expect(message).toContain(words);
  });

  it.each([
    ['a bearer without token', { type: 'bearer' }, 'token', 'is required'],
    [
      'a token with spaces',
      { type: 'bearer', token: 'Bearer ${env:MCP_TOKEN}' },
      'token',
      'without spaces',
    ],
    ['an unknown bearer key', { type: 'bearer', token: 'x', scopes: [] }, 'scopes', 'unknown key'],
    ['an unknown oauth key', { type: 'oauth', audience: 'x' }, 'audience', 'unknown key'],
    [
      'a secret without client',
      { type: 'oauth', clientSecret: '${env:CLIENT_SECRET}' },
      'clientSecret',
      'needs "clientId"',
    ],
    [
      'a key without client',
      { type: 'oauth', privateKey: '${env:PRIVATE_KEY}' },
      'privateKey',
      'needs "clientId"',
    ],
    [
      'secret and key',
      {
        type: 'oauth',
        clientId: 'a',
        clientSecret: '${env:CLIENT_SECRET}',
        privateKey: '${env:PRIVATE_KEY}',
      },
      'privateKey',
      'not both',
    ],
    [
      'a key that is no key',
      { type: 'oauth', clientId: 'a', privateKey: '${env:CLIENT_SECRET}' },
      'privateKey',
      'PEM PKCS#8',
    ],
    [
      'an alg without key',
      { type: 'oauth', clientId: 'a', privateKeyAlg: 'ES256' },
      'privateKeyAlg',
      'give the key',
    ],
    [
      'a symmetric alg',
      { type: 'oauth', clientId: 'a', privateKey: '${env:PRIVATE_KEY}', privateKeyAlg: 'HS256' },
      'privateKeyAlg',
      'expected one of',
    ],
    ['an unknown grant', { type: 'oauth', grant: 'password' }, 'grant', 'expected one of'],
    [
      'client credentials without client',
      { type: 'oauth', grant: 'client_credentials' },
      'clientId',
      'is required',
    ],
    [
      'client credentials without secret',
      { type: 'oauth', clientId: 'a', grant: 'client_credentials' },
      'grant',
      'needs "clientSecret" or "privateKey"',
    ],
    [
      'a metadata URL over http',
      { type: 'oauth', clientMetadataUrl: 'http://agent.example/c.json' },
      'clientMetadataUrl',
      'https URL',
    ],
    [
      'a metadata URL and a client id',
      { type: 'oauth', clientId: 'a', clientMetadataUrl: 'https://agent.example/c.json' },
      'clientMetadataUrl',
      'not both',
    ],
    ['scopes not a list', { type: 'oauth', scopes: 'a b' }, 'scopes', 'expected an array'],
  ])(
    'refuses %s at $.mcpServers.web.auth.FIELD, never echoing a secret',
    (_, auth, field, words) => {
      const { path, message } = refused(auth);
      expect(path).toBe(`$.mcpServers.web.auth.${field}`);
      expect(message).toContain(words);
      for (const secret of [TOKEN, CLIENT_SECRET, PEM.split('\n')[1] ?? '']) {
        expect(message).not.toContain(secret);
      }
    },
  );

  it('refuses a scope with a space at its index', () => {
    expect(refused({ type: 'oauth', scopes: ['a', 'b c'] }).path).toBe(
      '$.mcpServers.web.auth.scopes[1]',
    );
  });

  it('refuses an Authorization header beside an auth block, whatever its case', () => {
    const { path, message } = refused(
      { type: 'bearer', token: '${env:MCP_TOKEN}' },
      { headers: { AUTHORIZATION: 'Bearer x' } },
    );
    expect(path).toBe('$.mcpServers.web.headers.AUTHORIZATION');
    expect(message).toContain('"auth"');
  });

  it('a disabled entry with auth is checked for unknown keys only', () => {
    const config = parseConfig({
      mcpServers: {
        web: { url: URL_, disabled: true, auth: { type: 'bearer', token: '${env:NOPE}' } },
      },
    });
    expect(config.disabled).toEqual(['web']);
  });
});

describe('auth in the identity and listing keys', () => {
  const bearer = (token: string): HttpServerConfig =>
    parseConfig(
      { mcpServers: { web: { url: URL_, auth: { type: 'bearer', token: '${env:T}' } } } },
      { env: { T: token } },
    ).servers.get('web') as HttpServerConfig;

  it('makes a changed token or client a new server, without the secret in any key', () => {
    const a = identityKeyOf(bearer(TOKEN));
    expect(identityKeyOf(bearer(TOKEN))).toBe(a);
    expect(identityKeyOf(bearer(`${TOKEN}x`))).not.toBe(a);
    expect(identityKeyOf(http({ type: 'oauth', clientId: 'a' }))).not.toBe(
      identityKeyOf(http({ type: 'oauth', clientId: 'b' })),
    );
    expect(identityKeyOf(http({ type: 'oauth' }))).not.toBe(identityKeyOf(http(undefined)));
    const secretConfig = http({
      type: 'oauth',
      clientId: 'a',
      clientSecret: '${env:CLIENT_SECRET}',
    });
    for (const key of [a, identityKeyOf(secretConfig), principalOf(secretConfig, 'x')]) {
      expect(key).not.toContain(TOKEN);
      expect(key).not.toContain(CLIENT_SECRET);
    }
  });

  it('keeps the listing principal of an entry without auth as it was, and separates OAuth principals', () => {
    const plain = http(undefined);
    expect(principalOf(plain)).toBe(principalOf(plain, 'ignored'));
    const oauth = http({ type: 'oauth' });
    expect(principalOf(oauth, 'iss alice')).toBe(principalOf(oauth, 'iss alice'));
    expect(principalOf(oauth, 'iss alice')).not.toBe(principalOf(oauth, 'iss bob'));
    expect(principalOf(bearer(TOKEN))).not.toBe(principalOf(bearer(`${TOKEN}x`)));
  });
});

describe('auth secrets in the redactor and config check', () => {
  it('scrubs the token, the client secret and every line of a private key, and learns more', () => {
    const redactor = createRedactor(URL_, {}, [TOKEN, CLIENT_SECRET, PEM]);
    const line = PEM.split('\n')[1] ?? '';
    expect(redactor.text(`a ${TOKEN} b ${CLIENT_SECRET} c ${line}`)).toBe('a *** b *** c ***');
    const learned = 'at-learned-0123456789';
    expect(redactor.text(learned)).toBe(learned);
    redactor.learn(learned);
    expect(redactor.text(`x ${learned} ${encodeURIComponent(learned)}`)).toBe('x *** ***');
    redactor.learn('abc');
    expect(redactor.text('abc')).toBe('abc');
  });

  it('shows auth in config check without any secret', () => {
    const config = parseConfig(
      {
        mcpServers: {
          a: { url: URL_, auth: { type: 'bearer', token: '${env:MCP_TOKEN}' } },
          b: {
            url: URL_,
            auth: {
              type: 'oauth',
              clientId: 'agent',
              clientSecret: '${env:CLIENT_SECRET}',
              scopes: ['x'],
            },
          },
          c: { url: URL_, auth: { type: 'oauth' } },
        },
      },
      { env },
    );
    const text = formatConfigCheck('mcp.json', config);
    const json = JSON.stringify(configCheckJson(config));
    expect(text).toContain('auth bearer (token set)');
    expect(text).toContain(
      'auth oauth authorization_code, client agent, scopes x, client secret set',
    );
    expect(text).toContain('auth oauth authorization_code, registers itself');
    expect(json).toContain(
      '"auth":{"type":"oauth","grant":"authorization_code","clientId":"agent"',
    );
    for (const out of [text, json]) {
      expect(out).not.toContain(TOKEN);
      expect(out).not.toContain(CLIENT_SECRET);
    }
  });

  it('is in the JSON schema: both kinds accepted, unknown keys and stdio auth refused', () => {
    const schema = JSON.parse(
      readFileSync(
        fileURLToPath(new URL('../../../../stepbind.schema.json', import.meta.url)),
        'utf8',
      ),
    ) as object;
    const validate = new Ajv2020({ strict: false, allErrors: true }).compile(schema);
    const entry = (auth: unknown, base: Record<string, unknown> = { url: URL_ }) => ({
      mcpServers: { web: { ...base, auth } },
    });
    expect(validate(entry({ type: 'bearer', token: '${env:T}' }))).toBe(true);
    expect(
      validate(
        entry({
          type: 'oauth',
          clientId: 'a',
          scopes: ['x'],
          grant: 'client_credentials',
          clientSecret: 's',
        }),
      ),
    ).toBe(true);
    expect(validate(entry({ type: 'oauth', bogus: 1 }))).toBe(false);
    expect(validate(entry({ type: 'bearer' }))).toBe(false);
    expect(validate(entry({ type: 'bearer', token: 't' }, { command: 'x' }))).toBe(false);
  });
});

describe('the AUTH_REQUIRED login command', () => {
  it('names --config FILE (the CLI needs it) and shell-quotes a name that needs it', () => {
    expect(loginCommand('web')).toBe('stepbind login web --config FILE');
    expect(loginCommand('my server')).toBe("stepbind login 'my server' --config FILE");
    expect(loginCommand("it's;rm")).toBe("stepbind login 'it'\\''s;rm' --config FILE");
  });
});

describe('an auth block refuses what would leak or log in as no one', () => {
  it.each([
    ['bearer', { type: 'bearer', token: '${env:MCP_TOKEN}' }],
    ['oauth', { type: 'oauth', clientId: 'agent' }],
  ])('refuses a plain http URL to a non-loopback host (%s)', (_type, auth) => {
    const result = refusal({ mcpServers: { web: { url: 'http://mcp.example/mcp', auth } } });
    expect(result.path).toBe('$.mcpServers.web.url');
    expect(result.message).toContain('must be https (or a loopback address) when auth is set');
    expect(result.message).not.toContain(TOKEN);
  });

  it.each(['http://127.0.0.1:8080/mcp', 'http://localhost:8080/mcp', 'http://[::1]:8080/mcp'])(
    'accepts plain http on loopback (%s)',
    (url) => {
      const config = parseConfig(
        { mcpServers: { web: { url, auth: { type: 'oauth', clientId: 'agent' } } } },
        { env },
      );
      expect((config.servers.get('web') as HttpServerConfig).auth).toMatchObject({ type: 'oauth' });
    },
  );

  it('accepts plain http to any host without auth', () => {
    const config = parseConfig({ mcpServers: { web: { url: 'http://mcp.example/mcp' } } });
    expect(config.servers.get('web')).toMatchObject({ url: 'http://mcp.example/mcp' });
  });

  it.each([
    ['clientId', { type: 'oauth', clientId: '' }],
    ['clientId', { type: 'oauth', clientId: '${env:EMPTY}' }],
    ['clientSecret', { type: 'oauth', clientId: 'agent', clientSecret: ' ' }],
    ['privateKey', { type: 'oauth', clientId: 'agent', privateKey: '${env:EMPTY}' }],
    ['token', { type: 'bearer', token: '${env:EMPTY}' }],
    ['scopes[1]', { type: 'oauth', scopes: ['tools', ''] }],
  ])('refuses an empty %s naming .auth.FIELD', (field, auth) => {
    let result: { path: string; message: string };
    try {
      parseConfig({ mcpServers: { web: { url: URL_, auth } } }, { env: { ...env, EMPTY: '' } });
      throw new Error('expected INVALID_CONFIG');
    } catch (error) {
      if (!isStepbindError(error, 'INVALID_CONFIG')) throw error;
      result = { path: String(error.detail['path']), message: error.message };
    }
    expect(result.path).toBe(`$.mcpServers.web.auth.${field}`);
  });
});
