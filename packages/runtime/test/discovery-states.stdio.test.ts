import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import {
  scriptedTool,
  stdioServerParams,
  tempAuditPath,
  type ServerFixture,
} from '@stepbind/testkit';
import { rm } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { expectGone } from './support/processes.js';
import { expectTestEra } from './support/era.js';
import { eventLog, firstEvents, type EventLog } from './support/events.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Opens a runtime over real stdio testkit servers: "ok" (required) and "bad" (optional). */
async function open(
  bad: ServerFixture,
): Promise<{ runtime: McpRuntime; events: RuntimeEvent[]; log: EventLog }> {
  const paths = [tempAuditPath('ok'), tempAuditPath('bad')];
  const [okPath = '', badPath = ''] = paths;
  const log = eventLog();
  const runtime = await McpRuntime.open(
    {
      mcpServers: {
        ok: stdioServerParams({ scenario: 'single', auditPath: okPath }),
        bad: {
          ...stdioServerParams({ scenario: 'fixture', fixture: bad, auditPath: badPath }),
          required: false,
        },
      },
    },
    { approval: 'none', onEvent: log.onEvent },
  );
  cleanups.push(async () => {
    const pids = runtime.pids();
    await runtime.close();
    expectGone(pids);
    for (const path of paths) await rm(path, { force: true });
  });
  expectTestEra(runtime, ['ok']);
  return { runtime, events: log.events, log };
}

/** Resolves once the optional server's start settled (its entry left `starting`). */
async function settled(runtime: McpRuntime): Promise<void> {
  await using binding = await runtime.captureBinding();
  void binding;
}

const states = (events: RuntimeEvent[], server: string): string[] =>
  events.flatMap((e) => (e.type === 'discovery-state' && e.server === server ? [e.state] : []));

describe('discovery states driven by the runtime (DESIGN §5), over real stdio servers', () => {
  it('shows a server that died mid-pagination as INCOMPLETE with the reason, in status and events', async () => {
    const { runtime, events, log } = await open({
      generations: [
        { pages: [{ tools: [scriptedTool('one')] }, { tools: [scriptedTool('two')] }] },
      ],
      triggers: [{ on: { method: 'tools/list', nth: 2 }, exit: 3 }],
    });
    await settled(runtime);
    await firstEvents(log, 'server-failed', 1, (e) => e.server === 'bad');
    expect(runtime.status().servers.find((s) => s.name === 'bad')?.state).toBe('failed');
    const bad = runtime.status().servers.find((s) => s.name === 'bad');
    expect(bad?.discovery?.state).toBe('INCOMPLETE');
    expect(bad?.discovery?.reason?.code).toBe('CONNECTION_CLOSED');
    expect(bad?.discovery?.reason?.message).toMatch(/bad/);
    expect(states(events, 'bad')).toEqual(['DISCOVERING', 'INCOMPLETE']);
    const incomplete = events.find(
      (e) => e.type === 'discovery-state' && e.server === 'bad' && e.state === 'INCOMPLETE',
    );
    expect(incomplete).toMatchObject({ reason: { code: 'CONNECTION_CLOSED' } });
    // The healthy server went the whole way.
    expect(runtime.status().servers.find((s) => s.name === 'ok')?.discovery).toEqual({
      state: 'UNVERSIONED_OBSERVATION',
    });
    expect(states(events, 'ok')).toEqual(['DISCOVERING', 'VALIDATING', 'UNVERSIONED_OBSERVATION']);
  });

  it('shows a server with an invalid catalog (a duplicate tool name) as QUARANTINED with the reason', async () => {
    const { runtime, events, log } = await open({
      generations: [
        { pages: [{ tools: [scriptedTool('same')] }, { tools: [scriptedTool('same')] }] },
      ],
    });
    await settled(runtime);
    await firstEvents(log, 'server-failed', 1, (e) => e.server === 'bad');
    expect(runtime.status().servers.find((s) => s.name === 'bad')?.state).toBe('failed');
    const bad = runtime.status().servers.find((s) => s.name === 'bad');
    expect(bad?.discovery).toMatchObject({
      state: 'QUARANTINED',
      reason: { code: 'DUPLICATE_TOOL_NAME' },
    });
    expect(states(events, 'bad')).toEqual(['DISCOVERING', 'QUARANTINED']);
  });

  it('moves a proven catalog to ELIGIBLE once it is published', async () => {
    const { runtime, events, log } = await open({
      generations: [{ revision: 'r1', pages: [{ tools: [scriptedTool('one')] }] }],
    });
    await settled(runtime);
    await firstEvents(log, 'server-ready', 1, (e) => e.server === 'bad');
    expect(runtime.status().servers.find((s) => s.name === 'bad')?.state).toBe('ready');
    expect(runtime.status().servers.find((s) => s.name === 'bad')?.discovery).toEqual({
      state: 'ELIGIBLE',
    });
    expect(states(events, 'bad')).toEqual([
      'DISCOVERING',
      'VALIDATING',
      'SNAPSHOT_PROVEN',
      'ELIGIBLE',
    ]);
  });
});
