import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { isStepbindError, type StepbindError } from '@stepbind/binding';
import { McpRuntime, parseConfig } from '@stepbind/runtime';
import { runCli } from '../src/cli/run.js';
import { createInMemoryFleet, scriptedTool, stdioServerParams } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { globMatch } from '../src/tool-filter.js';

function refusal(input: unknown, env: Record<string, string> = {}): StepbindError {
  try {
    parseConfig(input, { env });
  } catch (error) {
    if (isStepbindError(error, 'INVALID_CONFIG')) return error;
    throw error;
  }
  throw new Error('expected INVALID_CONFIG');
}

describe('configuration compatibility', () => {
  it("accepts VS Code's mcp.json: top-level servers, type stdio/http, inputs", () => {
    const config = parseConfig({
      inputs: [{ type: 'promptString', id: 'token' }],
      servers: {
        files: { type: 'stdio', command: 'node', args: ['server.js'] },
        remote: { type: 'http', url: 'https://example.test/mcp' },
      },
    });
    expect(config.servers.get('files')).toMatchObject({ transport: 'stdio', command: 'node' });
    expect(config.servers.get('remote')).toMatchObject({ transport: 'http' });
    expect(refusal({ servers: {}, mcpServers: {} }).detail['path']).toBe('$.servers');
    expect(refusal({ servers: { a: { command: 'x', bogus: 1 } } }).detail['path']).toBe(
      '$.servers.a.bogus',
    );
  });

  it('interpolates ${env:VAR} and ${VAR} in command, args, env, cwd, url and headers', () => {
    const env = { BIN: 'node', TOKEN: 's3cr3t-value', HOST: 'example.test', DIR: '/srv' };
    const config = parseConfig(
      {
        mcpServers: {
          local: {
            command: '${env:BIN}',
            args: ['--token=${TOKEN}', '$HOME stays', 'cost: $$5', '${DIR}/x'],
            env: { API_KEY: '${env:TOKEN}' },
            cwd: '${DIR}',
          },
          remote: {
            url: 'https://${HOST}/mcp',
            headers: { Authorization: 'Bearer ${env:TOKEN}' },
          },
        },
      },
      { env },
    );
    expect(config.servers.get('local')).toMatchObject({
      command: 'node',
      args: ['--token=s3cr3t-value', '$HOME stays', 'cost: $5', '/srv/x'],
      env: { API_KEY: 's3cr3t-value' },
      cwd: '/srv',
    });
    expect(config.servers.get('remote')).toMatchObject({
      url: 'https://example.test/mcp',
      headers: { Authorization: 'Bearer s3cr3t-value' },
    });
  });

  it('names the path and the variable when it is not set, and never prints a value', () => {
    const missing = refusal(
      { mcpServers: { r: { url: 'https://h/mcp', headers: { 'X-Key': '${env:NOPE}' } } } },
      { OTHER: 'visible-secret' },
    );
    expect(missing.detail).toMatchObject({
      path: '$.mcpServers.r.headers["X-Key"]',
      variable: 'NOPE',
    });
    expect(missing.message).toContain('environment variable NOPE is not set');
    const prompt = refusal({
      $schema: './stepbind.schema.json',
      mcpServers: { a: { command: 'x', args: ['${input:token}'] } },
    });
    expect(prompt.detail['path']).toBe('$.mcpServers.a.args[0]');
    expect(prompt.message).toContain('${input:...} are not supported');
    expect(JSON.stringify([missing.toJSON(), prompt.toJSON()])).not.toContain('visible-secret');
  });

  it('skips disabled servers (Cline) without starting or interpolating them', () => {
    const config = parseConfig(
      {
        mcpServers: {
          on: { command: 'node' },
          off: { command: '${env:UNSET}', disabled: true },
        },
      },
      { env: {} },
    );
    expect([...config.servers.keys()]).toEqual(['on']);
    expect(config.disabled).toEqual(['off']);
    expect(
      refusal({ mcpServers: { off: { command: 'x', disabled: true, bogus: 1 } } }).detail['path'],
    ).toBe('$.mcpServers.off.bogus');
  });

  it("maps Cline's timeout (seconds) to the call timeout, and refuses both spellings at once", () => {
    const config = parseConfig({ mcpServers: { a: { command: 'x', timeout: 90 } } });
    expect(config.servers.get('a')?.callTimeoutMs).toBe(90_000);
    expect(
      refusal({ mcpServers: { a: { command: 'x', timeout: 9, callTimeoutMs: 9 } } }).detail['path'],
    ).toBe('$.mcpServers.a.timeout');
  });

  it('lists the allowed keys when it refuses an unknown one', () => {
    const error = refusal({ mcpServers: { a: { command: 'x', comand: 'y' } } });
    expect(error.message).toContain('the keys allowed here are command, args, env');
    expect(refusal({ mcpServers: { a: { command: 'x', tools: { alow: [] } } } }).message).toContain(
      'allow, deny',
    );
  });
});

