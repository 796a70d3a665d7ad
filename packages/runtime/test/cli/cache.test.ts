/**
 * The CLI's catalog cache flag (DESIGN §19.1): `tools`, `call` and `catalog` document and accept
 * `--no-cache`. Which file a command uses is `cliCacheOption`'s (test/cache/cache-option.test.ts);
 * here `XDG_CACHE_HOME` points into the sandbox, so a run never writes the user's cache directory.
 */
import { scriptedTool } from '@stepbind/testkit';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cli, cliSandbox, type CliSandbox } from './support.js';

let sandbox: CliSandbox;
beforeEach(async () => {
  sandbox = await cliSandbox();
  vi.stubEnv('XDG_CACHE_HOME', sandbox.dir);
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await sandbox.cleanup();
});

const FIXTURE = { generations: [{ pages: [{ tools: [scriptedTool('echo')] }] }] };

describe('--no-cache', () => {
  it.each(['tools', 'call', 'catalog'])('is in the --help of "stepbind %s"', async (command) => {
    const { code, out } = await cli([command, '--help']);
    expect(code).toBe(0);
    expect(out).toMatch(/--no-cache +neither read nor write the catalog cache/);
    expect(out.split('\n')[0]).toContain('[--no-cache]');
  });

  it.each([
    ['tools', [] as string[]],
    ['call', ['s', 'echo', '--approve']],
    ['catalog', []],
  ])('is accepted by "stepbind %s", which runs as without it', async (command, args) => {
    const config = await sandbox.config(command, { s: FIXTURE });
    const withFlag = await cli([command, config, ...args, '--no-cache', '--json']);
    const without = await cli([command, config, ...args, '--json']);
    expect(withFlag.err).toBe('');
    expect([withFlag.code, without.code]).toEqual([0, 0]);
  });
});
