import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStepbindError } from '@stepbind/binding';
import { McpRuntime, parseConfig } from '@stepbind/runtime';
import { runCli } from '../src/cli/run.js';
import { stdioServerParams } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-boundary-config-'));
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

function configError(input: unknown): { code: string; path: unknown; message: string } {
  try {
    parseConfig(input);
  } catch (error) {
    if (!isStepbindError(error)) throw error;
    return { code: error.code, path: error.detail['path'], message: error.message };
  }
  throw new Error('expected a ConfigError');
}

describe('configuration at the boundary', () => {
  it('refuses a configuration file over 1 MiB after a bounded read (/dev/zero)', async () => {
    const { code, err } = await cli(['catalog', '--config', '/dev/zero']);
    expect(code).toBe(2);
    expect(err).toContain('INVALID_CONFIG');
    expect(err).toContain('larger than 1048576 bytes');
  });

  it('refuses env keys that are not variable names, __proto__ included, with their path', () => {
    const server = { command: 'node' };
    const proto = configError(
      JSON.parse('{"mcpServers":{"s":{"command":"node","env":{"__proto__":"x"}}}}'),
    );
    expect(proto).toMatchObject({ code: 'INVALID_CONFIG', path: '$.mcpServers.s.env.__proto__' });
    expect(configError({ mcpServers: { s: { ...server, env: { 'A=B': 'x' } } } }).path).toBe(
      '$.mcpServers.s.env["A=B"]',
    );
    expect(configError({ mcpServers: { s: { ...server, env: { '': 'x' } } } }).path).toBe(
      '$.mcpServers.s.env[""]',
    );
    expect(
      configError({ mcpServers: { s: { ...server, envPassthrough: ['OK', 'NOT OK'] } } }).path,
    ).toBe('$.mcpServers.s.envPassthrough[1]');
    expect(
      configError({ mcpServers: { s: { url: 'http://127.0.0.1/mcp', headers: { 'a b': 'x' } } } })
        .path,
    ).toBe('$.mcpServers.s.headers["a b"]');
  });

  it('prints configuration errors as JSON with --json', async () => {
    const path = join(dir, 'bad.json');
    await writeFile(path, JSON.stringify({ mcpServers: { s: { command: 'node', bogus: 1 } } }));
    const { code, out, err } = await cli(['catalog', '--config', path, '--json']);
    expect(code).toBe(2);
    expect(err).toBe('');
    const parsed = JSON.parse(out) as { error: { code: string; detail: { path: string } } };
    expect(parsed.error.code).toBe('INVALID_CONFIG');
    expect(parsed.error.detail.path).toBe('$.mcpServers.s.bogus');
  });

  it('explains an empty mcpServers instead of printing a blank report', async () => {
    const path = join(dir, 'empty.json');
    await writeFile(path, JSON.stringify({ mcpServers: {} }));
    const { code, out, err } = await cli(['catalog', '--config', path]);
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err).toContain('no servers are configured');
  });

  it('says on the very first open that the runtime did not open, not that old tools stay', async () => {
    const params = stdioServerParams({ scenario: 'cycle' });
    const error: unknown = await McpRuntime.open({
      mcpServers: { looping: { command: params.command, args: [...params.args] } },
    }).catch((e: unknown) => e);
    expect(isStepbindError(error, 'REQUIRED_SERVERS_FAILED')).toBe(true);
    expect((error as Error).message).toContain('the runtime did not open');
    expect((error as Error).message).not.toContain('stay in service');
  });
});
