import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createEventLog, readAuditTrail, tempDir, type TempDir } from '@stepbind/testkit';
import { McpRuntime, type RuntimeEvent } from '../../src/index.js';
import { FakeClock, whenArmed } from '../support/clock.js';
import { fileState } from '../support/audit.js';

/**
 * Listing freshness of modern-era servers over real stdio children (DESIGN §10.1, "Listing
 * freshness"): the servers log every `tools/list` they receive to a file, so "no request" is
 * counted where it would arrive. Time is a fake clock: TTLs pass without waiting.
 */

const SDK2 = fileURLToPath(new URL('../../../testkit/dist/era/sdk2-server.js', import.meta.url));
const RAW = fileURLToPath(new URL('../../../testkit/dist/era/raw-server.js', import.meta.url));

/** `tools/list` requests the server(s) logging to `file` received. */
function lists(file: string): number {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return 0;
  }
  return text
    .split('\n')
    .filter((line) => line !== '')
    .filter((line) => (JSON.parse(line) as { method?: unknown }).method === 'tools/list').length;
}

interface Sdk2Entry {
  readonly ttls: string;
  readonly scopes?: string;
  readonly audience?: string;
  readonly tools?: { readonly deny: readonly string[] };
}

/** A config with `s` (the SDK 2.4.0 server, 6 tools in 3 pages) and `o`, the "other" server. */
function config(dir: TempDir, s: Sdk2Entry, other = 1): unknown {
  return {
    mcpServers: {
      s: {
        command: process.execPath,
        // 4 generated tools + `change` and `ask`: 6 tools in 3 pages.
        args: [SDK2, '4', '2', s.ttls],
        env: {
          SDK2_SERVER_LOG: dir.file('s.log'),
          ...(s.scopes === undefined ? {} : { SDK2_SERVER_SCOPES: s.scopes }),
        },
        approval: 'none',
        ...(s.audience === undefined ? {} : { audience: s.audience }),
        ...(s.tools === undefined ? {} : { tools: s.tools }),
      },
      // Its env changes on each reload: a config reload where another server changed.
      o: {
        command: process.execPath,
        args: [RAW, 'modern'],
        env: { GENERATION: String(other) },
        approval: 'none',
      },
    },
  };
}

async function open(
  clock: FakeClock,
  cfg: unknown,
  onEvent?: (e: RuntimeEvent) => void,
): Promise<McpRuntime> {
  return McpRuntime.open(cfg, { clock, ...(onEvent === undefined ? {} : { onEvent }) });
}

const statusOf = (runtime: McpRuntime, name: string) =>
  runtime.status().servers.find((s) => s.name === name);

