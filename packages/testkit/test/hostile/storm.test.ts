import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import { isProcessAlive, readAuditTrail, tempAuditPath } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../fixtures/hostile/storm-server.mjs', import.meta.url));
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

describe('hostile: a list_changed storm', () => {
  it('10,000 notifications during a slow re-list leave at most 2 re-lists after the storm', async () => {
    const auditPath = tempAuditPath('storm');
    cleanups.push(() => rm(auditPath, { force: true }));
    const count = 10_000;
    let seen = 0;
    let stormSeen: () => void = () => undefined;
    const allSeen = new Promise<void>((resolve) => (stormSeen = resolve));
    const events: RuntimeEvent[] = [];
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          s: { command: process.execPath, args: [script, auditPath, '150', String(count), '1000'] },
        },
      },
      {
        // The storm is the subject, not approvals (its readOnlyHint is an unproven catalog's claim).
        approval: 'none',
        listChangedDebounceMs: 20,
        onEvent: (event) => {
          events.push(event);
          // The storm's notifications plus the one sent after it moved its catalog.
          if (event.type === 'list-changed' && ++seen === count + 1) stormSeen();
        },
      },
    );
    cleanups.push(() => runtime.close());
    const pid = runtime.status().servers[0]?.pid;

    await using step = await runtime.captureBinding();
    await step.prepareCall('s__storm').run({});
    await allSeen;
    await runtime.whenIdle();

    const audit = await readAuditTrail(auditPath);
    const end = audit.findIndex((e) => (e as { event?: string }).event === 'storm-end');
    expect(end).toBeGreaterThan(0);
    const during = audit.slice(0, end).filter((e) => e.method === 'tools/list').length;
    const after = audit.slice(end).filter((e) => e.method === 'tools/list').length;
    // The initial listing; a re-list during the storm is usual but not owed: on a loaded machine the
    // whole storm can be read before the debounce fires (seen on Node 24 under load 14).
    expect(during).toBeGreaterThanOrEqual(1);
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(2);
    // The runtime converged on the catalog the server ended with.
    await using next = await runtime.captureBinding();
    expect(next.tools.map((t) => t.name)).toContain('s__gen1');
    await runtime.close();
    expect(pid === undefined || !isProcessAlive(pid)).toBe(true);
  });
});
