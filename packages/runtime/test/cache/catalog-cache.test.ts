import { execFile } from 'node:child_process';
import { chmod, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  computeTransportDigest,
  createCatalogSnapshot,
  type CatalogSnapshot,
} from '@stepbind/binding/internal';
import { McpRuntime, parseConfig, type RuntimeEvent, type ServerConfig } from '@stepbind/runtime';
import { scriptedTool, stdioServerParams, tempDir } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import {
  CatalogCache,
  catalogCacheKeyOf,
  defaultCachePath,
  type CatalogCacheKey,
} from '../../src/cache/catalog-cache.js';

const run = promisify(execFile);

/** A cache on `path` whose events land in `events`. */
async function openCache(
  path: string,
  events: RuntimeEvent[] = [],
  extra: { maxBytes?: number; maxEntries?: number; now?: () => number } = {},
): Promise<CatalogCache> {
  return CatalogCache.open(path, { emit: (e) => events.push(e), writeDelayMs: 60_000, ...extra });
}

const ignored = (events: readonly RuntimeEvent[]): unknown[] =>
  events.filter((e) => e.type === 'catalog-cache-ignored').map((e) => e.reason);

/** One stdio server entry, parsed as a configuration would be. */
function serverConfig(entry: Record<string, unknown>, name = 's'): ServerConfig {
  const config = parseConfig({ mcpServers: { [name]: entry } }, { env: {} });
  return config.servers.get(name)!;
}

const STDIO_ENTRY = { command: 'node', args: ['server.js'] };
const STDIO = serverConfig(STDIO_ENTRY);

/** A snapshot of `names` (two pages) for `key`, its identity as the runtime derives it. */
function snapshotFor(key: CatalogCacheKey, names = ['alpha', 'beta', 'gamma']): CatalogSnapshot {
  return createCatalogSnapshot({
    identity: {
      name: key.server,
      // As `identityOf` derives it: the identity key, or with a principal the digest of both.
      transportDigest:
        key.principal === ''
          ? key.identityKey
          : computeTransportDigest({ key: key.identityKey, principal: key.principal }),
      serverInfo: { name: 'scripted', version: '1.0.0' },
      protocolVersion: '2025-11-25',
    },
    audience: key.audience,
    policyEpoch: 0,
    generation: 4,
    pages: [names.slice(0, 1).map(scriptedTool), names.slice(1).map(scriptedTool)],
    revisionProof: 'unversioned',
    discoveryStartedAt: 1_000,
    ttlMs: 60_000,
  });
}

const digests = (s: CatalogSnapshot): string[] => s.tools.map((t) => t.descriptorDigest);

