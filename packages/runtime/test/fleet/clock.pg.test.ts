/**
 * Fleet time is the database's (issue 25, finding 4): a worker whose own clock runs 25 h ahead
 * must neither prune the fleet's keys and receipts nor take over a live holder's key. The skew
 * is real to the code under test: `Date.now` is what runs ahead.
 */
import { rmSync } from 'node:fs';
import { CallJournal, type CallIntent } from '@stepbind/binding/internal';
import { McpRuntime } from '@stepbind/runtime';
import { migrateFleetStore, PgHandle, PostgresJournalStore } from '@stepbind/runtime/fleet';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type ServerFixture,
} from '@stepbind/testkit';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { WRITE } from '../support/fixtures.js';
import { context, receipt, record } from '../support/journal.js';
import { usePostgres } from '../support/postgres.js';

const server = await usePostgres('clock.pg.test.ts');
afterAll(() => server?.stop());

const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [{ tools: [{ name: 'send', inputSchema: { type: 'object' }, annotations: WRITE }] }],
    },
  ],
};
const AHEAD_MS = 25 * 3_600_000;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** From now on this process's wall clock (`Date.now`) runs `ms` ahead. */
function runAhead(ms: number): void {
  const real = Date.now.bind(Date);
  vi.spyOn(Date, 'now').mockImplementation(() => real() + ms);
}

async function worker(schema: string, audit: string): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    {
      mcpServers: {
        s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath: audit }),
      },
    },
    { approval: 'none', store: { url: server!.url, schema } },
  );
  cleanups.push(() => runtime.close());
  return runtime;
}

describe.skipIf(server === undefined)('fleet time is the database clock', () => {
  it("a worker whose clock runs 25 h ahead opens (and prunes) without removing another worker's completed key: the repeat replays, the server saw one call", async () => {
    const schema = server!.schema('ck');
    const audit = tempAuditPath('clock-ahead');
    cleanups.push(() => rmSync(audit, { force: true }));
    const a = await worker(schema, audit);
    {
      await using step = await a.captureBinding();
      await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1' });
    }
    runAhead(AHEAD_MS);
    const b = await worker(schema, audit);
    await b.journal.prune();
    expect((await b.journal.get('order-1'))?.state).toBe('COMPLETED');
    await using step = await b.captureBinding();
    const again = await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1' });
    expect(again.replayed).toBe(true);
    const calls = (await readAuditTrail(audit)).filter((e) => e.method === 'tools/call');
    expect(calls).toHaveLength(1);
    expect((await b.journal.verify()).ok).toBe(true);
  });

  it('the store prunes on the database clock: asked with a clock 25 h ahead, it removes no record younger than the retention and no fresh receipt', async () => {
    const handle = new PgHandle({ url: server!.url, schema: server!.schema('cp') });
    await migrateFleetStore(handle);
    const store = new PostgresJournalStore(handle, { ownsHandle: true });
    cleanups.push(() => store.close());
    await store.syncClock();
    const now = store.clock.now();
    const retentionMs = 86_400_000;
    await store.insert(
      record('fresh', {
        state: 'COMPLETED',
        createdAt: now,
        updatedAt: now,
        expiresAt: now + retentionMs,
      }),
    );
    await store.appendReceipt({ ...receipt(1, 'fresh'), at: now });
    const ahead = now + AHEAD_MS;
    expect(
      await store.prune({ now: ahead, receiptsBefore: ahead - retentionMs, retentionMs }),
    ).toEqual({ records: 0, receipts: 0 });
    expect((await store.get('fresh'))?.state).toBe('COMPLETED');
  });

  it("a worker whose clock runs 25 h ahead does not take over a live holder's in-progress key", async () => {
    const schema = server!.schema('cl');
    const stores: PostgresJournalStore[] = [];
    for (let i = 0; i < 2; i++) {
      const handle = new PgHandle({ url: server!.url, schema });
      await migrateFleetStore(handle);
      const store = new PostgresJournalStore(handle, { ownsHandle: true });
      cleanups.push(() => store.close());
      await store.syncClock();
      stores.push(store);
    }
    // Different hosts: liveness is unknown, so the lease (10 min) decides.
    const holder = new CallJournal(stores[0]!, { owner: 'host-a:1:a' });
    const intent: CallIntent = {
      key: 'pay-1',
      context: context(),
      argsDigest: 'sha256:args',
      retryReads: false,
    };
    expect((await holder.begin(intent)).kind).toBe('claimed');
    runAhead(AHEAD_MS);
    const ahead = new CallJournal(stores[1]!, { owner: 'host-b:2:b' });
    const refused = await ahead.begin(intent);
    expect(refused).toMatchObject({ kind: 'refused', error: { code: 'IDEMPOTENCY_IN_PROGRESS' } });
    expect((await ahead.get('pay-1'))?.owner).toBe('host-a:1:a');
  });
});
