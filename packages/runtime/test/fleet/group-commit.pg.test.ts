/**
 * Group commit of the PostgreSQL journal store (DESIGN §21.x, `src/fleet/pg-batch.ts`): the
 * writes of one turn share one transaction, each resolves only after the commit that holds it (so
 * a call is sent only once its own `SENT` record is committed and visible to another connection),
 * a write that fails fails alone, a cancelled caller of a retried group writes nothing, and the
 * receipts of concurrent groups of two workers chain under the head row's lock.
 */
import { chainReceipt, verifyChain, type JournalState } from '@stepbind/binding/internal';
import { McpRuntime } from '@stepbind/runtime';
import { migrateFleetStore, PgHandle, PostgresJournalStore } from '@stepbind/runtime/fleet';
import { readAuditTrail, stdioServerParams, tempAuditPath } from '@stepbind/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { failure } from '../support/errors.js';
import { fixtureTool, WRITE } from '../support/fixtures.js';
import { checkedAtResolve, receipt, record } from '../support/journal.js';
import { usePostgres } from '../support/postgres.js';
import { trackRuntimes } from '../support/runtimes.js';

const server = await usePostgres('group-commit.pg.test.ts');
afterAll(() => server?.stop());

const { runtimes, auditFiles } = trackRuntimes();
const stores: PostgresJournalStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

const IN_FLIGHT = 64;

/** A migrated store on `schema` (a fresh one by default), with its own pool: one "worker". */
async function openStore(schema = server!.schema('g')): Promise<PostgresJournalStore> {
  const handle = new PgHandle({ url: server!.url, schema });
  await migrateFleetStore(handle);
  const store = new PostgresJournalStore(handle, { ownsHandle: true });
  await store.syncClock();
  stores.push(store);
  return store;
}

