/**
 * Warm starts from the catalog cache and lazy servers (DESIGN §19.2, §19.3), against real stdio
 * children through the real SDK: what a step is shown before the live listing, what a provisional
 * call may run, and which processes exist when.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpRuntime, type McpRuntimeOptions } from '@stepbind/runtime';
import {
  isProcessAlive,
  readAuditTrail,
  stdioServerParams,
  type AuditEntry,
  type ServerFixture,
} from '@stepbind/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expectTestEra } from './support/era.js';
import { failure } from './support/errors.js';
import { eventLog, nextEvent, type EventLog } from './support/events.js';
import { expectGone, waitUntilGone } from './support/processes.js';

const tool = (name: string, description = `${name} things`): Record<string, unknown> => ({
  name,
  description,
  inputSchema: { type: 'object', properties: { value: { type: 'string' } } },
});

const runtimes: McpRuntime[] = [];
const pids = new Set<number>();
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-provisional-'));
});

afterEach(async () => {
  for (const r of runtimes.splice(0)) {
    for (const pid of r.pids()) pids.add(pid);
    await r.close();
  }
  expectGone(pids);
  pids.clear();
  await rm(dir, { recursive: true, force: true });
});

/** One server `s` playing the fixture at `fixture.json` (rewritten between runs; same identity). */
async function writeFixture(tools: Record<string, unknown>[], listDelayMs?: number): Promise<void> {
  const fixture: ServerFixture = {
    generations: [{ pages: [{ tools }] }],
    // A slow listing keeps the live catalog away while a step runs on the cached one.
    ...(listDelayMs === undefined
      ? {}
      : { triggers: [{ on: { method: 'tools/list' }, delayMs: listDelayMs }] }),
  };
  await writeFile(join(dir, 'fixture.json'), JSON.stringify(fixture));
}

interface Opened {
  readonly runtime: McpRuntime;
  readonly log: EventLog;
}

async function open(
  extra: Record<string, unknown> = {},
  options: McpRuntimeOptions = {},
): Promise<Opened> {
  const log = eventLog();
  const params = stdioServerParams({
    scenario: 'fixture',
    fixturePath: join(dir, 'fixture.json'),
    auditPath: join(dir, 'audit.jsonl'),
  });
  const runtime = await McpRuntime.open(
    { mcpServers: { s: { ...params, ...extra } } },
    {
      approval: 'none',
      cache: { path: join(dir, 'catalogs.json') },
      onEvent: log.onEvent,
      ...options,
    },
  );
  runtimes.push(runtime);
  return { runtime, log };
}

/** A first run that lists the server live and leaves its catalog in the cache. */
async function warmUp(tools: Record<string, unknown>[]): Promise<void> {
  await writeFixture(tools);
  const { runtime } = await open();
  await using step = await runtime.captureBinding();
  expect(step.servers[0]).toMatchObject({ name: 's', bound: true, provisional: false });
  await runtime.close();
}

const calls = async (): Promise<AuditEntry[]> =>
  (await readAuditTrail(join(dir, 'audit.jsonl'))).filter((e) => e.method === 'tools/call');

