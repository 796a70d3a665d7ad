import { toToolResult, type McpBinding } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import {
  createInMemoryFleet,
  scriptedTool,
  type InMemoryFleet,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { failure } from './support/errors.js';
import { FakeClock } from './support/clock.js';
import { expectTestEra } from './support/era.js';
import { eventLog, firstEvents, nextEvent, type EventLog } from './support/events.js';
import { callsOf as calls, listsOf as lists, received, serverClosed } from './support/fleet.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function setup(
  servers: Record<string, ScriptedServerOptions>,
  overrides: Record<string, Record<string, unknown>> = {},
  options: Parameters<typeof McpRuntime.open>[1] = {},
): Promise<{ fleet: InMemoryFleet; runtime: McpRuntime; log: EventLog }> {
  const fleet = createInMemoryFleet(servers);
  const log = eventLog();
  cleanups.push(() => fleet.close());
  const runtime = await McpRuntime.open(fleet.config(overrides), {
    connect: fleet.connect,
    approval: 'none',
    onEvent: log.onEvent,
    ...options,
  });
  cleanups.push(() => runtime.close());
  expectTestEra(runtime);
  return { fleet, runtime, log };
}

const isCall = (e: { method: string }): boolean => e.method === 'tools/call';
const isCancel = (e: { method: string }): boolean => e.method === 'notifications/cancelled';

function names(binding: McpBinding): string[] {
  return binding.tools.map((t) => t.name);
}