describe.skipIf(server === undefined)('group commit of the PostgreSQL journal store', () => {
  it(`commits the SENT records of ${IN_FLIGHT} keyed calls started together in fewer commits than calls, each visible to another connection before its call is sent, and sends each key once`, async () => {
    const schema = server!.schema('g');
    const store = await openStore(schema);
    const reader = await openStore(schema);
    const checked = checkedAtResolve(store, reader);
    const auditPath = tempAuditPath('pg-group-commit');
    auditFiles.push(auditPath);
    const fixture = { generations: [{ pages: [{ tools: [fixtureTool('send', WRITE)] }] }] };
    const runtime = await McpRuntime.open(
      { mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture, auditPath }) } },
      { approval: 'none', journal: { store: checked.store } },
    );
    runtimes.push(runtime);
    await using step = await runtime.captureBinding();
    const call = step.prepareCall('s__send');
    const before = { commits: store.commits, writes: store.group.writes };

    const results = await Promise.all(
      Array.from({ length: IN_FLIGHT }, (_, i) => call.run({ i }, { idempotencyKey: `k${i}` })),
    );

    // Each was committed (seen by another connection) when it resolved, before its send.
    expect(checked.unseen).toEqual([]);
    expect(checked.checked()).toBe(IN_FLIGHT);
    expect(results.every((r) => r.result.isError !== true && !r.replayed)).toBe(true);
    // Two writes per call (SENT, completion with its receipt), in fewer commits than calls.
    expect(store.group.writes - before.writes).toBe(2 * IN_FLIGHT);
    expect(store.commits - before.commits).toBeGreaterThanOrEqual(1);
    expect(store.commits - before.commits).toBeLessThan(IN_FLIGHT);
    expect(store.group.largestGroup).toBeGreaterThan(1);
    const sends = (await readAuditTrail(auditPath)).filter((e) => e.method === 'tools/call');
    expect(sends).toHaveLength(IN_FLIGHT);
    const completed = await reader.listRecords({ states: ['COMPLETED'] });
    expect(completed.map((r) => r.key).sort()).toEqual(
      Array.from({ length: IN_FLIGHT }, (_, i) => `k${i}`).sort(),
    );
    // The chain of the grouped completions verifies.
    expect((await runtime.journal?.verify())?.ok).toBe(true);
  });

  it('fails a write whose statement fails inside its group alone: the others of the group commit', async () => {
    const store = await openStore();
    // PostgreSQL text cannot hold NUL: that insert fails in the database, inside the group.
    const writes = [
      ...Array.from({ length: 5 }, (_, i) => store.insert(record(`a${i}`))),
      store.insert(record('bad\u0000key')),
      ...Array.from({ length: 5 }, (_, i) => store.insert(record(`b${i}`))),
    ];
    const settled = await Promise.allSettled(writes);

    expect(store.group.largestGroup).toBe(11);
    expect(settled.map((s) => s.status)).toEqual([
      ...Array<string>(5).fill('fulfilled'),
      'rejected',
      ...Array<string>(5).fill('fulfilled'),
    ]);
    expect(await failure(writes[5] as Promise<boolean>)).toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    const keys = (await store.listRecords()).map((r) => r.key).sort();
    expect(keys).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'b0', 'b1', 'b2', 'b3', 'b4']);
    expect(store.commits).toBe(1);
  });

  it('sends a group of records in one round trip with its BEGIN and COMMIT, and a group with receipts in two (the head lock first)', async () => {
    const store = await openStore();
    const before = store.roundTrips;
    const inserts = await Promise.all(
      Array.from({ length: 8 }, (_, i) => store.insert(record(`r${i}`))),
    );
    expect(inserts).toEqual(Array<boolean>(8).fill(true));
    expect(store.roundTrips - before).toBe(1);
    const middle = store.roundTrips;
    const updates = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        store.update(record(`r${i}`, { state: 'COMPLETED', version: 2 }), 1, {
          receipt: receipt(i, `r${i}`),
        }),
      ),
    );
    expect(updates.every((u) => u.ok)).toBe(true);
    expect(store.roundTrips - middle).toBe(2);
    expect(store.commits).toBe(2);
    expect(verifyChain(await store.anchor(), await store.readReceipts()).ok).toBe(true);
  });

  it("in the one-round-trip string, a write that fails in the database fails alone and lost compare-and-sets are each their write's answer: the writes before and after them commit, in one commit, and the chain verifies", async () => {
    const store = await openStore();
    await Promise.all(Array.from({ length: 6 }, (_, i) => store.insert(record(`u${i}`))));
    const commits = store.commits;
    const trips = store.roundTrips;
    const done = (i: number, expected: number, withReceipt = true) =>
      store.update(
        record(`u${i}`, { state: 'COMPLETED', version: 2 }),
        expected,
        withReceipt ? { receipt: receipt(i, `u${i}`) } : {},
      );
    // A state the table's CHECK refuses: an error in the database, with values that are literals.
    const bad = store.insert(record('bad', { state: 'BOGUS' as JournalState }));
    const writes = [
      done(0, 1),
      done(1, 7), // lost: the version is 1
      store.insert(record('n0')),
      bad,
      store.insert(record('u5')), // lost: the key exists (ON CONFLICT DO NOTHING)
      done(2, 1),
      done(3, 9, false), // lost, without a receipt
      store.appendReceipt(receipt(40, null)),
      done(4, 1),
    ];
    const settled = await Promise.allSettled(writes);

    expect(settled.map((s) => s.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'fulfilled',
    ]);
    const value = (i: number): unknown => (settled[i] as PromiseFulfilledResult<unknown>).value;
    expect(value(0)).toMatchObject({ ok: true });
    expect(value(1)).toMatchObject({ ok: false, current: { key: 'u1', version: 1 } });
    expect(value(2)).toBe(true);
    expect(await failure(bad)).toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    expect(value(4)).toBe(false);
    expect(value(5)).toMatchObject({ ok: true });
    expect(value(6)).toMatchObject({ ok: false, current: { key: 'u3', version: 1 } });
    expect(value(8)).toMatchObject({ ok: true });
    expect(store.group.largestGroup).toBe(9);
    expect(store.commits - commits).toBe(1);
    // Head lock; the string up to the lost CAS of u1; the rest up to the failed insert; the rest
    // and COMMIT (the lost insert and the CAS without a receipt report row counts, no error); then
    // one batched read of the current records of the two lost updates.
    expect(store.roundTrips - trips).toBe(5);
    const byKey = new Map((await store.listRecords()).map((r) => [r.key, r.state]));
    expect(Object.fromEntries(byKey)).toEqual({
      u0: 'COMPLETED',
      u1: 'INTENT',
      u2: 'COMPLETED',
      u3: 'INTENT',
      u4: 'COMPLETED',
      u5: 'INTENT',
      n0: 'INTENT',
    });
    const chain = await store.readReceipts();
    expect(chain.map((r) => (JSON.parse(r.text) as { key: string | null }).key)).toEqual([
      'u0',
      'u2',
      null,
      'u4',
    ]);
    expect(verifyChain(await store.anchor(), chain).ok).toBe(true);
  });

  it('costs a sequential unkeyed call 1 round trip and a keyed call 2 (the SENT record with its BEGIN and COMMIT, the key read by no one; the completion chained after the cached head, with its BEGIN and COMMIT), counted at the driver', async () => {
    const store = await openStore();
    const fixture = { generations: [{ pages: [{ tools: [fixtureTool('send', WRITE)] }] }] };
    const auditPath = tempAuditPath('pg-round-trips');
    auditFiles.push(auditPath);
    const runtime = await McpRuntime.open(
      { mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture, auditPath }) } },
      { approval: 'none', journal: { store } },
    );
    runtimes.push(runtime);
    await using step = await runtime.captureBinding();
    const call = step.prepareCall('s__send');
    await call.run({ i: -1 }, { idempotencyKey: 'warm' });
    const perCall = async (keyed: boolean): Promise<number> => {
      const before = store.roundTrips;
      for (let i = 0; i < 5; i++) {
        await call.run({ i }, keyed ? { idempotencyKey: `seq${i}` } : {});
      }
      return (store.roundTrips - before) / 5;
    };
    expect(await perCall(false)).toBe(1);
    expect(await perCall(true)).toBe(2);
  });

  it('starts a group over under the head lock when another worker appended after the head it chained after: the receipt is appended once and the chain verifies', async () => {
    const schema = server!.schema('g');
    const a = await openStore(schema);
    const b = await openStore(schema);
    await a.appendReceipt(receipt(1, 'a1'));
    // Chained after the head a left: one round trip.
    let trips = a.roundTrips;
    await a.appendReceipt(receipt(2, 'a2'));
    expect(a.roundTrips - trips).toBe(1);
    await b.appendReceipt(receipt(3, 'b3'));
    // a's cached head is stale: its string fails at the guard; then, rolled back, the head lock
    // (with ROLLBACK and BEGIN) and the string again, after the head b left.
    trips = a.roundTrips;
    await a.appendReceipt(receipt(4, 'a4'));
    expect(a.roundTrips - trips).toBe(3);
    trips = a.roundTrips;
    await a.appendReceipt(receipt(5, 'a5'));
    expect(a.roundTrips - trips).toBe(1);
    const chain = await a.readReceipts();
    expect(chain.map((r) => (JSON.parse(r.text) as { key: string }).key)).toEqual([
      'a1',
      'a2',
      'b3',
      'a4',
      'a5',
    ]);
    expect(verifyChain(await a.anchor(), chain).ok).toBe(true);
  });

  it('writes nothing for a write whose caller cancels while its group waits, when the group is lost before COMMIT and retried; the rest commit once', async () => {
    const schema = server!.schema('g');
    const store = await openStore(schema);
    const admin = new PgHandle({ url: server!.url, schema });
    const holder = admin.client('group-commit-holder');
    await holder.connect();
    try {
      // Another session holds the records table: the group waits at its first insert.
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE records IN EXCLUSIVE MODE');
      const cancel = new AbortController();
      const writes = Array.from({ length: 6 }, (_, i) =>
        store.insert(record(`k${i}`), i === 2 ? { signal: cancel.signal } : {}),
      );
      const all = Promise.allSettled(writes);
      const waiting = await waitingBackend(admin, holder);
      cancel.abort();
      // The group's connection is lost before COMMIT: provably nothing committed, retried whole.
      await admin.query('SELECT pg_terminate_backend($1)', [waiting]);
      await holder.query('COMMIT');
      const settled = await all;

      expect(settled.map((s) => s.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
        'fulfilled',
        'fulfilled',
      ]);
      expect(await failure(writes[2] as Promise<boolean>)).toMatchObject({ code: 'ABORTED' });
      const keys = (await store.listRecords()).map((r) => r.key).sort();
      expect(keys).toEqual(['k0', 'k1', 'k3', 'k4', 'k5']);
      expect(store.group.largestGroup).toBe(6);
    } finally {
      await holder.end();
      await admin.close();
    }
  });

  it("locks the head row before it reads it: an append waits for another worker's open append and chains after it", async () => {
    const schema = server!.schema('g');
    // A fresh store has no cached head: its group locks and reads the head first.
    const a = await openStore(schema);
    const admin = new PgHandle({ url: server!.url, schema });
    const holder = admin.client('group-commit-holder');
    await holder.connect();
    try {
      // Another worker's append, open: the head row locked and moved, its receipt inserted.
      await holder.query('BEGIN');
      const { rows } = await holder.query<{ seq: string; digest: string }>(
        'SELECT seq, digest FROM chain_head WHERE id = 1 FOR UPDATE',
      );
      const held = chainReceipt(
        { seq: Number(rows[0]!.seq), digest: rows[0]!.digest },
        receipt(1, 'held'),
      );
      await holder.query(
        'INSERT INTO receipts (seq, prev_digest, digest, key, at, body) VALUES ($1, $2, $3, $4, $5, $6)',
        [held.seq, held.prevDigest, held.digest, 'held', held.body.at, held.text],
      );
      await holder.query('UPDATE chain_head SET seq = $1, digest = $2 WHERE id = 1', [
        held.seq,
        held.digest,
      ]);
      const appended = a.appendReceipt(receipt(2, 'a2'));
      await waitingBackend(admin, holder);
      await holder.query('COMMIT');

      await expect(appended).resolves.toMatchObject({ seq: held.seq + 1 });
      const chain = await a.readReceipts();
      expect(chain.map((r) => (JSON.parse(r.text) as { key: string }).key)).toEqual(['held', 'a2']);
      expect(verifyChain(await a.anchor(), chain).ok).toBe(true);
    } finally {
      await holder.end();
      await admin.close();
    }
  });

  it('chains the receipts of concurrent groups of two workers under the head lock: every append succeeds once and the chain verifies', async () => {
    const schema = server!.schema('g');
    const a = await openStore(schema);
    const b = await openStore(schema);
    const perRound = 24;
    for (let round = 0; round < 4; round++) {
      const appends = [a, b].flatMap((store, s) =>
        Array.from({ length: perRound }, (_, i) =>
          store.appendReceipt(receipt(i, `r${round}-${s}-${i}`)),
        ),
      );
      const settled = await Promise.allSettled(appends);
      expect(settled.filter((x) => x.status === 'rejected')).toEqual([]);
    }
    const chain = await a.readReceipts();
    expect(chain).toHaveLength(2 * 4 * perRound);
    expect(verifyChain(await a.anchor(), chain).ok).toBe(true);
    expect(a.group.largestGroup).toBe(perRound);
    expect(b.group.largestGroup).toBe(perRound);
  });
});

/** The process id of the stepbind session waiting for a lock (polled on the admin connection). */
/**
 * The backend waiting for a lock `holder` holds: this test's own, never another test's that waits
 * on the same database at the same time (tests and mutant runs share a cluster in CI).
 */
async function waitingBackend(
  admin: PgHandle,
  holder: ReturnType<PgHandle['client']>,
): Promise<number> {
  const { rows: own } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const holderPid = own[0]!.pid;
  for (;;) {
    const { rows } = await admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))',
      [holderPid],
    );
    const pid = rows[0]?.pid;
    if (pid !== undefined) return pid;
  }
}
