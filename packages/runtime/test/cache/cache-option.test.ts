import { writeFile } from 'node:fs/promises';
import { isStepbindError } from '@stepbind/binding';
import { loadConfigFile, McpRuntime, parseConfig } from '@stepbind/runtime';
import { tempDir } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { cliCacheOption, resolveCachePath } from '../../src/cache/option.js';

const EMPTY = { mcpServers: {} };

/** The INVALID_CONFIG paths of `input`, or [] when it parses. */
function configProblems(input: unknown): string[] {
  try {
    parseConfig(input, { env: {} });
    return [];
  } catch (error) {
    if (!isStepbindError(error, 'INVALID_CONFIG')) throw error;
    return (error.detail.errors ?? []).map((e) => e.path);
  }
}

describe('the cache option and configuration key', () => {
  it('is off in the library by default: status() names no cache', async () => {
    await using runtime = await McpRuntime.open(EMPTY);
    expect(runtime.status().cache).toBeUndefined();
  });

  it('shows the option in status().cache.path, absolute', async () => {
    await using runtime = await McpRuntime.open(EMPTY, { cache: { path: 'rel/catalogs.json' } });
    expect(runtime.status().cache).toEqual({ path: `${process.cwd()}/rel/catalogs.json` });
  });

  it('reads "cache" from a configuration file, a relative path against the file\'s folder', async () => {
    await using dir = tempDir('cache-config');
    await writeFile(
      dir.file('mcp.json'),
      '{ "mcpServers": {}, "cache": { "path": "c/cat.json" } }',
    );
    const config = await loadConfigFile(dir.file('mcp.json'));
    expect(config.cache).toEqual({ path: dir.file('c/cat.json') });
    await using runtime = await McpRuntime.open(config);
    expect(runtime.status().cache).toEqual({ path: dir.file('c/cat.json') });
  });

  it('lets the option win over the configuration: false turns a configured cache off', async () => {
    const config = { ...EMPTY, cache: { path: '/var/cache/a.json' } };
    await using off = await McpRuntime.open(config, { cache: false });
    expect(off.status().cache).toBeUndefined();
    await using other = await McpRuntime.open(config, { cache: { path: '/tmp/b.json' } });
    expect(other.status().cache).toEqual({ path: '/tmp/b.json' });
    expect(parseConfig({ ...EMPTY, cache: false }).cache).toBe(false);
  });

  it('refuses a bad cache option with INVALID_OPTIONS naming it, before anything starts', async () => {
    for (const cache of [{ pth: 'x' }, true, { path: '' }, 'file.json']) {
      const error: unknown = await McpRuntime.open(EMPTY, { cache } as never).catch(
        (e: unknown) => e,
      );
      expect(isStepbindError(error, 'INVALID_OPTIONS'), JSON.stringify(cache)).toBe(true);
      expect((error as Error).message).toContain('options.cache');
    }
  });

  it('refuses a bad cache key in a configuration with its path', () => {
    expect(configProblems({ ...EMPTY, cache: 'c.json' })).toEqual(['$.cache']);
    expect(configProblems({ ...EMPTY, cache: true })).toEqual(['$.cache']);
    expect(configProblems({ ...EMPTY, cache: { path: '' } })).toEqual(['$.cache.path']);
    expect(configProblems({ ...EMPTY, cache: { path: 'c.json', pth: 1 } })).toEqual([
      '$.cache.pth',
    ]);
    expect(configProblems({ ...EMPTY, cache: { path: 'c.json' } })).toEqual([]);
  });

  it('resolves the option first, then the configuration, else none', () => {
    expect(resolveCachePath(undefined, undefined)).toBeUndefined();
    expect(resolveCachePath(false, { path: '/a.json' })).toBeUndefined();
    expect(resolveCachePath(undefined, false)).toBeUndefined();
    expect(resolveCachePath(undefined, { path: '/a.json' })).toBe('/a.json');
    expect(resolveCachePath({ path: '/b.json' }, { path: '/a.json' })).toBe('/b.json');
  });

  it('gives the CLI the user cache directory unless --no-cache or the configuration decides', () => {
    const env = { XDG_CACHE_HOME: '/x/cache', HOME: '/home/u' };
    const plain = parseConfig(EMPTY);
    expect(cliCacheOption(false, plain, env)).toEqual({ path: '/x/cache/stepbind/catalogs.json' });
    expect(cliCacheOption(true, plain, env)).toBe(false);
    expect(cliCacheOption(false, parseConfig({ ...EMPTY, cache: false }), env)).toBeUndefined();
    expect(cliCacheOption(false, parseConfig({ ...EMPTY, cache: { path: '/c.json' } }), env)).toBe(
      undefined,
    );
    expect(cliCacheOption(true, parseConfig({ ...EMPTY, cache: { path: '/c.json' } }), env)).toBe(
      false,
    );
  });
});
