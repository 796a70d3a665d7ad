import {
  CatalogRegistry,
  createCatalogSnapshot,
  isStepbindError,
  toToolResult,
} from '@stepbind/binding/internal';
import {
  McpRuntime,
  type McpRuntimeOptions,
  type RuntimeEvent,
  type ServerConnector,
} from '@stepbind/runtime';
import {
  createEventLog,
  createInMemoryFleet,
  scriptedTestEra,
  scriptedTool,
  type EventLog,
  type InMemoryFleet,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import {
  calls,
  failure,
  fixtureServer,
  listings,
  pages,
  RESTARTED_AFTER_PAGE_2,
  toolNames,
  withoutStalePage3,
} from './support/faults.js';

// One deterministic scenario per fault the design names (issue 5, part 4). Each drives a whole
// McpRuntime against scripted servers and asserts the server's audit trail: what was listed, with
// which cursor, in which catalog generation, and that no refused call ever reached the server.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function openFleet(
  servers: Record<string, ScriptedServerOptions>,
  options: McpRuntimeOptions & {
    readonly wrapConnect?: (c: ServerConnector) => ServerConnector;
  } = {},
): Promise<{
  fleet: InMemoryFleet;
  runtime: McpRuntime;
  events: RuntimeEvent[];
  log: EventLog;
}> {
  const fleet = createInMemoryFleet(servers);
  cleanups.push(() => fleet.close());
  const log = createEventLog();
  const { wrapConnect, ...runtimeOptions } = options;
  const runtime = await McpRuntime.open(fleet.config(), {
    connect: wrapConnect === undefined ? fleet.connect : wrapConnect(fleet.connect),
    approval: 'none',
    onEvent: log.onEvent,
    ...runtimeOptions,
  });
  cleanups.push(() => runtime.close());
  // The modern-era project runs this suite through the 2026-07-28 front: never a fallback.
  const ready = runtime.status().servers.filter((s) => s.state === 'ready');
  expect(ready.map((s) => s.era)).toEqual(ready.map(() => scriptedTestEra()));
  return { fleet, runtime, events: log.events, log };
}