describe('warm start from the catalog cache (real stdio)', () => {
  it('shows the cached tools at once, refuses a changed and a vanished tool unsent, and runs an unchanged one on the live connection', async () => {
    await warmUp([tool('keep'), tool('change'), tool('vanish')]);
    // Between runs the server changed: one description edited, one tool gone, one added.
    await writeFixture(
      [tool('keep'), tool('change', 'changes other things now'), tool('added')],
      300,
    );
    const { runtime, log } = await open();
    expect(runtime.status().servers[0]).toMatchObject({ state: 'provisional' });
    const step = await runtime.captureBinding();
    expect(step.servers[0]).toMatchObject({ name: 's', bound: true, provisional: true });
    expect(step.tools.map((t) => t.name)).toEqual(['s__keep', 's__change', 's__vanish']);

    const confirmed = nextEvent(log, 'provisional-confirmed');
    const kept = await step.prepareCall('s__keep').run({ value: 'x' });
    expect(kept.replayed).toBe(false);
    expect((await confirmed).changedTools).toBe(2);

    const changed = await failure(step.prepareCall('s__change').run({ value: 'x' }));
    expect(changed.code).toBe('STALE_CATALOG');
    expect(changed.detail).toMatchObject({
      delivery: 'not-sent',
      provisional: true,
      reason: 'changed',
    });
    const vanished = await failure(step.prepareCall('s__vanish').run({}));
    expect(vanished.code).toBe('STALE_CATALOG');
    expect(vanished.detail).toMatchObject({ delivery: 'not-sent', reason: 'vanished' });
    step.release();

    // The audit trail of the live server: only the unchanged tool was ever called.
    expect((await calls()).map((e) => e.tool)).toEqual(['keep']);
    // The next step is live, with the new catalog, in the era the run is about.
    expectTestEra(runtime);
    await using next = await runtime.captureBinding();
    expect(next.servers[0]).toMatchObject({ provisional: false });
    expect(next.tools.map((t) => t.name)).toEqual(['s__keep', 's__change', 's__added']);
  });

  it('the receipt of a provisional call names the live catalog it ran under', async () => {
    await warmUp([tool('keep')]);
    const { runtime } = await open();
    await using step = await runtime.captureBinding();
    const { receipt } = await step.prepareCall('s__keep').run({});
    await using live = await runtime.captureBinding();
    const server = live.servers[0];
    expect(server?.bound === true && server.provisional).toBe(false);
    expect(receipt).toMatchObject({
      server: 's',
      generation: server?.bound === true ? server.generation : -1,
      revision: server?.bound === true ? server.revision : -1,
    });
  });

  it('refuses a keyed provisional call whose tool changed as not sent, so the key runs later', async () => {
    await warmUp([tool('write')]);
    await writeFixture([tool('write', 'writes differently')]);
    const { runtime } = await open({}, { journal: { path: join(dir, 'journal.db') } });
    const stale = await runtime.captureBinding();
    const error = await failure(
      stale.prepareCall('s__write').run({ value: 'a' }, { idempotencyKey: 'k1' }),
    );
    expect(error.code).toBe('STALE_CATALOG');
    expect(error.detail['delivery']).toBe('not-sent');
    stale.release();
    await using fresh = await runtime.captureBinding();
    const ran = await fresh.prepareCall('s__write').run({ value: 'a' }, { idempotencyKey: 'k1' });
    expect(ran.replayed).toBe(false);
    expect((await calls()).map((e) => e.tool)).toEqual(['write']);
  });

  it('bounds the wait for the live catalog by the call timeout: TIMEOUT, nothing sent', async () => {
    await warmUp([tool('slow')]);
    await writeFixture([tool('slow')], 5_000);
    const { runtime } = await open();
    await using step = await runtime.captureBinding();
    const error = await failure(step.prepareCall('s__slow').run({}, { timeoutMs: 100 }));
    expect(error.code).toBe('TIMEOUT');
    expect(error.detail).toMatchObject({ delivery: 'not-sent', provisional: true });
    expect(await calls()).toEqual([]);
  });

  it('a cancelled wait is ABORTED, nothing sent', async () => {
    await warmUp([tool('slow')]);
    await writeFixture([tool('slow')], 5_000);
    const { runtime } = await open();
    await using step = await runtime.captureBinding();
    const controller = new AbortController();
    const run = step.prepareCall('s__slow').run({}, { signal: controller.signal });
    controller.abort(new Error('user cancelled'));
    const error = await failure(run);
    expect(error.code).toBe('ABORTED');
    expect(error.detail['delivery']).toBe('not-sent');
  });

  it('a server whose start fails after a warm start: calls fail not-sent, the next capture fails SERVER_NOT_READY or REQUIRED_SERVERS_FAILED', async () => {
    await warmUp([tool('work')]);
    // Same identity (same command and args), but the fixture file is now unreadable JSON.
    await writeFile(join(dir, 'fixture.json'), '{ not json');
    const { runtime } = await open();
    const step = await runtime.captureBinding();
    expect(step.servers[0]).toMatchObject({ provisional: true });
    const error = await failure(step.prepareCall('s__work').run({}));
    expect(error.detail['delivery']).toBe('not-sent');
    step.release();
    const next = await runtime.captureBinding().then(
      () => undefined,
      (e: unknown) => e as { code: string },
    );
    expect(['SERVER_NOT_READY', 'REQUIRED_SERVERS_FAILED']).toContain(next?.code);
    expect(await calls()).toEqual([]);
  });
});

describe('lazy servers (real stdio)', () => {
  it('is not spawned until a step calls one of its tools, and stops again after idleTimeoutMs', async () => {
    await warmUp([tool('work'), tool('other')]);
    const { runtime, log } = await open({ start: 'lazy', idleTimeoutMs: 200 });
    expect(runtime.pids()).toEqual([]);
    expect(runtime.status().servers[0]).toMatchObject({
      state: 'provisional',
      provisional: { live: 'not-started' },
    });
    const step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toEqual(['s__work', 's__other']);
    expect(runtime.pids()).toEqual([]);
    await step.prepareCall('s__work').run({});
    const [pid] = runtime.pids();
    expect(pid).toBeDefined();
    expect(runtime.status().servers[0]?.state).toBe('ready');
    step.release();

    const stopped = await nextEvent(log, 'server-idle-stopped');
    expect(stopped).toMatchObject({ server: 's', idleTimeoutMs: 200 });
    if (pid !== undefined) await waitUntilGone(pid);
    expect(runtime.pids()).toEqual([]);
    expect(runtime.status()).toMatchObject({ liveConnections: 0 });
    expect(runtime.status().servers[0]).toMatchObject({ state: 'provisional' });

    // The next call spawns it again.
    await using again = await runtime.captureBinding();
    expect(again.servers[0]).toMatchObject({ provisional: true });
    await again.prepareCall('s__other').run({});
    expect(runtime.pids()).toHaveLength(1);
    expect(runtime.pids()[0]).not.toBe(pid);
    if (pid !== undefined) expect(isProcessAlive(pid)).toBe(false);
    expect((await calls()).map((e) => e.tool)).toEqual(['work', 'other']);
  });

  it('hardRefresh starts a lazy server and says whether its live catalog differs from the cached one', async () => {
    await warmUp([tool('work')]);
    const { runtime } = await open({ start: 'lazy' });
    expect(runtime.pids()).toEqual([]);
    expect(await runtime.hardRefresh('s')).toBe(false);
    expect(runtime.pids()).toHaveLength(1);
    expect(runtime.status().servers[0]?.state).toBe('ready');
  });

  it('without a cached catalog a lazy server starts at open', async () => {
    await writeFixture([tool('work')]);
    const { runtime } = await open({ start: 'lazy' });
    expect(runtime.pids()).toHaveLength(1);
    await using step = await runtime.captureBinding();
    expect(step.servers[0]).toMatchObject({ provisional: false });
  });

  it('closing a runtime with a lazy server never started leaves no process and no timer', async () => {
    await warmUp([tool('work')]);
    const { runtime } = await open({ start: 'lazy' });
    await runtime.close();
    expect(runtime.status().state).toBe('closed');
    expect(runtime.pids()).toEqual([]);
  });
});