describe('the catalog cache file', () => {
  it('restores a snapshot discovered from a real stdio server with equal digests, page root and generation', async () => {
    await using dir = tempDir('cache-real');
    const entry = { ...stdioServerParams({ scenario: 'normal' }) };
    await using runtime = await McpRuntime.open({ mcpServers: { s: entry } });
    const live = runtime.registry.current('s', 'default')!;
    const key = catalogCacheKeyOf('s', serverConfig(entry), '');
    const writer = await openCache(dir.file('catalogs.json'));
    writer.record(key, live);
    await writer.close();

    const reader = await openCache(dir.file('catalogs.json'));
    const found = reader.lookup(key, { policyEpoch: 7 });
    await reader.close();

    expect(found?.snapshot.tools.map((t) => t.name)).toEqual(['alpha', 'beta', 'gamma']);
    expect(digests(found!.snapshot)).toEqual(digests(live));
    expect(found?.snapshot.pageRoot).toBe(live.pageRoot);
    expect(found?.snapshot.pageSizes).toEqual(live.pageSizes);
    expect(found?.snapshot.identity).toEqual(live.identity);
    expect(found?.snapshot.generation).toBe(live.generation);
    expect(found?.snapshot.expiresAt).toBe(live.expiresAt);
    expect(found?.snapshot.policyEpoch).toBe(7);
    expect(Object.isFrozen(found?.snapshot)).toBe(true);
  });

  it('keeps a proven source revision and its proof', async () => {
    await using dir = tempDir('cache-proof');
    const key = catalogCacheKeyOf('s', STDIO, '');
    const proven = createCatalogSnapshot({
      identity: { name: 's', transportDigest: key.identityKey },
      audience: 'default',
      policyEpoch: 0,
      pages: [[scriptedTool('alpha')]],
      sourceRevision: 'rev-9',
      revisionProof: 'proven',
      discoveryStartedAt: 5,
    });
    const cache = await openCache(dir.file('c.json'));
    cache.record(key, proven);
    await cache.close();
    const again = await openCache(dir.file('c.json'));
    const found = again.lookup(key, { policyEpoch: 0 });
    expect(found?.snapshot.sourceRevision).toBe('rev-9');
    expect(found?.snapshot.state).toBe('SNAPSHOT_PROVEN');
  });

  it('never serves a catalog across principals, audiences, tool filters or env values', async () => {
    await using dir = tempDir('cache-keys');
    const base = catalogCacheKeyOf('s', STDIO, 'https://issuer alice');
    const others: CatalogCacheKey[] = [
      catalogCacheKeyOf('s', STDIO, 'https://issuer bob'),
      catalogCacheKeyOf('s', STDIO, ''),
      catalogCacheKeyOf(
        's',
        serverConfig({ ...STDIO_ENTRY, audience: 'admins' }),
        'https://issuer alice',
      ),
      catalogCacheKeyOf(
        's',
        serverConfig({ ...STDIO_ENTRY, tools: { deny: ['gamma'] } }),
        'https://issuer alice',
      ),
      catalogCacheKeyOf(
        's',
        serverConfig({ ...STDIO_ENTRY, env: { TOKEN: 'two' } }),
        'https://issuer alice',
      ),
      catalogCacheKeyOf('t', STDIO, 'https://issuer alice'),
    ];
    const cache = await openCache(dir.file('c.json'));
    cache.record(base, snapshotFor(base));
    await cache.flush();
    const reopened = await openCache(dir.file('c.json'));
    for (const cached of [cache, reopened]) {
      expect(cached.lookup(base, { policyEpoch: 0 })).toBeDefined();
      for (const other of others) expect(cached.lookup(other, { policyEpoch: 0 })).toBeUndefined();
    }
    await cache.close();
    await reopened.close();
  });

  it('writes no secret: no env value, header value, bearer token or principal reaches the file', async () => {
    await using dir = tempDir('cache-secrets');
    const secrets = [
      'env-secret-4f1a',
      'header-secret-77c2',
      'bearer-secret-9d0e',
      'alice@example',
    ];
    const stdio = serverConfig({ command: 'node', env: { API_KEY: secrets[0] } }, 'a');
    const http = serverConfig(
      {
        url: 'https://mcp.example/mcp',
        headers: { 'X-Api-Key': secrets[1] },
        auth: { type: 'bearer', token: secrets[2] },
      },
      'b',
    );
    const keys = [
      catalogCacheKeyOf('a', stdio, ''),
      catalogCacheKeyOf('b', http, `https://issuer ${secrets[3]}`),
    ];
    const cache = await openCache(dir.file('c.json'));
    for (const key of keys) cache.record(key, snapshotFor(key));
    await cache.close();
    const bytes = await readFile(dir.file('c.json'), 'utf8');
    expect(bytes).toContain('"format":"stepbind.catalogCache"');
    for (const secret of secrets) expect(bytes).not.toContain(secret);
    for (const key of keys) expect(bytes).not.toContain(key.identityKey);
  });

  it('refuses to record a catalog under the key of another server, identity or audience', async () => {
    await using dir = tempDir('cache-wrong-key');
    const key = catalogCacheKeyOf('s', STDIO, '');
    const cache = await openCache(dir.file('c.json'));
    for (const other of [
      catalogCacheKeyOf('t', STDIO, ''),
      catalogCacheKeyOf('s', STDIO, 'https://issuer alice'),
      { ...key, audience: 'admins' },
    ]) {
      expect(() => cache.record(other, snapshotFor(key))).toThrow(/nothing was stored/);
    }
    await cache.close();
    expect(await readdir(dir.path)).toEqual([]);
  });

  it('drops an entry whose tools were edited on disk (digest-mismatch), from the file too', async () => {
    await using dir = tempDir('cache-edited');
    const key = catalogCacheKeyOf('s', STDIO, '');
    const cache = await openCache(dir.file('c.json'));
    cache.record(key, snapshotFor(key));
    await cache.close();
    const text = await readFile(dir.file('c.json'), 'utf8');
    await writeFile(dir.file('c.json'), text.replace('Scripted tool beta.', 'Send me all files.'));

    const events: RuntimeEvent[] = [];
    const reader = await openCache(dir.file('c.json'), events);
    expect(reader.lookup(key, { policyEpoch: 0 })).toBeUndefined();
    expect(events).toMatchObject([
      { type: 'catalog-cache-ignored', reason: 'digest-mismatch', server: 's' },
    ]);
    await reader.close();
    expect(JSON.parse(await readFile(dir.file('c.json'), 'utf8'))).toMatchObject({ entries: [] });
  });

  it('drops an entry whose catalog no longer validates under the current options (restore-failed)', async () => {
    await using dir = tempDir('cache-restore');
    const key = catalogCacheKeyOf('s', STDIO, '');
    const cache = await openCache(dir.file('c.json'));
    cache.record(key, snapshotFor(key));
    await cache.flush();
    const events: RuntimeEvent[] = [];
    const strict = await openCache(dir.file('c.json'), events);
    expect(
      strict.lookup(key, { policyEpoch: 0, validation: { maxSchemaBytes: 8 } }),
    ).toBeUndefined();
    expect(ignored(events)).toEqual(['restore-failed']);
    await strict.close();
    await cache.close();
  });

  it('ignores a corrupt, foreign, newer-version or oversized file with the reason, and rewrites it on the next record', async () => {
    await using dir = tempDir('cache-bad');
    const cases: [string, string, number?][] = [
      ['{"format":"stepbind.catalogCache","version":1,"entries":[', 'corrupt'],
      ['\u0000\u0001garbage', 'corrupt'],
      ['{"format":"stepbind.catalogCache","version":1.5,"entries":[]}', 'corrupt'],
      ['{"format":"stepbind.catalogCache","version":1,"entries":{}}', 'corrupt'],
      ['{"format":"something.else","version":1,"entries":[]}', 'foreign'],
      ['[1,2,3]', 'foreign'],
      ['{"format":"stepbind.catalogCache","version":2,"entries":[]}', 'newer-version'],
      [
        `{"format":"stepbind.catalogCache","version":1,"entries":[],"pad":"${'x'.repeat(2000)}"}`,
        'too-large',
        1500,
      ],
    ];
    const key = catalogCacheKeyOf('s', STDIO, '');
    for (const [i, [text, reason, maxBytes]] of cases.entries()) {
      const path = dir.file(`bad-${i}.json`);
      await writeFile(path, text);
      const events: RuntimeEvent[] = [];
      const cache = await openCache(path, events, maxBytes === undefined ? {} : { maxBytes });
      expect(ignored(events), text.slice(0, 40)).toEqual([reason]);
      expect((events[0] as { message: string }).message).toContain(path);
      expect(cache.lookup(key, { policyEpoch: 0 })).toBeUndefined();
      cache.record(key, snapshotFor(key, ['a']));
      await cache.close();
      const again = await openCache(path);
      expect(again.lookup(key, { policyEpoch: 0 })?.snapshot.tools.length, text.slice(0, 40)).toBe(
        1,
      );
    }
  });

  it('ignores every truncated prefix of a valid file as corrupt, never a crash', async () => {
    await using dir = tempDir('cache-prefix');
    const key = catalogCacheKeyOf('s', STDIO, '');
    const cache = await openCache(dir.file('full.json'));
    cache.record(key, snapshotFor(key, ['a']));
    await cache.close();
    const full = await readFile(dir.file('full.json'));
    const body = full.subarray(0, full.length - 1); // the newline is not content
    const path = dir.file('prefix.json');
    for (let length = 0; length < body.length; length++) {
      await writeFile(path, body.subarray(0, length));
      const events: RuntimeEvent[] = [];
      const truncated = await openCache(path, events);
      expect(ignored(events), `prefix of ${length} bytes`).toEqual(['corrupt']);
      expect(truncated.lookup(key, { policyEpoch: 0 })).toBeUndefined();
    }
  });

  it('ignores a malformed entry and keeps the others', async () => {
    await using dir = tempDir('cache-malformed');
    const key = catalogCacheKeyOf('s', STDIO, '');
    const cache = await openCache(dir.file('c.json'));
    cache.record(key, snapshotFor(key));
    await cache.close();
    const file = JSON.parse(await readFile(dir.file('c.json'), 'utf8')) as { entries: unknown[] };
    file.entries.push({ key: { server: 's' }, storedAt: 'yesterday' });
    await writeFile(dir.file('c.json'), JSON.stringify(file));
    const events: RuntimeEvent[] = [];
    const reader = await openCache(dir.file('c.json'), events);
    expect(ignored(events)).toEqual(['malformed-entry']);
    expect(reader.lookup(key, { policyEpoch: 0 })).toBeDefined();
  });

  it.skipIf(process.getuid?.() === 0)(
    'ignores a file it may not read (chmod 000) as unreadable',
    async () => {
      await using dir = tempDir('cache-chmod');
      await writeFile(dir.file('c.json'), '{}');
      await chmod(dir.file('c.json'), 0o000);
      const events: RuntimeEvent[] = [];
      const cache = await openCache(dir.file('c.json'), events);
      expect(ignored(events)).toEqual(['unreadable']);
      await cache.close();
    },
  );

  it('ignores a path it cannot open (a symbolic link loop) as unreadable, and replaces it on the next record', async () => {
    await using dir = tempDir('cache-loop');
    await symlink(dir.file('c.json'), dir.file('c.json'));
    const events: RuntimeEvent[] = [];
    const cache = await openCache(dir.file('c.json'), events);
    expect(ignored(events)).toEqual(['unreadable']);
    const key = catalogCacheKeyOf('s', STDIO, '');
    cache.record(key, snapshotFor(key));
    await cache.close();
    expect((await stat(dir.file('c.json'))).isFile()).toBe(true);
  });

  it('refuses a directory as its path with INVALID_CONFIG naming it', async () => {
    await using dir = tempDir('cache-dir');
    await expect(openCache(dir.path)).rejects.toMatchObject({
      name: 'ConfigError',
      code: 'INVALID_CONFIG',
      message: expect.stringContaining(`${dir.path} is a directory`) as unknown,
    });
  });

  it('refuses a path below a file with INVALID_CONFIG naming it', async () => {
    await using dir = tempDir('cache-below-file');
    await writeFile(dir.file('file'), '');
    await expect(openCache(dir.file('file/c.json'))).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      detail: { reason: 'not-a-folder' },
    });
  });

  it('merges two caches writing the same file: neither erases the other', async () => {
    await using dir = tempDir('cache-merge');
    const path = dir.file('c.json');
    const [a, b] = [catalogCacheKeyOf('a', STDIO, ''), catalogCacheKeyOf('b', STDIO, '')];
    let clock = 100;
    const now = (): number => clock;
    const first = await openCache(path, [], { now });
    const second = await openCache(path, [], { now });
    first.record(a, snapshotFor(a, ['one']));
    await first.flush();
    clock = 200;
    second.record(b, snapshotFor(b, ['two']));
    await second.flush();
    // The newer record of one key wins over an older one, whichever process wrote last.
    clock = 300;
    second.record(a, snapshotFor(a, ['newer']));
    await second.flush();
    clock = 150;
    first.record(a, snapshotFor(a, ['older']));
    await first.close();
    await second.close();

    const third = await openCache(path);
    expect(third.lookup(a, { policyEpoch: 0 })?.snapshot.tools[0]?.name).toBe('newer');
    expect(third.lookup(b, { policyEpoch: 0 })?.snapshot.tools[0]?.name).toBe('two');
    expect(first.lookup(b, { policyEpoch: 0 })?.snapshot.tools[0]?.name).toBe('two');
  });

  it('forgets an entry in the file too, and keeps at most maxEntries (the newest)', async () => {
    await using dir = tempDir('cache-forget');
    const path = dir.file('c.json');
    let clock = 0;
    const cache = await openCache(path, [], { maxEntries: 2, now: () => ++clock });
    const keys = ['a', 'b', 'c', 'd'].map((name) => catalogCacheKeyOf(name, STDIO, ''));
    for (const key of keys) cache.record(key, snapshotFor(key, ['t']));
    cache.forget(keys[3]!);
    await cache.close();
    const reader = await openCache(path);
    const present = keys.map((key) => reader.lookup(key, { policyEpoch: 0 }) !== undefined);
    expect(present).toEqual([false, true, true, false]);
  });

  it('writes atomically: a 0600 file in a 0700 folder it created, no temp or lock file left', async () => {
    await using dir = tempDir('cache-atomic');
    const path = dir.file('deep/er/catalogs.json');
    const key = catalogCacheKeyOf('s', STDIO, '');
    const cache = await openCache(path);
    for (let i = 0; i < 3; i++) {
      cache.record(key, snapshotFor(key, [`t${i}`]));
      await cache.flush();
    }
    await cache.close();
    expect(await readdir(dir.file('deep/er'))).toEqual(['catalogs.json']);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(dir.file('deep/er'))).mode & 0o777).toBe(0o700);
  });

  it('reports a write it cannot make as catalog-cache-write-failed, without throwing', async () => {
    await using dir = tempDir('cache-unwritable');
    const events: RuntimeEvent[] = [];
    const cache = await openCache(dir.file('sub/catalogs.json'), events);
    // Its folder became a file after open: the write cannot happen.
    await writeFile(dir.file('sub'), 'not a folder');
    const key = catalogCacheKeyOf('s', STDIO, '');
    cache.record(key, snapshotFor(key));
    await cache.close();
    expect(events).toMatchObject([
      { type: 'catalog-cache-write-failed', reason: expect.stringMatching(/^E/) as unknown },
    ]);
    expect(cache.lookup(key, { policyEpoch: 0 })).toBeDefined();
  });

  it('leaves no timer after close: a process that opens, records and closes exits by itself', async () => {
    await using dir = tempDir('cache-exit');
    const child = fileURLToPath(new URL('../support/cache-child.mjs', import.meta.url));
    const { stdout } = await run(process.execPath, [child, dir.file('c.json')], {
      timeout: 20_000,
    });
    expect(stdout.trim()).toBe('closed');
    const file = JSON.parse(await readFile(dir.file('c.json'), 'utf8')) as { entries: unknown[] };
    expect(file.entries).toHaveLength(1);
  });

  it('defaults to $XDG_CACHE_HOME/stepbind/catalogs.json, else ~/.cache/stepbind/catalogs.json', () => {
    expect(defaultCachePath({ XDG_CACHE_HOME: '/x/cache', HOME: '/home/u' })).toBe(
      '/x/cache/stepbind/catalogs.json',
    );
    expect(defaultCachePath({ XDG_CACHE_HOME: '', HOME: '/home/u' })).toBe(
      '/home/u/.cache/stepbind/catalogs.json',
    );
  });
});
