/**
 * A wall clock that jumps forward by the retention (issue 25, finding 4, one host): the SQLite
 * journal must not forget a key that just completed, neither while running (its clock is
 * monotonic from open) nor at the next open (the newest-write guard), or the key is sent again.
 * The jump is real to the code under test: `Date.now` is what moves.
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { McpRuntime } from '@stepbind/runtime';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type ServerFixture,
  tempDir,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WRITE } from '../support/fixtures.js';

const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [{ tools: [{ name: 'send', inputSchema: { type: 'object' }, annotations: WRITE }] }],
    },
  ],
};
const RETENTION_MS = 86_400_000;
const JUMP_MS = RETENTION_MS + 3_600_000;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function open(path: string, audit: string): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    {
      mcpServers: {
        s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath: audit }),
      },
    },
    { approval: 'none', journal: { path } },
  );
  cleanups.push(() => runtime.close());
  return runtime;
}

/** Moves this process's wall clock (`Date.now`) forward by `ms` from now on. */
function jumpWallClock(ms: number): void {
  const real = Date.now.bind(Date);
  vi.spyOn(Date, 'now').mockImplementation(() => real() + ms);
}

async function sends(audit: string): Promise<number> {
  return (await readAuditTrail(audit)).filter((e) => e.method === 'tools/call').length;
}

describe('the SQLite journal under a wall clock that jumps forward by the retention', () => {
  it('while running: pruning keeps the key that just completed, and its repeat replays', async () => {
    using dir = tempDir('jump');
    const audit = tempAuditPath('jump-running');
    cleanups.push(() => rmSync(audit, { force: true }));
    const runtime = await open(join(dir.path, 'journal.db'), audit);
    const step = await runtime.captureBinding();
    cleanups.push(() => step.release());
    await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1' });
    jumpWallClock(JUMP_MS);
    await runtime.journal.prune();
    expect((await runtime.journal.get('order-1'))?.state).toBe('COMPLETED');
    const again = await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1' });
    expect(again.replayed).toBe(true);
    expect(await sends(audit)).toBe(1);
  });

  it('at open: a journal reopened after the jump keeps the key that completed before it, and its repeat replays', async () => {
    using dir = tempDir('jump');
    const path = join(dir.path, 'journal.db');
    const audit = tempAuditPath('jump-open');
    cleanups.push(() => rmSync(audit, { force: true }));
    const first = await open(path, audit);
    {
      await using step = await first.captureBinding();
      await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-2' });
    }
    await first.close();
    jumpWallClock(JUMP_MS);
    // Opening prunes; then the repeat.
    const second = await open(path, audit);
    expect((await second.journal.get('order-2'))?.state).toBe('COMPLETED');
    await using step = await second.captureBinding();
    const again = await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-2' });
    expect(again.replayed).toBe(true);
    expect(await sends(audit)).toBe(1);
  });
});