describe('McpRuntime bindings (in-memory servers)', () => {
  it('publishes every tool of every server as server__tool', async () => {
    const { runtime } = await setup({ a: { scenario: 'normal' }, b: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    expect(names(binding)).toEqual(['a__alpha', 'a__beta', 'a__gamma', 'b__alpha', 'b__beta']);
    expect(binding.servers.map((s) => [s.name, s.bound])).toEqual([
      ['a', true],
      ['b', true],
    ]);
    expect(Object.isFrozen(binding)).toBe(true);
  });

  it('rejects a prepared call after its revision is bumped, and never runs prepare or sends it', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    const call = binding.prepareCall('a__alpha');
    fleet.server('a').replaceCatalog([[scriptedTool('alpha'), scriptedTool('omega')]]);
    expect(await runtime.hardRefresh('a')).toBe(true);
    let prepared = false;
    const error = await failure(
      call.run(
        {},
        {
          prepare: () => {
            prepared = true;
          },
        },
      ),
    );
    expect(error.code).toBe('STALE_CATALOG');
    expect(error.detail).toMatchObject({ server: 'a', capturedRevision: 1, currentRevision: 2 });
    expect(prepared).toBe(false);
    expect(calls(fleet, 'a')).toEqual([]);
    await using next = await runtime.captureBinding();
    expect(names(next)).toEqual(['a__alpha', 'a__omega']);
    expect((await next.prepareCall('a__omega').run({})).receipt.revision).toBe(2);
    expect(calls(fleet, 'a')).toEqual(['omega']);
  });

  it('keeps revision and binding when a hard refresh finds the same catalog', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    expect(await runtime.hardRefresh('a')).toBe(false);
    await binding.prepareCall('a__beta').run({});
    expect(calls(fleet, 'a')).toEqual(['beta']);
  });

  it('makes a hard refresh wait for prepare to finish, even when prepare throws', async () => {
    const { fleet, runtime, log } = await setup({ a: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    const call = binding.prepareCall('a__alpha');
    let enter!: () => void;
    const entered = new Promise<void>((r) => (enter = r));
    let fail!: (e: Error) => void;
    const gate = new Promise<never>((_, reject) => (fail = reject));
    const running = call.run(
      {},
      {
        prepare: async () => {
          enter();
          await gate;
        },
      },
    );
    await entered;
    fleet.server('a').replaceCatalog([[scriptedTool('alpha')]]);
    const listsBefore = lists(fleet, 'a');
    const relisted = nextEvent(log, 'discovery-page', (e) => e.server === 'a');
    let refreshed = false;
    const refresh = runtime.hardRefresh('a').then((changed) => {
      refreshed = true;
      return changed;
    });
    // The re-list runs outside the lock; the swap must then wait for the read hold of prepare.
    await relisted;
    expect(lists(fleet, 'a')).toBeGreaterThan(listsBefore);
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(refreshed).toBe(false);
    fail(new Error('approval denied'));
    const error = await failure(running);
    expect(error.code).toBe('TOOL_DENIED');
    expect(await refresh).toBe(true);
    expect(calls(fleet, 'a')).toEqual([]);
  });

  it('makes a hard refresh wait for a tools/call in flight (the read lock spans the call)', async () => {
    const { fleet, runtime, log } = await setup({ a: { scenario: 'single', callDelayMs: 150 } });
    await using binding = await runtime.captureBinding();
    let called = false;
    const running = binding
      .prepareCall('a__alpha')
      .run({})
      .then((r) => {
        called = true;
        return r;
      });
    await received(fleet, 'a', isCall);
    expect(calls(fleet, 'a')).toEqual(['alpha']);
    fleet.server('a').replaceCatalog([[scriptedTool('alpha')]]);
    const listsBefore = lists(fleet, 'a');
    const relisted = nextEvent(log, 'discovery-page', (e) => e.server === 'a');
    let refreshedWhileCalling: boolean | undefined;
    const refresh = runtime.hardRefresh('a').then((changed) => {
      refreshedWhileCalling = !called;
      return changed;
    });
    await relisted;
    expect(lists(fleet, 'a')).toBeGreaterThan(listsBefore);
    const { receipt } = await running;
    expect(await refresh).toBe(true);
    expect(refreshedWhileCalling).toBe(false);
    expect(receipt.revision).toBe(1);
  });

  it('keeps the captured client, catalog and authority after a refresh publishes a new set', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    await using old = await runtime.captureBinding();
    const call = old.prepareCall('a__alpha');
    // A new identity for "a" (new args) makes the next set start a new connection.
    runtime.updateConfig(fleet.config({ a: { args: ['a', 'v2'] } }));
    await using fresh = await runtime.captureBinding();
    expect(fleet.instances('a')).toHaveLength(2);
    expect(names(fresh)).toEqual(['a__alpha', 'a__beta']);
    expect(names(old)).toEqual(['a__alpha', 'a__beta']);
    const { receipt } = await call.run({});
    expect(receipt.generation).toBe(
      old.servers[0]?.bound === true ? old.servers[0].generation : -1,
    );
    const [first, second] = fleet.instances('a');
    expect(first?.audit.filter((e) => e.method === 'tools/call').map((e) => e.tool)).toEqual([
      'alpha',
    ]);
    expect(second?.audit.filter((e) => e.method === 'tools/call')).toEqual([]);
  });

  it('never re-routes a prepared call after its captured connection closed', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    await using old = await runtime.captureBinding();
    const call = old.prepareCall('a__alpha');
    await fleet.crash('a');
    await using fresh = await runtime.captureBinding();
    expect(fleet.instances('a')).toHaveLength(2);
    const error = await failure(call.run({}));
    expect(error.code).toBe('CONNECTION_CLOSED');
    expect(calls(fleet, 'a')).toEqual([]);
    await fresh.prepareCall('a__alpha').run({});
    expect(fleet.instances('a')[1]?.audit.some((e) => e.tool === 'alpha')).toBe(true);
  });

  it('coalesces 100 concurrent markDirty + refreshIfDirty into at most 2 rebuilds', async () => {
    const { runtime } = await setup({ a: { scenario: 'single' } });
    const before = runtime.rebuilds;
    await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        runtime.markDirty(`burst-${i}`);
        await runtime.refreshIfDirty();
      }),
    );
    expect(runtime.rebuilds - before).toBeGreaterThanOrEqual(1);
    expect(runtime.rebuilds - before).toBeLessThanOrEqual(2);
    expect(runtime.dirty).toBe(false);
  });

  it('leaves a cancelled refresh pending', async () => {
    const { runtime } = await setup({ a: { scenario: 'single', pageDelayMs: 200 } });
    runtime.markDirty('test');
    const controller = new AbortController();
    const pending = runtime.refreshIfDirty({ signal: controller.signal });
    controller.abort();
    const error = await failure(pending);
    expect(error.code).toBe('ABORTED');
    expect(runtime.dirty).toBe(true);
    expect(await runtime.refreshIfDirty()).toBe(true);
    expect(runtime.dirty).toBe(false);
  });

  it('keeps the old set serving when a required server fails at refresh, with a typed error', async () => {
    const { fleet, runtime } = await setup({
      a: { scenario: 'single' },
      b: { scenario: 'normal' },
    });
    await using old = await runtime.captureBinding();
    await fleet.crash('b');
    fleet.failNextConnect('b', true);
    const error = await failure(runtime.captureBinding());
    expect(error.code).toBe('REQUIRED_SERVERS_FAILED');
    expect(error.detail['servers']).toEqual(['b']);
    expect(error.message).toContain('b: SERVER_START_FAILED');
    expect(runtime.dirty).toBe(true);
    await old.prepareCall('a__alpha').run({});
    fleet.failNextConnect('b', false);
    await using recovered = await runtime.captureBinding();
    expect(names(recovered)).toContain('b__gamma');
  });

  it('rejects open with one error listing every failing required server', async () => {
    const fleet = createInMemoryFleet({
      a: { scenario: 'cycle' },
      b: { scenario: 'duplicate' },
      c: { scenario: 'single' },
    });
    cleanups.push(() => fleet.close());
    const error = await failure(McpRuntime.open(fleet.config(), { connect: fleet.connect }));
    expect(error.code).toBe('REQUIRED_SERVERS_FAILED');
    expect(error.detail['failures']).toEqual([
      expect.objectContaining({ server: 'a', code: 'CURSOR_REPEATED' }),
      expect.objectContaining({ server: 'b', code: 'DUPLICATE_TOOL_NAME' }),
    ]);
  });

  it('reports an optional server failure in status and events, never silently', async () => {
    const { runtime, log } = await setup(
      { a: { scenario: 'single' }, flaky: { scenario: 'repeat' } },
      { flaky: { required: false } },
    );
    await using binding = await runtime.captureBinding();
    expect(binding.servers.find((s) => s.name === 'flaky')).toMatchObject({
      bound: false,
      reason: 'failed',
      error: { code: 'CURSOR_REPEATED' },
    });
    expect(runtime.status().servers.find((s) => s.name === 'flaky')?.state).toBe('failed');
    expect(log.events.some((e) => e.type === 'server-failed' && e.server === 'flaky')).toBe(true);
  });

  it('fails capture with SERVER_NOT_READY when a server the step requires is left out', async () => {
    const { runtime } = await setup(
      { a: { scenario: 'single' }, flaky: { scenario: 'repeat' } },
      { flaky: { required: false } },
    );
    const error = await failure(runtime.captureBinding({ requiredServers: ['flaky'] }));
    expect(error.code).toBe('SERVER_NOT_READY');
  });

  it('makes the next capture see list_changed tools while an old prepared call is refused unsent', async () => {
    const clock = new FakeClock();
    const { fleet, runtime, log } = await setup(
      { a: { scenario: 'single' } },
      {},
      { listChangedDebounceMs: 20, clock },
    );
    await using old = await runtime.captureBinding();
    const call = old.prepareCall('a__beta');
    const server = fleet.server('a');
    server.replaceCatalog([[scriptedTool('alpha'), scriptedTool('beta'), scriptedTool('delta')]]);
    const noticed = nextEvent(log, 'list-changed', (e) => e.server === 'a');
    await server.notifyListChanged();
    await noticed;
    const swapped = nextEvent(log, 'catalog-swapped', (e) => e.server === 'a');
    clock.advance(20);
    await swapped;
    await runtime.whenIdle();
    expect(runtime.status().servers[0]?.revision).toBe(2);
    expect((await failure(call.run({}))).code).toBe('STALE_CATALOG');
    await using next = await runtime.captureBinding();
    expect(names(next)).toContain('a__delta');
    expect(calls(fleet, 'a')).toEqual([]);
  });

  it('coalesces a burst of list_changed notifications into one hard refresh', async () => {
    const clock = new FakeClock();
    const { fleet, runtime, log } = await setup(
      { a: { scenario: 'single' } },
      {},
      { listChangedDebounceMs: 50, clock },
    );
    const server = fleet.server('a');
    const before = lists(fleet, 'a');
    server.replaceCatalog([[scriptedTool('alpha')]]);
    await Promise.all(Array.from({ length: 10 }, () => server.notifyListChanged()));
    await firstEvents(log, 'list-changed', 10);
    // Every notification arrived inside the quiet period: one debounce timer, nothing re-listed.
    expect(clock.pending).toBe(1);
    expect(lists(fleet, 'a')).toBe(before);
    const swapped = nextEvent(log, 'catalog-swapped', (e) => e.server === 'a');
    clock.advance(50);
    await swapped;
    await runtime.whenIdle();
    expect(lists(fleet, 'a') - before).toBe(1);
    expect(log.count('catalog-swapped')).toBe(1);
    expect(clock.pending).toBe(0);
  });

  it('validates arguments against the frozen input schema before sending anything', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    const error = await failure(binding.prepareCall('a__alpha').run({ input: 42 }));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(calls(fleet, 'a')).toEqual([]);
    expect(toToolResult(error).content[0].text).toMatch(/do not match the tool's input schema/);
  });

  it('refuses unknown model names and calls from a released binding', async () => {
    const { runtime } = await setup({ a: { scenario: 'single' } });
    const binding = await runtime.captureBinding();
    expect(() => binding.prepareCall('a__nope')).toThrow(
      expect.objectContaining({ code: 'UNKNOWN_TOOL' }),
    );
    const call = binding.prepareCall('a__alpha');
    binding.release();
    expect((await failure(call.run({}))).code).toBe('BINDING_RELEASED');
  });

  it('refuses calls of a step captured under an older policy epoch, and revoked tools', async () => {
    const { runtime, fleet } = await setup({ a: { scenario: 'single' } });
    await using old = await runtime.captureBinding();
    await runtime.setPolicyEpoch(1);
    const denied = await failure(old.prepareCall('a__alpha').run({}));
    expect(denied.code).toBe('TOOL_DENIED');
    expect(denied.detail['reason']).toBe('policy-epoch');
    await using next = await runtime.captureBinding();
    expect(next.policyEpoch).toBe(1);
    await runtime.revokeTool('a', 'beta');
    expect((await failure(next.prepareCall('a__beta').run({}))).detail['reason']).toBe('revoked');
    expect((await next.prepareCall('a__alpha').run({})).receipt.policyEpoch).toBe(1);
    expect(calls(fleet, 'a')).toEqual(['alpha']);
  });

  it('requires an approval (ctx.approve() in prepare) for non-read tools of unproven catalogs', async () => {
    const { fleet, runtime } = await setup(
      { a: { scenario: 'single' } },
      {},
      { approval: 'unproven-writes' },
    );
    await using binding = await runtime.captureBinding();
    const error = await failure(binding.prepareCall('a__alpha').run({}));
    expect(error.code).toBe('APPROVAL_REQUIRED');
    expect(error.message).toMatch(/ctx\.approve\(\)/);
    expect(error.message).toMatch(/"approval": "none"/);
    expect(toToolResult(error).content[0].text).toMatch(/needs an approval/);
    // A hook that returns without approving is not an approval.
    const seen: boolean[] = [];
    const unapproved = await failure(
      binding
        .prepareCall('a__alpha')
        .run({}, { prepare: (ctx) => void seen.push(ctx.approvalRequired) }),
    );
    expect(unapproved.code).toBe('APPROVAL_REQUIRED');
    expect(seen).toEqual([true]);
    expect(calls(fleet, 'a')).toEqual([]);
    await binding.prepareCall('a__alpha').run({}, { prepare: (ctx) => ctx.approve() });
    expect(calls(fleet, 'a')).toEqual(['alpha']);
  });

  it('asks for approvals by default, per server: "none" opts out and "all-writes" covers proven catalogs', async () => {
    const { fleet, runtime } = await setup(
      {
        plain: { scenario: 'single' },
        optout: { scenario: 'single' },
        proven: { scenario: 'revision-consistent' },
      },
      { optout: { approval: 'none' }, proven: { approval: 'all-writes' } },
      { approval: undefined },
    );
    await using binding = await runtime.captureBinding();
    expect((await failure(binding.prepareCall('plain__alpha').run({}))).code).toBe(
      'APPROVAL_REQUIRED',
    );
    await binding.prepareCall('optout__alpha').run({});
    expect(binding.servers.find((s) => s.name === 'proven')).toMatchObject({
      catalogState: 'ELIGIBLE',
    });
    const all = await failure(binding.prepareCall('proven__alpha').run({}));
    expect(all.code).toBe('APPROVAL_REQUIRED');
    expect(all.detail['approval']).toBe('all-writes');
    expect(calls(fleet, 'plain')).toEqual([]);
    expect(calls(fleet, 'optout')).toEqual(['alpha']);
    expect(calls(fleet, 'proven')).toEqual([]);
  });

  it('closes retired connections only when the last binding that captured them is released', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    const old = await runtime.captureBinding();
    runtime.updateConfig(fleet.config({ a: { args: ['a', 'v2'] } }));
    await using fresh = await runtime.captureBinding();
    expect(fresh.servers).toHaveLength(1);
    expect(runtime.status().liveConnections).toBe(2);
    const [first] = fleet.instances('a');
    if (first === undefined) throw new Error('server "a" never started');
    const retired = serverClosed(first);
    old.release();
    await retired;
    expect(runtime.status().liveConnections).toBe(1);
  });

  it('times out a slow call, sends notifications/cancelled and names server and tool', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single', callDelayMs: 5_000 } });
    await using binding = await runtime.captureBinding();
    const error = await failure(binding.prepareCall('a__alpha').run({}, { timeoutMs: 50 }));
    expect(error.code).toBe('TIMEOUT');
    expect(error.detail).toMatchObject({ server: 'a', tool: 'alpha' });
    await received(fleet, 'a', isCancel);
  });

  it('cancels a call with its signal and sends notifications/cancelled', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single', callDelayMs: 5_000 } });
    await using binding = await runtime.captureBinding();
    const controller = new AbortController();
    const running = binding.prepareCall('a__alpha').run({}, { signal: controller.signal });
    await received(fleet, 'a', isCall);
    expect(calls(fleet, 'a')).toEqual(['alpha']);
    controller.abort();
    expect((await failure(running)).code).toBe('ABORTED');
    await received(fleet, 'a', isCancel);
  });

  it('rejects a call in flight with OUTCOME_UNKNOWN (delivery sent) when the runtime closes', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single', callDelayMs: 5_000 } });
    const binding = await runtime.captureBinding();
    const running = binding.prepareCall('a__alpha').run({});
    await received(fleet, 'a', isCall);
    expect(calls(fleet, 'a')).toEqual(['alpha']);
    await runtime.close();
    const error = await failure(running);
    expect(error.code).toBe('OUTCOME_UNKNOWN');
    expect(error.detail['delivery']).toBe('sent');
  });

  it('reports an already aborted signal as ABORTED, not as a refused prepare hook', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    const error = await failure(
      binding.prepareCall('a__alpha').run({}, { signal: AbortSignal.abort() }),
    );
    expect(error.code).toBe('ABORTED');
    expect(calls(fleet, 'a')).toEqual([]);
  });

  it('neither leaks abort listeners nor cancels finished calls when one signal serves many calls', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    const session = new AbortController();
    for (let i = 0; i < 25; i++)
      await binding.prepareCall('a__alpha').run({}, { signal: session.signal });
    session.abort();
    await runtime.hardRefresh('a');
    expect(fleet.audit('a').filter((e) => e.method === 'notifications/cancelled')).toEqual([]);
  });

  it('carries new timeouts and limits over to a reused connection', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single', callDelayMs: 300 } });
    runtime.updateConfig(fleet.config({ a: { callTimeoutMs: 50 } }));
    await using binding = await runtime.captureBinding();
    expect(fleet.instances('a')).toHaveLength(1);
    expect((await failure(binding.prepareCall('a__alpha').run({}))).code).toBe('TIMEOUT');
    runtime.updateConfig(fleet.config({ a: { limits: { maxTools: 1 } } }));
    expect((await failure(runtime.refreshIfDirty())).message).toContain('TOOL_LIMIT');
  });

  it('publishes nothing when a refresh is cancelled while it waits for calls in flight', async () => {
    const { runtime } = await setup({ a: { scenario: 'single' } });
    await using binding = await runtime.captureBinding();
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    let entered!: () => void;
    const inPrepare = new Promise<void>((resolve) => (entered = resolve));
    const running = binding.prepareCall('a__alpha').run(
      {},
      {
        prepare: async () => {
          entered();
          await held;
        },
      },
    );
    await inPrepare;
    await runtime.setPolicyEpoch(1); // every catalog must be re-published: a write lock is needed
    const controller = new AbortController();
    const refresh = runtime.refreshIfDirty({ signal: controller.signal });
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    controller.abort();
    expect((await failure(refresh)).code).toBe('ABORTED');
    expect(runtime.dirty).toBe(true);
    expect(runtime.status().servers[0]?.generation).toBe(1);
    finish();
    await running.catch(() => undefined);
  });

  it('keeps serving and re-publishing a server after acceptIdentityChange', async () => {
    const { runtime } = await setup({ a: { scenario: 'single' } });
    runtime.acceptIdentityChange('a');
    await using first = await runtime.captureBinding();
    await runtime.setPolicyEpoch(1);
    await using second = await runtime.captureBinding();
    expect(second.policyEpoch).toBe(1);
    expect(await runtime.hardRefresh('a')).toBe(false);
    expect(first.servers[0]?.bound).toBe(true);
  });

  it('keeps a superseded catalog SUPERSEDED while a step holds it and RETIRED once released', async () => {
    const { fleet, runtime } = await setup({ a: { scenario: 'single' } });
    const old = await runtime.captureBinding();
    const before = runtime.registry.current('a', 'default');
    expect(before?.generation).toBe(1);
    fleet.server('a').replaceCatalog([[scriptedTool('alpha')]]);
    expect(await runtime.hardRefresh('a')).toBe(true);
    expect(runtime.registry.current('a', 'default')?.generation).toBe(2);
    expect(before && runtime.registry.lifecycleOf(before)).toBe('SUPERSEDED');
    old.release();
    expect(before && runtime.registry.lifecycleOf(before)).toBe('RETIRED');
  });

  it('never binds a set that a refresh superseded while the capture waited for optional servers', async () => {
    const { fleet, runtime } = await setup(
      { a: { scenario: 'single' }, slow: { scenario: 'normal', pageDelayMs: 300 } },
      { slow: { required: false } },
      { optionalGraceMs: 2_000 },
    );
    runtime.updateConfig(fleet.config({ slow: { required: false, args: ['slow', 'v2'] } }));
    await runtime.refreshIfDirty();
    const capturing = runtime.captureBinding();
    runtime.updateConfig(
      fleet.config({ a: { args: ['a', 'v2'] }, slow: { required: false, args: ['slow', 'v2'] } }),
    );
    await runtime.refreshIfDirty();
    await using binding = await capturing;
    expect(binding.servers.find((s) => s.name === 'a')?.bound).toBe(true);
    expect(runtime.status().setId).toBeGreaterThanOrEqual(3);
    await binding.prepareCall('a__alpha').run({});
    expect(fleet.instances('a')[1]?.audit.some((e) => e.tool === 'alpha')).toBe(true);
  });

  it('makes close idempotent and fails later work with RUNTIME_CLOSED', async () => {
    const { runtime } = await setup({ a: { scenario: 'single' } });
    const binding = await runtime.captureBinding();
    const call = binding.prepareCall('a__alpha');
    await Promise.all([runtime.close(), runtime.close()]);
    expect(runtime.status().liveConnections).toBe(0);
    expect((await failure(runtime.captureBinding())).code).toBe('RUNTIME_CLOSED');
    expect((await failure(call.run({}))).code).toBe('CONNECTION_CLOSED');
  });
});