describe('listing freshness of modern-era servers (ttlMs / cacheScope per page)', () => {
  it('within the smallest page TTL a config-reload refresh sends no tools/list; once it passes, it lists', async () => {
    await using dir = tempDir('listing-cache');
    const clock = new FakeClock();
    const log = createEventLog();
    // Page 2's TTL is the smallest: a client that kept page 1's 60 s would still reuse at 5 s.
    const s = { ttls: '60000,5000,30000' };
    const runtime = await open(clock, config(dir, s), log.onEvent);
    try {
      expect(lists(dir.file('s.log'))).toBe(3);
      expect(statusOf(runtime, 's')?.listing).toEqual({
        fresh: true,
        expiresInMs: 5000,
        scope: 'public',
      });
      const before = statusOf(runtime, 's');
      await using step = await runtime.captureBinding();

      clock.advance(4999);
      runtime.updateConfig(config(dir, s, 2));
      const reused = log.next('listing-reused');
      expect(await runtime.refreshIfDirty()).toBe(true);
      expect(await reused).toMatchObject({
        server: 's',
        ageMs: 4999,
        remainingMs: 1,
        scope: 'public',
      });
      expect(lists(dir.file('s.log'))).toBe(3);
      // The same catalog stays published: nothing bumps, a step captured before still calls.
      expect(statusOf(runtime, 's')).toMatchObject({
        generation: before?.generation,
        revision: before?.revision,
        pid: before?.pid,
      });
      const { result } = await step.prepareCall('s__echo').run({ text: 'hi' });
      expect(result.content).toEqual([{ type: 'text', text: 'echo {"text":"hi"}' }]);

      clock.advance(1);
      expect(statusOf(runtime, 's')?.listing).toEqual({
        fresh: false,
        expiresInMs: 0,
        scope: 'public',
        reason: 'expired',
      });
      const reusedBefore = log.events.filter((e) => e.type === 'listing-reused').length;
      runtime.updateConfig(config(dir, s, 3));
      expect(await runtime.refreshIfDirty()).toBe(true);
      expect(lists(dir.file('s.log'))).toBe(6);
      expect(log.events.filter((e) => e.type === 'listing-reused').length).toBe(reusedBefore);
      // An unchanged re-list is the same catalog: the revision does not move; fresh again.
      expect(statusOf(runtime, 's')?.revision).toBe(before?.revision);
      expect(statusOf(runtime, 's')?.listing).toEqual({
        fresh: true,
        expiresInMs: 5000,
        scope: 'public',
      });
    } finally {
      await runtime.close();
    }
  });

  it('a page with ttlMs 0 in the middle makes the whole listing uncacheable', async () => {
    await using dir = tempDir('listing-cache');
    const clock = new FakeClock();
    const s = { ttls: '60000,0,60000' };
    const runtime = await open(clock, config(dir, s));
    try {
      expect(statusOf(runtime, 's')?.listing).toMatchObject({
        fresh: false,
        expiresInMs: 0,
        reason: 'not-cacheable',
      });
      clock.advance(1);
      runtime.updateConfig(config(dir, s, 2));
      await runtime.refreshIfDirty();
      expect(lists(dir.file('s.log'))).toBe(6);
    } finally {
      await runtime.close();
    }
  });

  it('an explicit hardRefresh always asks the server, fresh listing or not', async () => {
    await using dir = tempDir('listing-cache');
    const clock = new FakeClock();
    const runtime = await open(clock, config(dir, { ttls: '60000' }));
    try {
      expect(statusOf(runtime, 's')?.listing?.fresh).toBe(true);
      expect(await runtime.hardRefresh('s')).toBe(false);
      expect(lists(dir.file('s.log'))).toBe(6);
    } finally {
      await runtime.close();
    }
  });

  it('a changed tool filter or policy epoch re-lists a reused server within its TTL', async () => {
    await using dir = tempDir('listing-cache');
    const clock = new FakeClock();
    const s = { ttls: '60000' };
    const runtime = await open(clock, config(dir, s));
    try {
      runtime.updateConfig(config(dir, { ...s, tools: { deny: ['t1'] } }));
      await runtime.refreshIfDirty();
      expect(lists(dir.file('s.log'))).toBe(6);
      {
        await using step = await runtime.captureBinding();
        expect(step.tools.map((t) => t.name)).not.toContain('s__t1');
      }
      await runtime.setPolicyEpoch(1);
      expect(statusOf(runtime, 's')?.listing?.reason).toBe('policy-epoch');
      await runtime.refreshIfDirty();
      expect(lists(dir.file('s.log'))).toBe(9);
      expect(runtime.registry.current('s', 'default')?.policyEpoch).toBe(1);
    } finally {
      await runtime.close();
    }
  });

  for (const scopes of ['private', 'public'] as const) {
    it(`a ${scopes} listing is not carried to a changed audience: the server is listed again`, async () => {
      await using dir = tempDir('listing-cache');
      const clock = new FakeClock();
      const s = { ttls: '60000', scopes };
      const runtime = await open(clock, config(dir, s));
      try {
        expect(statusOf(runtime, 's')?.listing).toMatchObject({ fresh: true, scope: scopes });
        // Same audience and principal: reused.
        runtime.updateConfig(config(dir, s, 2));
        await runtime.refreshIfDirty();
        expect(lists(dir.file('s.log'))).toBe(3);
        runtime.updateConfig(config(dir, { ...s, audience: 'team-b' }, 2));
        await runtime.refreshIfDirty();
        expect(lists(dir.file('s.log'))).toBe(6);
        expect(runtime.registry.current('s', 'team-b')?.tools.length).toBe(6);
      } finally {
        await runtime.close();
      }
    });
  }

  it('a page without cacheScope makes the listing private', async () => {
    await using dir = tempDir('listing-cache');
    const clock = new FakeClock();
    const runtime = await open(clock, config(dir, { ttls: '60000', scopes: 'public,none' }));
    try {
      expect(statusOf(runtime, 's')?.listing).toEqual({
        fresh: true,
        expiresInMs: 60000,
        scope: 'private',
      });
    } finally {
      await runtime.close();
    }
  });

  it('a list_changed on the listen stream invalidates a fresh listing at once: the next refresh lists again', async () => {
    await using dir = tempDir('listing-cache');
    const clock = new FakeClock();
    const log = createEventLog();
    const rawLog = dir.file('raw.log');
    const cfg = (generation: number): unknown => ({
      mcpServers: {
        s: {
          command: process.execPath,
          args: [RAW, 'modern'],
          env: { RAW_SERVER_LOG: rawLog },
          approval: 'none',
        },
        o: {
          command: process.execPath,
          args: [RAW, 'modern'],
          env: { GENERATION: String(generation) },
          approval: 'none',
        },
      },
    });
    const runtime = await McpRuntime.open(cfg(1), {
      clock,
      onEvent: log.onEvent,
      listChangedDebounceMs: 50,
    });
    try {
      // Page 1: 1 s public, page 2: 5 s private.
      expect(statusOf(runtime, 's')?.listing).toEqual({
        fresh: true,
        expiresInMs: 1000,
        scope: 'private',
      });
      expect(lists(rawLog)).toBe(2);
      runtime.updateConfig(cfg(2));
      await runtime.refreshIfDirty();
      expect(lists(rawLog)).toBe(2);
      const revision = statusOf(runtime, 's')?.revision;

      const changed = log.next('list-changed', (e) => e.server === 's');
      {
        await using step = await runtime.captureBinding();
        await step.prepareCall('s__change').run({});
      }
      await changed;
      // The debounced hard refresh has not fired (the fake clock did not move).
      expect(lists(rawLog)).toBe(2);
      expect(statusOf(runtime, 's')?.listing).toMatchObject({
        fresh: false,
        reason: 'list-changed',
      });

      runtime.updateConfig(cfg(3));
      await runtime.refreshIfDirty();
      expect(lists(rawLog)).toBe(4);
      // The new listing differs: the revision moves.
      expect(statusOf(runtime, 's')?.revision).toBe((revision ?? 0) + 1);
      await using after = await runtime.captureBinding();
      expect(after.tools.map((t) => t.name)).toContain('s__added');

      // The debounced hard refresh the notification armed still asks the server (never the cache).
      const done = runtime.whenIdle();
      clock.advance(50);
      await done;
      expect(lists(rawLog)).toBe(6);
    } finally {
      await runtime.close();
    }
  });
});

describe('the subscriptions/listen stream of a runtime on an injected clock', () => {
  it('re-opens an ended stream after a backoff armed on the runtime clock, not on real time', async () => {
    await using dir = tempDir('listen-clock');
    const clock = new FakeClock();
    const log = dir.file('raw.log');
    const listens = async (): Promise<number> =>
      (await readAuditTrail(log).catch(() => [])).filter((e) => e.method === 'subscriptions/listen')
        .length;
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          r: {
            command: process.execPath,
            args: [RAW, 'modern'],
            env: { RAW_SERVER_LOG: log },
            approval: 'none',
          },
        },
      },
      { clock },
    );
    try {
      // The stream is asked for before the listing, so it is in the log once open() resolved.
      expect(await listens()).toBe(1);
      const armed = whenArmed(clock, clock.pending + 1);
      await using step = await runtime.captureBinding();
      await step.prepareCall('r__echo').run({ endListen: true });
      // The re-listen backoff is a timer of the runtime's clock: nothing re-opens until it moves.
      await armed;
      expect(await listens()).toBe(1);
      clock.advance(30_000);
      await fileState(log, async () => ((await listens()) === 2 ? true : undefined), '2 listens');
    } finally {
      await runtime.close();
    }
  });
});