describe('configuration dialects', () => {
  const values = ['pa$$word', '${HOME}', '${input:token}'];
  const claudeDesktop = {
    mcpServers: {
      a: { command: 'node', args: values, env: { PASS: 'pa$$word', TPL: '${HOME}' } },
    },
  };

  it('takes the strings of a Claude Desktop file verbatim: no interpolation, $$ kept', () => {
    const config = parseConfig(claudeDesktop, { env: { HOME: '/home/u' } });
    expect(config.servers.get('a')).toMatchObject({
      args: values,
      env: { PASS: 'pa$$word', TPL: '${HOME}' },
    });
  });

  it("replaces only Cursor's ${env:NAME} in a plain mcpServers file, and names a missing one", () => {
    const plain = {
      mcpServers: { a: { command: 'node', env: { TOKEN: '${env:TOKEN}', PASS: 'p$$${HOME}' } } },
    };
    expect(
      parseConfig(plain, { env: { TOKEN: 't0k', HOME: '/h' } }).servers.get('a'),
    ).toMatchObject({ env: { TOKEN: 't0k', PASS: 'p$$${HOME}' } });
    expect(() => parseConfig(plain, { env: {} })).toThrow(
      /mcpServers\.a\.env\.TOKEN: environment variable TOKEN is not set/,
    );
  });

  it("interpolates stepbind's own format (any stepbind key, $schema included), $$ a literal $", () => {
    const env = { HOME: '/home/u' };
    const entry = { command: 'node', args: ['pa$$word', '${HOME}'], env: { PASS: 'pa$$word' } };
    for (const input of [
      { $schema: './stepbind.schema.json', mcpServers: { a: entry } },
      { mcpServers: { a: { ...entry, required: true } } },
      { concurrency: 2, mcpServers: { a: entry } },
      { servers: { a: entry } },
    ]) {
      expect(parseConfig(input, { env }).servers.get('a'), JSON.stringify(input)).toMatchObject({
        args: ['pa$word', '/home/u'],
        env: { PASS: 'pa$word' },
      });
    }
  });

  it('hands a Claude Desktop value to the real child process verbatim, and a stepbind one interpolated', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stepbind-dialect-'));
    try {
      const server = stdioServerParams({ scenario: 'single' });
      // The child records its argv and environment, then becomes the scripted server.
      const script = 'printf "%s\\n" "$1" "$2" "$PASS" "$TPL" > "$OUT"; shift 2; exec "$@"';
      const seen = async (extra: Record<string, unknown>, out: string): Promise<string[]> => {
        const path = join(dir, out);
        await using runtime = await McpRuntime.open(
          {
            ...extra,
            mcpServers: {
              a: {
                command: 'sh',
                args: ['-c', script, 'sh', 'pa$$word', '${HOME}', server.command, ...server.args],
                env: { PASS: 'pa$$word', TPL: '${HOME}', OUT: path },
              },
            },
          },
          { approval: 'none' },
        );
        expect(runtime.status().servers[0]?.state).toBe('ready');
        return (await readFile(path, 'utf8')).split('\n').slice(0, 4);
      };
      expect(await seen({}, 'claude.txt')).toEqual(['pa$$word', '${HOME}', 'pa$$word', '${HOME}']);
      const home = process.env['HOME'] ?? '';
      expect(await seen({ $schema: './stepbind.schema.json' }, 'stepbind.txt')).toEqual([
        'pa$word',
        home,
        'pa$word',
        home,
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('per-server tool filters and autoApprove', () => {
  it('publishes only allowed, not denied tools, before model names are assigned', async () => {
    const fleet = createInMemoryFleet({
      a: {
        scenario: 'fixture',
        fixture: {
          generations: [
            {
              pages: [
                {
                  tools: [
                    scriptedTool('read_file'),
                    scriptedTool('read_dir'),
                    scriptedTool('write_file'),
                    // Invalid (a space in the name), but denied: it must not break the catalog.
                    { name: 'broken tool name', inputSchema: { type: 'object' } },
                  ],
                },
              ],
            },
          ],
        },
      },
    });
    await using runtime = await McpRuntime.open(
      fleet.config({ a: { tools: { allow: ['read_*', 'write_*'], deny: ['*_dir'] } } }),
      { connect: fleet.connect },
    );
    await using step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toEqual(['a__read_file', 'a__write_file']);
    await fleet.close();
  });

  it('runs autoApprove tools without an approval and still asks for the others', async () => {
    const fleet = createInMemoryFleet({ a: { scenario: 'single' } });
    await using runtime = await McpRuntime.open(fleet.config({ a: { autoApprove: ['alpha'] } }), {
      connect: fleet.connect,
    });
    await using step = await runtime.captureBinding();
    await step.prepareCall('a__alpha').run({});
    const refused = await step
      .prepareCall('a__beta')
      .run({})
      .catch((e: unknown) => e);
    expect(isStepbindError(refused, 'APPROVAL_REQUIRED')).toBe(true);
    await fleet.close();
  });

  it('matches globs like an anchored regex of .* and . (property)', () => {
    const chars = fc.constantFrom('a', 'b', '_', '*', '?');
    fc.assert(
      fc.property(
        fc.string({ unit: chars, maxLength: 8 }),
        fc.string({ unit: fc.constantFrom('a', 'b', '_'), maxLength: 10 }),
        (glob, name) => {
          const regex = new RegExp(`^${glob.replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
          return globMatch(glob, name) === regex.test(name);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('stepbind config check', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stepbind-config-check-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await runCli(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
    return { code, out, err };
  }

  it('validates a file without starting anything and never prints header or env values', async () => {
    const path = join(dir, 'ok.json');
    await writeFile(
      path,
      JSON.stringify({
        servers: {
          files: { type: 'stdio', command: 'does-not-exist', env: { KEY: 'env-secret' } },
          web: { url: 'https://example.test/mcp', headers: { Authorization: 'Bearer hdr-secret' } },
          old: { command: 'x', disabled: true },
        },
      }),
    );
    const text = await cli(['config', 'check', path]);
    expect(text.code).toBe(0);
    expect(text.out).toContain('2 servers, 1 disabled');
    expect(text.out).toContain('files: stdio: does-not-exist');
    const json = await cli(['config', 'check', path, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({ ok: true, disabled: ['old'] });
    expect(text.out + json.out).not.toMatch(/env-secret|hdr-secret/);
  });

  it('exits 2 with the JSON path of the problem', async () => {
    const path = join(dir, 'bad.json');
    await writeFile(
      path,
      JSON.stringify({ mcpServers: { a: { command: 'x', approval: 'maybe' } } }),
    );
    const text = await cli(['config', 'check', path]);
    expect(text.code).toBe(2);
    expect(text.err).toContain('$.mcpServers.a.approval');
    const json = await cli(['config', 'check', path, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_CONFIG', detail: { path: '$.mcpServers.a.approval' } },
    });
  });
});
