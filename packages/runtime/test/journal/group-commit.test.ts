/**
 * Group commit of the SQLite journal (DESIGN §21.1, `src/journal/sqlite-batch.ts`): the writes of
 * one turn share one transaction and one fsync, each resolves only after the commit that holds it
 * (so a call is sent only once its own `SENT` record is durable and visible to another
 * connection), a write that fails fails alone, and a write whose caller cancels while its group
 * waits for another process's lock is not written.
 */
import type { JournalRecord } from '@stepbind/binding';
import {
  McpRuntime,
  openSqliteJournal as openStore,
  type JournalDriver,
  type SqliteJournalOptions,
  type SqliteJournalStore,
} from '@stepbind/runtime';
import { readAuditTrail, stdioServerParams, tempAuditPath, tempDir } from '@stepbind/testkit';
import { afterEach, expect, it } from 'vitest';
import { fixtureTool, WRITE } from '../support/fixtures.js';
import { failure } from '../support/errors.js';
import { checkedAtResolve, context, receipt, record } from '../support/journal.js';
import { trackRuntimes } from '../support/runtimes.js';
import { holdLock } from './busy/hold.js';
import { describeEachDriver } from './drivers.js';

const { runtimes, pids, auditFiles } = trackRuntimes();
const stores: SqliteJournalStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

const IN_FLIGHT = 64;

