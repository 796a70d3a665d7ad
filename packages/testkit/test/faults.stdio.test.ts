import { McpRuntime, type McpRuntimeOptions } from '@stepbind/runtime';
import {
  createEventLog,
  isProcessAlive,
  readAuditTrail,
  scriptedTestEra,
  scriptedTool,
  stdioServerParams,
  tempAudit,
  type AuditEntry,
  type EventLog,
  type ScriptedServerOptions,
  type TempAudit,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import {
  calls,
  fixtureServer,
  listings,
  pages,
  RESTARTED_AFTER_PAGE_2,
  toolNames,
  withoutStalePage3,
} from './support/faults.js';

// The fault scenarios that need real processes: the same runtime against scripted stdio servers.

describe('fault suite over real stdio servers', () => {
  const runtimes: McpRuntime[] = [];
  const pids = new Set<number>();
  const trails: TempAudit[] = [];
  afterEach(async () => {
    for (const runtime of runtimes.splice(0)) {
      for (const pid of runtime.pids()) pids.add(pid);
      await runtime.close();
    }
    await Promise.all(trails.splice(0).map((trail) => trail.dispose()));
    expect([...pids].filter((pid) => isProcessAlive(pid))).toEqual([]);
    pids.clear();
  });

  async function openStdio(
    options: Omit<ScriptedServerOptions, 'auditPath'>,
    runtimeOptions: McpRuntimeOptions = {},
  ): Promise<{ runtime: McpRuntime; audit: () => Promise<AuditEntry[]>; log: EventLog }> {
    const trail = tempAudit('faults');
    trails.push(trail);
    const auditPath = trail.path;
    const log = createEventLog();
    const runtime = await McpRuntime.open(
      { mcpServers: { a: stdioServerParams({ ...options, auditPath }) } },
      { approval: 'none', onEvent: log.onEvent, ...runtimeOptions },
    );
    runtimes.push(runtime);
    // The modern-era project runs this suite through the 2026-07-28 front: never a fallback.
    expect(runtime.status().servers[0]?.era).toBe(scriptedTestEra());
    return { runtime, audit: () => readAuditTrail(auditPath), log };
  }

  it('source revision changes across pages (stdio): restart, then the catalog is proven at the new revision', async () => {
    const { runtime, audit } = await openStdio({ scenario: 'revision-changing' });
    await using step = await runtime.captureBinding();
    expect(step.servers[0]).toMatchObject({
      bound: true,
      catalogState: 'ELIGIBLE',
      sourceRevision: 'rev-2',
    });
    expect(toolNames(step)).toEqual(['a__alpha', 'a__beta', 'a__gamma']);
    expect(listings(await audit())).toEqual([
      'list(null)@0',
      'list(c1)@0',
      'list(null)@0',
      'list(c1)@0',
      'list(c2)@0',
      'list(null)@0',
    ]);
  });

  it('list_changed after page 2 (stdio): the hard refresh restarts and publishes the new catalog whole', async () => {
    const { runtime, audit } = await openStdio(
      fixtureServer({
        generations: [
          { pages: pages(['alpha'], ['beta'], ['gamma']) },
          { pages: pages(['alpha'], ['beta', 'delta'], ['gamma', 'epsilon']) },
        ],
        triggers: [{ on: { method: 'tools/list', nth: 5 }, setGeneration: 1, notify: 'after' }],
      }),
      { listChangedDebounceMs: 10 },
    );
    expect(await runtime.hardRefresh('a')).toBe(true);
    await runtime.whenIdle();
    await using step = await runtime.captureBinding();
    expect(toolNames(step)).toEqual(['a__alpha', 'a__beta', 'a__delta', 'a__gamma', 'a__epsilon']);
    expect(withoutStalePage3(listings(await audit())).slice(0, 8)).toEqual(RESTARTED_AFTER_PAGE_2);
  });

  it('cursor cycle announced by list_changed (stdio): the debounced re-list fails with CURSOR_REPEATED and the old catalog keeps serving', async () => {
    const { runtime, audit, log } = await openStdio(
      fixtureServer({
        generations: [
          { pages: pages(['plan'], ['deploy']) },
          {
            pages: [
              { tools: [scriptedTool('plan')] },
              { tools: [scriptedTool('deploy')] },
              { tools: [scriptedTool('rollback')], nextPage: 1 },
            ],
          },
        ],
        triggers: [
          { on: { method: 'tools/call', tool: 'plan' }, setGeneration: 1, notify: 'after' },
        ],
      }),
      { listChangedDebounceMs: 10 },
    );
    await using step = await runtime.captureBinding();
    const failed = log.next('hard-refresh-failed');
    await step.prepareCall('a__plan').run({});
    expect((await failed).error.code).toBe('CURSOR_REPEATED');
    await runtime.whenIdle();
    // Nothing was swapped, so the step is still current and its next call runs.
    await step.prepareCall('a__deploy').run({});
    const trail = await audit();
    expect(listings(trail)).toEqual([
      'list(null)@0',
      'list(c1)@0',
      'list(null)@1',
      'list(c2)@1',
      'list(c3)@1',
    ]);
    expect(calls(trail)).toEqual(['plan', 'deploy']);
  });
});
