/**
 * The `ops` server the adapter tests run a framework against: a real stdio testkit server with
 * `fixture`, its audit trail, and the runtime closed (every child gone) after each test.
 */
import { McpRuntime } from '@stepbind/runtime';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type ServerFixture,
} from '@stepbind/testkit';
import { rm } from 'node:fs/promises';
import { afterEach } from 'vitest';
import { expectTestEra } from './era.js';
import { eventLog, type EventLog } from './events.js';
import { expectGone } from './processes.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An open runtime over one `ops` server, its events and the tools its server was called with. */
export interface Ops {
  readonly runtime: McpRuntime;
  readonly log: EventLog;
  readonly calls: () => Promise<(string | undefined)[]>;
}

/** Opens a runtime over `ops` serving `fixture`; closed and checked after the test. */
export async function openOps(label: string, fixture: ServerFixture): Promise<Ops> {
  const auditPath = tempAuditPath(label);
  const log = eventLog();
  const runtime = await McpRuntime.open(
    { mcpServers: { ops: stdioServerParams({ scenario: 'fixture', fixture, auditPath }) } },
    { onEvent: log.onEvent, listChangedDebounceMs: 10 },
  );
  const pids = runtime.pids();
  cleanups.push(async () => {
    await runtime.close();
    expectGone(pids);
    await rm(auditPath, { force: true });
  });
  expectTestEra(runtime, ['ops']);
  return {
    runtime,
    log,
    calls: async () =>
      (await readAuditTrail(auditPath)).filter((e) => e.method === 'tools/call').map((e) => e.tool),
  };
}

const opsTool = (name: string): Record<string, unknown> => ({
  name,
  description: `The ${name} tool.`,
  inputSchema: { type: 'object', properties: { env: { type: 'string' } } },
});

/**
 * The release tools `plan`, `deploy` and `report` answering with `calls`. No revision token, so
 * the catalog is unproven and every tool (none says `readOnlyHint`) needs an approval under the
 * default `unproven-writes`. Calling `plan` switches to generation 1, which adds `rollback`.
 */
export function releaseFixture(calls: NonNullable<ServerFixture['calls']>): ServerFixture {
  const tools = [opsTool('plan'), opsTool('deploy'), opsTool('report')];
  return {
    generations: [{ pages: [{ tools }] }, { pages: [{ tools: [...tools, opsTool('rollback')] }] }],
    calls,
    triggers: [{ on: { method: 'tools/call', tool: 'plan' }, setGeneration: 1, notify: 'after' }],
  };
}