describeEachDriver('group commit of the SQLite journal', (driver: JournalDriver) => {
  const open = (options: SqliteJournalOptions): SqliteJournalStore => {
    const store = openStore({ driver, ...options });
    stores.push(store);
    return store;
  };

  it(`commits the SENT records of ${IN_FLIGHT} keyed calls started together with fewer fsyncs than calls, each visible to another connection before its call is sent, and sends each key once`, async () => {
    using dir = tempDir('group-commit');
    const path = dir.file('journal.db');
    const sqlite = open({ path });
    const reader = open({ path, readOnly: true });
    const checked = checkedAtResolve(sqlite, reader);
    const auditPath = tempAuditPath('group-commit');
    auditFiles.push(auditPath);
    const fixture = { generations: [{ pages: [{ tools: [fixtureTool('send', WRITE)] }] }] };
    const runtime = await McpRuntime.open(
      { mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture, auditPath }) } },
      { approval: 'none', journal: { store: checked.store } },
    );
    runtimes.push(runtime);
    await using step = await runtime.captureBinding();
    const call = step.prepareCall('s__send');
    const before = { durable: sqlite.durableWrites, fsyncs: sqlite.fsyncs };

    const results = await Promise.all(
      Array.from({ length: IN_FLIGHT }, (_, i) => call.run({ i }, { idempotencyKey: `k${i}` })),
    );

    expect(results.every((r) => r.result.isError !== true && !r.replayed)).toBe(true);
    // Every SENT record durable, sharing fsyncs: one per group, not one per call.
    expect(sqlite.durableWrites - before.durable).toBe(IN_FLIGHT);
    expect(sqlite.fsyncs - before.fsyncs).toBeGreaterThanOrEqual(1);
    expect(sqlite.fsyncs - before.fsyncs).toBeLessThan(IN_FLIGHT);
    expect(sqlite.largestGroup).toBeGreaterThan(1);
    // Each was committed (seen by another connection) when it resolved, before its send.
    expect(checked.checked()).toBe(IN_FLIGHT);
    expect(checked.unseen).toEqual([]);
    const sends = (await readAuditTrail(auditPath)).filter((e) => e.method === 'tools/call');
    expect(sends).toHaveLength(IN_FLIGHT);
    const completed = await sqlite.listRecords({ states: ['COMPLETED'] });
    expect(completed.map((r) => r.key).sort()).toEqual(
      Array.from({ length: IN_FLIGHT }, (_, i) => `k${i}`).sort(),
    );
    // The chain of the grouped completions verifies.
    const verified = await runtime.journal?.verify();
    expect(verified?.ok).toBe(true);
  });

  it('fails a write that throws inside its group alone: the others of the group commit', async () => {
    using dir = tempDir('group-commit');
    const store = open({ path: dir.file('journal.db') });
    // A context JSON cannot hold (a BigInt) makes that write throw inside the group's transaction.
    const broken = record('bad', {
      context: { ...context(), generation: 1n } as unknown as JournalRecord['context'],
    });
    const writes = [
      ...Array.from({ length: 5 }, (_, i) => store.insert(record(`a${i}`), { durable: true })),
      store.insert(broken, { durable: true }),
      ...Array.from({ length: 5 }, (_, i) => store.insert(record(`b${i}`), { durable: true })),
    ];
    const settled = await Promise.allSettled(writes);

    expect(store.largestGroup).toBe(11);
    expect(settled.map((s) => s.status)).toEqual([
      ...Array<string>(5).fill('fulfilled'),
      'rejected',
      ...Array<string>(5).fill('fulfilled'),
    ]);
    const keys = (await store.listRecords()).map((r) => r.key).sort();
    expect(keys).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'b0', 'b1', 'b2', 'b3', 'b4']);
  });

  it('leaves nothing of a grouped update that fails after its compare-and-set ran: its record keeps its version, the others commit with their receipts', async () => {
    using dir = tempDir('group-commit');
    const store = open({ path: dir.file('journal.db') });
    const keys = Array.from({ length: 5 }, (_, i) => `u${i}`);
    for (const key of keys) await store.insert(record(key));
    // The record update of u2 runs inside the group (no savepoint of its own), then its receipt
    // cannot be stored (a BigInt): the whole group is rolled back and run again write by write.
    const writes = keys.map((key, i) =>
      store.update(record(key, { state: 'SENT', version: 2 }), 1, {
        receipt:
          i === 2
            ? ({ ...receipt(i, key), at: 1n } as unknown as ReturnType<typeof receipt>)
            : receipt(i, key),
      }),
    );
    const settled = await Promise.allSettled(writes);

    expect(store.largestGroup).toBe(5);
    expect(settled.map((s) => s.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    const versions = await Promise.all(keys.map(async (key) => (await store.get(key))?.version));
    expect(versions).toEqual([2, 2, 1, 2, 2]);
    expect((await store.get('u2'))?.state).toBe('INTENT');
    const receipts = await store.readReceipts();
    expect(receipts.map((r) => (JSON.parse(r.text) as { key: string }).key)).toEqual([
      'u0',
      'u1',
      'u3',
      'u4',
    ]);
    expect(receipts.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
  });

  it("writes nothing for a write whose caller cancels while its group waits for another process's lock; the rest commit once it is released", async () => {
    using dir = tempDir('group-commit');
    const path = dir.file('journal.db');
    // Real timers; `paused` resolves when the group first waits for the lock.
    let first: () => void = () => undefined;
    const paused = new Promise<void>((resolve) => (first = resolve));
    const store = open({
      path,
      busyTimeoutMs: 60_000,
      clock: {
        now: () => Date.now(),
        setTimeout: (callback, ms) => {
          first();
          return setTimeout(callback, ms);
        },
        clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
      },
    });
    await store.insert(record('warm'));
    const holder = await holdLock(driver, path, pids);
    const cancel = new AbortController();
    const writes = Array.from({ length: 6 }, (_, i) =>
      store.insert(record(`k${i}`), {
        durable: true,
        ...(i === 2 ? { signal: cancel.signal } : {}),
      }),
    );
    const all = Promise.allSettled(writes);
    // The group met the lock at BEGIN and waits; the caller of k2 gives up meanwhile.
    await paused;
    cancel.abort();
    await holder.release();
    const settled = await all;

    const cancelled = settled[2];
    expect(cancelled?.status).toBe('rejected');
    expect(await failure(writes[2] as Promise<boolean>)).toMatchObject({
      code: 'ABORTED',
      detail: { delivery: 'not-sent' },
    });
    expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(5);
    const keys = (await store.listRecords()).map((r) => r.key).sort();
    expect(keys).toEqual(['k0', 'k1', 'k3', 'k4', 'k5', 'warm']);
    expect(store.largestGroup).toBe(6);
  });
});