describe('fault suite (McpRuntime with in-memory scripted servers)', () => {
  it('list_changed after page 2: the enumeration restarts and the published catalog is the new one, whole', async () => {
    const { fleet, runtime, events } = await openFleet(
      {
        a: fixtureServer({
          generations: [
            { pages: pages(['alpha'], ['beta'], ['gamma']) },
            { pages: pages(['alpha'], ['beta', 'delta'], ['gamma', 'epsilon']) },
          ],
          // Requests 1–3 are the initial listing; request 5 is page 2 of the hard refresh.
          triggers: [{ on: { method: 'tools/list', nth: 5 }, setGeneration: 1, notify: 'after' }],
        }),
      },
      { listChangedDebounceMs: 10 },
    );
    await using before = await runtime.captureBinding();
    const stale = before.prepareCall('a__beta');

    expect(await runtime.hardRefresh('a')).toBe(true);
    await runtime.whenIdle();

    await using after = await runtime.captureBinding();
    expect(toolNames(after)).toEqual(['a__alpha', 'a__beta', 'a__delta', 'a__gamma', 'a__epsilon']);
    expect(runtime.registry.current('a', 'default')?.pageSizes).toEqual([1, 2, 2]);
    expect((await failure(stale.run({}))).code).toBe('STALE_CATALOG');
    const swaps = events.filter((e) => e.type === 'catalog-swapped');
    expect(swaps).toHaveLength(1);
    const audit = fleet.audit('a');
    expect(withoutStalePage3(listings(audit)).slice(0, 8)).toEqual(RESTARTED_AFTER_PAGE_2);
    expect(calls(audit)).toEqual([]);
  });

  it('list_changed followed by a stale-cursor error on page 3 restarts the enumeration instead of failing it (regression)', async () => {
    const { fleet, runtime, events } = await openFleet(
      {
        a: fixtureServer({
          generations: [
            { pages: pages(['alpha'], ['beta'], ['gamma']) },
            { pages: pages(['alpha'], ['beta', 'delta'], ['gamma', 'epsilon']) },
          ],
          // Request 6 is page 3 of the hard refresh: the server switches and notifies first, then
          // refuses the old cursor with -32602.
          triggers: [
            {
              on: { method: 'tools/list', nth: 6 },
              setGeneration: 1,
              stateChange: 'before',
              notify: 'before',
            },
          ],
        }),
      },
      { listChangedDebounceMs: 10 },
    );
    expect(await runtime.hardRefresh('a')).toBe(true);
    await runtime.whenIdle();
    expect(events.filter((e) => e.type === 'hard-refresh-failed')).toEqual([]);
    expect(runtime.registry.current('a', 'default')?.tools.map((t) => t.name)).toEqual([
      'alpha',
      'beta',
      'delta',
      'gamma',
      'epsilon',
    ]);
    expect(listings(fleet.audit('a')).slice(0, 9)).toEqual([
      'list(null)@0',
      'list(c1)@0',
      'list(c2)@0',
      'list(null)@0',
      'list(c1)@0',
      'list(c2)@0',
      'list(null)@1',
      'list(c3)@1',
      'list(c4)@1',
    ]);
  });

  it('A-B-A catalog change: each change gets a new generation, the page root returns, and the A-step call is stale', async () => {
    const { fleet, runtime } = await openFleet({
      a: fixtureServer({
        generations: [{ pages: pages(['alpha'], ['beta']) }, { pages: pages(['alpha', 'gamma']) }],
      }),
    });
    const first = runtime.registry.current('a', 'default');
    await using stepA = await runtime.captureBinding();
    const lateA = stepA.prepareCall('a__alpha');

    fleet.server('a').setGeneration(1);
    expect(await runtime.hardRefresh('a')).toBe(true);
    const second = runtime.registry.current('a', 'default');
    fleet.server('a').setGeneration(0);
    expect(await runtime.hardRefresh('a')).toBe(true);
    const third = runtime.registry.current('a', 'default');

    expect([first?.generation, second?.generation, third?.generation]).toEqual([1, 2, 3]);
    expect(third?.pageRoot).toBe(first?.pageRoot);
    expect(second?.pageRoot).not.toBe(first?.pageRoot);
    expect(runtime.status().servers[0]?.revision).toBe(3);
    // Same content as step A, but a later revision: the old step's call is refused unsent.
    expect((await failure(lateA.run({}))).code).toBe('STALE_CATALOG');
    await using stepA2 = await runtime.captureBinding();
    const { receipt } = await stepA2.prepareCall('a__alpha').run({});
    expect(receipt.generation).toBe(3);
    expect(receipt.descriptorDigest).toBe(lateA.descriptor.descriptorDigest);
    const audit = fleet.audit('a');
    expect(listings(audit)).toEqual([
      'list(null)@0',
      'list(c1)@0',
      'list(null)@1',
      'list(null)@0',
      'list(c1)@0',
    ]);
    expect(calls(audit)).toEqual(['alpha']);
  });

  it('notification after the enumeration ended: the debounced hard refresh publishes the change, never the older listing over it', async () => {
    const { fleet, runtime, events, log } = await openFleet(
      {
        a: fixtureServer({
          generations: [
            { pages: pages(['alpha'], ['beta']) },
            { pages: pages(['alpha'], ['beta', 'gamma']) },
            { pages: pages(['alpha', 'delta'], ['beta']) },
          ],
        }),
      },
      { listChangedDebounceMs: 10 },
    );
    const server = fleet.server('a');
    server.setGeneration(1);
    expect(await runtime.hardRefresh('a')).toBe(true);
    await using step = await runtime.captureBinding();
    const late = step.prepareCall('a__gamma');

    // The enumeration above is over; only now does the catalog change and say so.
    server.setGeneration(2);
    const delivered = log.next('list-changed');
    await server.notifyListChanged();
    await delivered;
    await runtime.whenIdle();

    const swaps = events.filter((e) => e.type === 'catalog-swapped');
    expect(swaps.map((e) => [e.generation, e.revision, e.cause])).toEqual([
      [2, 2, 'hard-refresh'],
      [3, 3, 'hard-refresh'],
    ]);
    await using next = await runtime.captureBinding();
    expect(toolNames(next)).toEqual(['a__alpha', 'a__delta', 'a__beta']);
    expect((await failure(late.run({}))).code).toBe('STALE_CATALOG');
    const audit = fleet.audit('a');
    expect(listings(audit)).toEqual([
      'list(null)@0',
      'list(c1)@0',
      'list(null)@1',
      'list(c2)@1',
      'list(null)@2',
      'list(c3)@2',
    ]);
    expect(calls(audit)).toEqual([]);
  });

  it('source revision changes across pages: the traversal is discarded and restarted, and the catalog is proven at the new revision', async () => {
    const { fleet, runtime } = await openFleet({ a: { scenario: 'revision-changing' } });
    const catalog = runtime.registry.current('a', 'default');
    expect(catalog?.state).toBe('ELIGIBLE');
    expect(catalog?.sourceRevision).toBe('rev-2');
    expect(catalog?.tools.map((t) => t.name)).toEqual(['alpha', 'beta', 'gamma']);
    // Page 2 carried rev-2 after page 1's rev-1: restart, then three pages and the proof re-read.
    expect(listings(fleet.audit('a'))).toEqual([
      'list(null)@0',
      'list(c1)@0',
      'list(null)@0',
      'list(c1)@0',
      'list(c2)@0',
      'list(null)@0',
    ]);
  });

  it('repeated cursor: the re-list fails with CURSOR_REPEATED, the cursor is not followed again, and the old catalog keeps serving', async () => {
    const { fleet, runtime } = await openFleet({ a: { scenario: 'single' } });
    await using step = await runtime.captureBinding();
    fleet
      .server('a')
      .replaceCatalog([
        { tools: [scriptedTool('alpha'), scriptedTool('omega')] },
        { tools: [], nextPage: 1 },
      ]);

    const error = await failure(runtime.hardRefresh('a'));
    expect(error.code).toBe('CURSOR_REPEATED');
    expect(error.detail).toMatchObject({ server: 'a', page: 1 });

    expect(runtime.registry.current('a', 'default')?.generation).toBe(1);
    await step.prepareCall('a__alpha').run({});
    await using next = await runtime.captureBinding();
    expect(toolNames(next)).toEqual(['a__alpha', 'a__beta']);
    const audit = fleet.audit('a');
    expect(listings(audit)).toEqual(['list(null)@0', 'list(null)@1', 'list(c1)@1']);
    expect(calls(audit)).toEqual(['alpha']);
  });

  it('cursor cycle: A→B→A is detected on the page that repeats A, before A is requested again', async () => {
    const { fleet, runtime } = await openFleet({ a: { scenario: 'single' } });
    fleet
      .server('a')
      .replaceCatalog([
        { tools: [scriptedTool('one')] },
        { tools: [scriptedTool('two')] },
        { tools: [scriptedTool('three')], nextPage: 1 },
      ]);

    const error = await failure(runtime.hardRefresh('a'));
    expect(error.code).toBe('CURSOR_REPEATED');
    expect(error.detail).toMatchObject({ server: 'a', page: 2 });

    await using step = await runtime.captureBinding();
    expect(toolNames(step)).toEqual(['a__alpha', 'a__beta']);
    expect(listings(fleet.audit('a'))).toEqual([
      'list(null)@0',
      'list(null)@1',
      'list(c1)@1',
      'list(c2)@1',
    ]);
  });

  it('same name with a different schema on another page: DUPLICATE_TOOL_NAME, nothing published, the old catalog keeps serving', async () => {
    const typed = (type: string) => ({
      name: 'alpha',
      inputSchema: { type: 'object', properties: { value: { type } } },
    });
    const { fleet, runtime, events } = await openFleet({ a: { scenario: 'single' } });
    await using step = await runtime.captureBinding();
    fleet.server('a').replaceCatalog([[typed('string')], [typed('integer')]]);

    const error = await failure(runtime.hardRefresh('a'));
    expect(error.code).toBe('DUPLICATE_TOOL_NAME');
    expect(error.detail).toMatchObject({ server: 'a', tool: 'alpha', page: 1 });

    expect(events.filter((e) => e.type === 'catalog-swapped')).toEqual([]);
    expect(runtime.status().servers[0]).toMatchObject({ generation: 1, revision: 1, tools: 2 });
    const { receipt } = await step.prepareCall('a__alpha').run({ input: 'still the old schema' });
    expect(receipt.generation).toBe(1);
    await using next = await runtime.captureBinding();
    expect(toolNames(next)).toEqual(['a__alpha', 'a__beta']);
    const audit = fleet.audit('a');
    expect(listings(audit)).toEqual(['list(null)@0', 'list(null)@1', 'list(c1)@1']);
    expect(calls(audit)).toEqual(['alpha']);
  });

  it('server identity change (serverInfo) on reconnect: refused with PUBLISH_CONFLICT identity-changed until acceptIdentityChange', async () => {
    const options: { scenario: 'single'; serverInfo: { name: string; version: string } } = {
      scenario: 'single',
      serverInfo: { name: 'files', version: '1.0.0' },
    };
    const { fleet, runtime } = await openFleet({ a: options });
    await fleet.crash('a');
    // The same command restarts, but now reports itself as a different server.
    options.serverInfo = { name: 'files', version: '2.0.0' };

    for (let attempt = 0; attempt < 2; attempt++) {
      const error = await failure(runtime.captureBinding());
      expect(error.code).toBe('PUBLISH_CONFLICT');
      expect(error.detail['reason']).toBe('identity-changed');
      expect(runtime.dirty).toBe(true);
    }
    expect(runtime.registry.current('a', 'default')?.identity.serverInfo?.version).toBe('1.0.0');

    runtime.acceptIdentityChange('a');
    await using step = await runtime.captureBinding();
    const published = runtime.registry.current('a', 'default');
    expect(published?.identity.serverInfo?.version).toBe('2.0.0');
    expect(published?.generation).toBe(2);
    await step.prepareCall('a__alpha').run({});

    const instances = fleet.instances('a');
    expect(instances).toHaveLength(4);
    // Every refused instance was listed but never called; only the accepted one ran the call.
    expect(instances.map((s) => [listings(s.audit).length, calls(s.audit)])).toEqual([
      [1, []],
      [1, []],
      [1, []],
      [1, ['alpha']],
    ]);
  });

  it('server identity change (transport) is a deliberate reconfiguration: published without acceptIdentityChange', async () => {
    const { fleet, runtime } = await openFleet({ a: { scenario: 'single' } });
    const before = runtime.registry.current('a', 'default');
    runtime.updateConfig(fleet.config({ a: { args: ['a', 'v2'] } }));
    await using step = await runtime.captureBinding();
    const after = runtime.registry.current('a', 'default');
    expect(after?.identity.transportDigest).not.toBe(before?.identity.transportDigest);
    expect(after?.generation).toBe(2);
    await step.prepareCall('a__beta').run({});
    expect(fleet.instances('a').map((s) => calls(s.audit))).toEqual([[], ['beta']]);
  });

  it('policy epoch change mid-step: the call is refused with TOOL_DENIED before prepare, and no tools/call is sent', async () => {
    const { fleet, runtime } = await openFleet({ a: { scenario: 'single' } });
    await using step = await runtime.captureBinding();
    const call = step.prepareCall('a__alpha');
    await runtime.setPolicyEpoch(1);

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
    expect(error.code).toBe('TOOL_DENIED');
    expect(error.detail).toMatchObject({
      reason: 'policy-epoch',
      capturedEpoch: 0,
      currentEpoch: 1,
    });
    expect(prepared).toBe(false);
    expect(calls(fleet.audit('a'))).toEqual([]);

    await using next = await runtime.captureBinding();
    expect(next.policyEpoch).toBe(1);
    const { receipt } = await next.prepareCall('a__alpha').run({});
    expect(receipt.policyEpoch).toBe(1);
    expect(runtime.registry.current('a', 'default')?.policyEpoch).toBe(1);
    const audit = fleet.audit('a');
    // The epoch change re-published the catalog under epoch 1 (one re-list), then the call ran.
    expect(listings(audit)).toEqual(['list(null)@0', 'list(null)@0']);
    expect(calls(audit)).toEqual(['alpha']);
  });

  it('registry CAS race: a refresh and a hard refresh build candidates against the same generation, and exactly one wins', async () => {
    let openGate: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    let gated = false;
    const { fleet, runtime, events } = await openFleet(
      { a: { scenario: 'single' } },
      {
        wrapConnect: (connect) => async (name, config, options) => {
          if (gated) await gate;
          return connect(name, config, options);
        },
      },
    );
    gated = true;
    // Candidate 1: a reconfiguration starts a new connection, expecting generation 1, and waits.
    runtime.updateConfig(fleet.config({ a: { args: ['a', 'v2'] } }));
    const refresh = failure(runtime.refreshIfDirty());
    // Candidate 2: the old connection is re-listed and published first, as generation 2.
    fleet.server('a').replaceCatalog([[scriptedTool('alpha'), scriptedTool('omega')]]);
    expect(await runtime.hardRefresh('a')).toBe(true);
    openGate();

    const error = await refresh;
    expect(error.code).toBe('PUBLISH_CONFLICT');
    expect(error.detail['reason']).toBe('generation');
    const current = runtime.registry.current('a', 'default');
    expect(current?.generation).toBe(2);
    expect(current?.tools.map((t) => t.name)).toEqual(['alpha', 'omega']);
    expect(runtime.registry.lastIssuedGeneration('a', 'default')).toBe(2);
    expect(events.filter((e) => e.type === 'refresh-failed')).toHaveLength(1);

    const [old, loser] = fleet.instances('a');
    expect(listings(old?.audit ?? [])).toEqual(['list(null)@0', 'list(null)@1']);
    expect(listings(loser?.audit ?? [])).toEqual(['list(null)@0']);
    expect(calls(fleet.audit('a'))).toEqual([]);
    // The losing refresh left the runtime dirty; the next capture retries and publishes.
    expect(runtime.dirty).toBe(true);
    await using step = await runtime.captureBinding();
    expect(runtime.registry.current('a', 'default')?.generation).toBe(3);
    expect(toolNames(step)).toEqual(['a__alpha', 'a__beta']);
  });

  it('registry CAS race, at the registry: two candidates expecting the same generation, exactly one is published', () => {
    const registry = new CatalogRegistry();
    const candidate = (tool: string) =>
      createCatalogSnapshot({
        identity: { name: 'a', transportDigest: 'sha256:t' },
        audience: 'default',
        policyEpoch: 0,
        pages: [[scriptedTool(tool)]],
        revisionProof: 'unversioned',
        discoveryStartedAt: 0,
      });
    const results = [candidate('x'), candidate('y')].map((c) => {
      try {
        return registry.publish(c, { expectedGeneration: 0 }).generation;
      } catch (error) {
        return isStepbindError(error) ? `${error.code}:${String(error.detail['reason'])}` : error;
      }
    });
    expect(results).toEqual([1, 'PUBLISH_CONFLICT:generation']);
    expect(registry.current('a', 'default')?.tools[0]?.name).toBe('x');
  });

  it('late call from an old planner step: STALE_CATALOG after a hard refresh, prepare never runs, zero tools/call from it', async () => {
    const { fleet, runtime } = await openFleet({ a: { scenario: 'single' } });
    await using planner = await runtime.captureBinding();
    const late = planner.prepareCall('a__beta');

    fleet
      .server('a')
      .replaceCatalog([[scriptedTool('alpha'), scriptedTool('beta'), scriptedTool('gamma')]]);
    expect(await runtime.hardRefresh('a')).toBe(true);
    await using executor = await runtime.captureBinding();
    await executor.prepareCall('a__gamma').run({});

    let prepared = false;
    const error = await failure(
      late.run(
        {},
        {
          prepare: () => {
            prepared = true;
          },
        },
      ),
    );
    expect(error.code).toBe('STALE_CATALOG');
    expect(error.detail).toMatchObject({ capturedRevision: 1, currentRevision: 2 });
    expect(prepared).toBe(false);
    expect(toToolResult(error).content[0].text).toMatch(/changed; this call was not run/);
    const audit = fleet.audit('a');
    expect(listings(audit)).toEqual(['list(null)@0', 'list(null)@1']);
    expect(calls(audit)).toEqual(['gamma']);
  });
});
