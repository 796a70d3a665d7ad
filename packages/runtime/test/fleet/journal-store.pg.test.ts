import {
  CallJournal,
  JournalError,
  verifyChain,
  type CallIntent,
} from '@stepbind/binding/internal';
import {
  FLEET_SCHEMA_VERSION,
  migrateFleetStore,
  PgHandle,
  PostgresJournalStore,
} from '@stepbind/runtime/fleet';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { context, receipt, record } from '../support/journal.js';
import { usePostgres } from '../support/postgres.js';

const server = await usePostgres('journal-store.pg.test.ts');
afterAll(() => server?.stop());

/** A migrated store on a fresh schema (or on `schema`), with its own pool (one "worker"). */
async function openStore(schema?: string): Promise<PostgresJournalStore & AsyncDisposable> {
  if (server === undefined) throw new Error('no server');
  const handle = new PgHandle({ url: server.url, schema: schema ?? server.schema('j') });
  await migrateFleetStore(handle);
  const store = new PostgresJournalStore(handle, { ownsHandle: true });
  return Object.assign(store, { [Symbol.asyncDispose]: () => store.close() });
}

describe.skipIf(server === undefined)('PostgreSQL journal store', () => {
  it('migrates a new schema to the current version, and a second migration applies nothing', async () => {
    const schema = server!.schema('m');
    const handle = new PgHandle({ url: server!.url, schema });
    try {
      expect(await migrateFleetStore(handle)).toEqual({
        from: 0,
        to: FLEET_SCHEMA_VERSION,
        applied: Array.from({ length: FLEET_SCHEMA_VERSION }, (_, i) => i + 1),
      });
      expect(await migrateFleetStore(handle)).toEqual({
        from: FLEET_SCHEMA_VERSION,
        to: FLEET_SCHEMA_VERSION,
        applied: [],
      });
    } finally {
      await handle.close();
    }
  });

  it('refuses a schema written by a newer stepbind, naming the version, and changes nothing', async () => {
    const schema = server!.schema('n');
    const handle = new PgHandle({ url: server!.url, schema });
    try {
      await migrateFleetStore(handle);
      await handle.query('INSERT INTO schema_migrations VALUES (99, 0)');
      const error = await migrateFleetStore(handle).catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        detail: { reason: 'newer-schema', version: 99 },
      });
    } finally {
      await handle.close();
    }
  });

  it('compare-and-sets across two workers on one schema: one insert and one update win, one chain', async () => {
    const schema = server!.schema('cas');
    await using a = await openStore(schema);
    await using b = await openStore(schema);
    expect(await a.insert(record('k'))).toBe(true);
    expect(await b.insert(record('k', { owner: 'other' }))).toBe(false);
    expect((await a.update(record('k', { state: 'SENT', version: 2 }), 1)).ok).toBe(true);
    const stale = await b.update(record('k', { state: 'NOT_SENT', version: 2 }), 1);
    expect(stale).toMatchObject({ ok: false, current: { state: 'SENT', version: 2 } });
    await a.appendReceipt(receipt(1));
    await b.appendReceipt(receipt(2));
    const done = await a.update(record('k', { state: 'COMPLETED', version: 3 }), 2, {
      receipt: receipt(3, 'k'),
    });
    expect(done.ok && done.receipt?.seq).toBe(3);
    expect(verifyChain(await b.anchor(), await b.readReceipts())).toMatchObject({
      ok: true,
      count: 3,
    });
    expect((await b.readReceipts({ key: 'k' })).map((r) => r.seq)).toEqual([3]);
    expect((await b.readReceipts({ afterSeq: 1, limit: 1 })).map((r) => r.seq)).toEqual([2]);
    expect((await b.listRecords({ states: ['COMPLETED'] })).map((r) => r.key)).toEqual(['k']);
    expect(await b.get('k')).toEqual(record('k', { state: 'COMPLETED', version: 3 }));
  });

  it('prunes expired records and a prefix of old receipts, and still verifies from the anchor', async () => {
    await using store = await openStore();
    await store.insert(record('old', { state: 'COMPLETED', expiresAt: 5_000 }));
    await store.insert(record('unknown', { state: 'OUTCOME_UNKNOWN', expiresAt: null }));
    for (let i = 1; i <= 5; i++) await store.appendReceipt(receipt(i));
    expect(await store.prune({ now: 6_000, receiptsBefore: 1_004 })).toEqual({
      records: 1,
      receipts: 3,
    });
    expect(await store.get('old')).toBeUndefined();
    expect((await store.get('unknown'))?.state).toBe('OUTCOME_UNKNOWN');
    expect(await store.anchor()).toMatchObject({ seq: 3 });
    // The two kept receipts and the prune receipt (seq 6) naming the anchor.
    expect(verifyChain(await store.anchor(), await store.readReceipts())).toMatchObject({
      ok: true,
      count: 3,
    });
    expect(await store.head()).toMatchObject({ seq: 6 });
    // The chain goes on from the head after pruning.
    expect((await store.appendReceipt(receipt(6))).seq).toBe(7);
  });

  it('a changed receipt byte breaks verification at that receipt', async () => {
    const schema = server!.schema('tamper');
    await using store = await openStore(schema);
    for (let i = 1; i <= 3; i++) await store.appendReceipt(receipt(i));
    const handle = new PgHandle({ url: server!.url, schema });
    await handle.query(
      'UPDATE receipts SET body = replace(body, \'"ok"\', \'"OK"\') WHERE seq = 2',
    );
    await handle.close();
    expect(verifyChain(await store.anchor(), await store.readReceipts())).toMatchObject({
      ok: false,
      seq: 2,
    });
  });

  it('concurrent writers from several workers: exactly one winner per compare-and-set, and the chain verifies (property)', async () => {
    const schema = server!.schema('race');
    const stores = await Promise.all([1, 2, 3, 4].map(() => openStore(schema)));
    try {
      let round = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 2, maxLength: 8 }),
          fc.integer({ min: 1, max: 3 }),
          async (writers, steps) => {
            const key = `race-${round++}`;
            const inserted = await Promise.all(
              writers.map((w, i) => stores[w]!.insert(record(key, { owner: `w${i}` }))),
            );
            expect(inserted.filter(Boolean)).toHaveLength(1);
            const before = (await stores[0]!.readReceipts()).length;
            let wins = 0;
            for (let version = 1; version <= steps; version++) {
              const results = await Promise.all(
                writers.map((w, i) =>
                  stores[w]!.update(
                    record(key, { state: 'SENT', version: version + 1, owner: `w${i}` }),
                    version,
                    { receipt: receipt(version, key) },
                  ),
                ),
              );
              const won = results.filter((r) => r.ok);
              expect(won).toHaveLength(1);
              wins += won.length;
            }
            const all = await stores[1]!.readReceipts();
            expect(all.length - before).toBe(wins);
            expect(verifyChain(await stores[2]!.anchor(), all)).toMatchObject({ ok: true });
            expect((await stores[3]!.get(key))?.version).toBe(steps + 1);
          },
        ),
        { numRuns: 25, seed: seedOf(), verbose: true },
      );
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('keys are unique fleet-wide: a second worker is refused a live key, and takes it over once its holder expired', async () => {
    const schema = server!.schema('lease');
    await using storeA = await openStore(schema);
    await using storeB = await openStore(schema);
    let now = 10_000;
    const options = { inProgressTtlMs: 1_000, now: () => now };
    // Different hosts: liveness is unknown, so the in-progress expiry decides.
    const a = new CallJournal(storeA, { ...options, owner: 'host-a:1:a' });
    const b = new CallJournal(storeB, { ...options, owner: 'host-b:2:b' });
    const intent: CallIntent = {
      key: 'pay-1',
      context: context(),
      argsDigest: 'sha256:args',
      retryReads: false,
    };
    const claimed = await a.begin(intent);
    expect(claimed.kind).toBe('claimed');
    const refused = await b.begin(intent);
    expect(refused).toMatchObject({
      kind: 'refused',
      error: { code: 'IDEMPOTENCY_IN_PROGRESS' },
    });
    now += 1_001;
    const taken = await b.begin(intent);
    expect(taken.kind).toBe('claimed');
    // The overtaken holder can no longer send: its SENT write is a compare-and-set that fails.
    if (claimed.kind !== 'claimed') throw new Error('unreachable');
    const lost = await a.markSent(claimed.claim, 5_000).catch((e: unknown) => e);
    expect(lost).toMatchObject({
      code: 'IDEMPOTENCY_IN_PROGRESS',
      detail: { reason: 'claim-lost' },
    });
    const receipts = await storeA.readReceipts({ key: 'pay-1' });
    expect(receipts.map((r) => (JSON.parse(r.text) as { source: string }).source)).toContain(
      'recovery',
    );
    expect(verifyChain(await storeB.anchor(), await storeB.readReceipts())).toMatchObject({
      ok: true,
    });
  });

  it('refuses a write before a send that the database runs after its deadline: JOURNAL_UNAVAILABLE (timeout), nothing written; alone or in a group, insert or compare-and-set', async () => {
    await using store = await openStore();
    await store.syncClock();
    // A deadline already past when the database runs the write (DESIGN §21.6).
    const past = performance.now() - 1;
    const soon = performance.now() + 60_000;
    const late = await store
      .insert(record('late', { state: 'SENT' }), { durable: true, deadline: past })
      .catch((e: unknown) => e);
    expect(late).toMatchObject({ code: 'JOURNAL_UNAVAILABLE', detail: { reason: 'timeout' } });
    expect((late as Error).message).toMatch(/after the caller's deadline/);
    expect(await store.get('late')).toBeUndefined();
    // Within its deadline it is written; a write that is not before a send is not guarded.
    const sent = record('soon', { state: 'SENT' });
    expect(await store.insert(sent, { durable: true, deadline: soon })).toBe(true);
    expect(await store.insert(record('plain'), { deadline: past })).toBe(true);
    const moved = await store
      .update({ ...sent, version: 2 }, 1, { durable: true, deadline: past })
      .catch((e: unknown) => e);
    expect(moved).toMatchObject({ code: 'JOURNAL_UNAVAILABLE', detail: { reason: 'timeout' } });
    expect((await store.get('soon'))?.version).toBe(1);
    // In one group: the late write fails alone, the others commit.
    const group = await Promise.allSettled([
      store.insert(record('g1', { state: 'SENT' }), { durable: true, deadline: soon }),
      store.insert(record('g2', { state: 'SENT' }), { durable: true, deadline: past }),
      store.insert(record('g3', { state: 'SENT' }), { durable: true, deadline: soon }),
    ]);
    expect(group.map((g) => g.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((group[1] as PromiseRejectedResult).reason).toMatchObject({
      detail: { reason: 'timeout' },
    });
    expect((await store.get('g2')) === undefined).toBe(true);
    expect((await store.get('g3'))?.state).toBe('SENT');
  });

  it('reports an unreachable store as JOURNAL_UNAVAILABLE after bounded retries, without the password', async () => {
    const handle = new PgHandle(
      { url: 'postgres://app:hunter2secret@127.0.0.1:1/db', schema: 'x' },
      { maxAttempts: 2, retryDelayMs: 1, connectTimeoutMs: 500 },
    );
    const store = new PostgresJournalStore(handle, { ownsHandle: true });
    const error = await store.get('k').catch((e: unknown) => e);
    await store.close();
    expect(error).toBeInstanceOf(JournalError);
    expect(error).toMatchObject({ code: 'JOURNAL_UNAVAILABLE', detail: { reason: 'unreachable' } });
    const text = JSON.stringify({ m: (error as Error).message, d: (error as JournalError).detail });
    expect(text).not.toContain('hunter2secret');
    expect(text).toContain('postgres://127.0.0.1:1/db');
  });
});

function seedOf(): number {
  const seed = Number(process.env['FC_SEED'] ?? Date.now() % 1_000_000);
  console.log(`[fast-check] journal-store race seed=${seed}`);
  return seed;
}
