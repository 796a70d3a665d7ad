import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { JournalRecord } from '@stepbind/binding';
import {
  McpRuntime,
  openSqliteJournal,
  type JournalDriver,
  type RuntimeEvent,
} from '@stepbind/runtime';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  tempDir,
  type ServerFixture,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { verifyReceipts } from '../../src/cli/receipts.js';
import { WRITE, fixtureTool } from '../support/fixtures.js';
import { context, record } from '../support/journal.js';
import { trackRuntimes } from '../support/runtimes.js';
import { AVAILABLE_DRIVERS, REQUIRED_DRIVERS } from './drivers.js';

const HOLDER = fileURLToPath(new URL('./busy/lock-holder.mjs', import.meta.url));
const { runtimes, pids, auditFiles } = trackRuntimes();
const FIXTURE: ServerFixture = {
  generations: [{ pages: [{ tools: [fixtureTool('send', WRITE)] }] }],
};

/** [writer, reader] pairs of two different drivers, both available (none on Node 20). */
const PAIRS: [JournalDriver, JournalDriver][] = [
  ['node:sqlite', 'better-sqlite3'],
  ['better-sqlite3', 'node:sqlite'],
];
const both = AVAILABLE_DRIVERS.length === 2;
// CI requires both drivers: then a Node with one of them fails here instead of skipping.
const run = both || REQUIRED_DRIVERS.length >= 2 ? describe : describe.skip;

async function open(path: string, driver: JournalDriver, auditPath: string) {
  const events: RuntimeEvent[] = [];
  const runtime = await McpRuntime.open(
    { mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) } },
    { approval: 'none', onEvent: (e) => events.push(e), journal: { path, driver } },
  );
  runtimes.push(runtime);
  return { runtime, events };
}

run('one journal file, two SQLite drivers', () => {
  it('has both drivers under this Node', () => {
    expect(AVAILABLE_DRIVERS).toEqual(['node:sqlite', 'better-sqlite3']);
  });

  it.each(PAIRS)(
    'a journal written on %s is opened, recovered, replayed and verified on %s',
    async (writer, reader) => {
      using dir = tempDir('cross-driver');
      const path = join(dir.path, 'journal.db');
      const auditPath = tempAuditPath('cross-driver');
      auditFiles.push(auditPath);
      const first = await open(path, writer, auditPath);
      expect(first.runtime.status().journal).toMatchObject({ kind: 'sqlite', driver: writer });
      {
        await using step = await first.runtime.captureBinding();
        for (const key of ['k1', 'k2', 'k3']) {
          await step.prepareCall('s__send').run({ input: key }, { idempotencyKey: key });
        }
      }
      await first.runtime.journal.prune();
      await first.runtime.close();
      // A key a dead process of the writer left SENT: the reader's open recovers it.
      const dead = spawnSync(
        process.execPath,
        ['-e', 'process.stdout.write(String(process.pid))'],
        {
          encoding: 'utf8',
        },
      );
      const owner = `${hostname()}:${dead.stdout}:${randomUUID()}`;
      const store = openSqliteJournal({ path, driver: writer });
      await store.insert(
        record('lost', {
          owner,
          state: 'SENT',
          leaseExpiresAt: Date.now() + 3_600_000,
          context: context('send'),
        }),
      );
      await store.close();

      const second = await open(path, reader, auditPath);
      expect(second.runtime.status().journal).toMatchObject({
        kind: 'sqlite',
        location: path,
        driver: reader,
      });
      const recovered = second.events.find(
        (e): e is Extract<RuntimeEvent, { type: 'journal-recovered' }> =>
          e.type === 'journal-recovered',
      );
      expect(recovered?.journal.driver).toBe(reader);
      expect(recovered?.records.map((r: JournalRecord) => [r.key, r.state])).toEqual([
        ['lost', 'OUTCOME_UNKNOWN'],
      ]);
      {
        await using step = await second.runtime.captureBinding();
        const again = await step
          .prepareCall('s__send')
          .run({ input: 'k2' }, { idempotencyKey: 'k2' });
        expect(again.replayed).toBe(true);
      }
      expect((await second.runtime.journal.verify()).ok).toBe(true);
      const sends = (await readAuditTrail(auditPath)).filter(
        (e) => e.method === 'tools/call' && e.tool === 'send',
      );
      expect(sends).toHaveLength(3);
      await second.runtime.close();
      // And back: the writer's driver verifies what the reader appended.
      const report = await verifyReceipts(path, false, undefined, writer);
      expect(report.code).toBe(0);
      expect(report.stdout).toContain(`driver: ${writer} (SQLite `);
      const json = JSON.parse((await verifyReceipts(path, true, undefined, reader)).stdout) as {
        ok: boolean;
        driver: string;
        sqliteVersion: string;
      };
      expect(json).toMatchObject({ ok: true, driver: reader });
      expect(json.sqliteVersion).toMatch(/^3\./);
    },
  );

  it.each(PAIRS)(
    'a process on %s holding the lock makes a store on %s wait, then find its claim (no double claim)',
    async (holderDriver, storeDriver) => {
      using dir = tempDir('cross-driver');
      const path = join(dir.path, 'journal.db');
      await openSqliteJournal({ path, driver: storeDriver }).close();
      const store = openSqliteJournal({ path, driver: storeDriver });
      const child = spawn(process.execPath, [HOLDER, path, holderDriver, 'k'], {
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      pids.add(child.pid ?? -1);
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      try {
        expect((await lines.next()).value, stderr).toBe('locked');
        let settled = false;
        const claim = store.insert(record('k')).finally(() => (settled = true));
        // The holder's transaction is still open: the claim waits, it does not fail or win.
        await new Promise<void>((resolve) => setImmediate(resolve));
        expect(settled).toBe(false);
        child.stdin.end('release\n');
        expect((await lines.next()).value, stderr).toBe('released');
        expect(await claim).toBe(false);
        expect((await store.get('k'))?.owner).toBe('other:1:owner');
      } finally {
        child.stdin.end();
        if (child.exitCode === null) await once(child, 'exit');
        await store.close();
      }
    },
  );
});
