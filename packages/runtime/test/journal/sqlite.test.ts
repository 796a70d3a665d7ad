import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { JournalError, verifyChain, verifyJournal, type StepbindError } from '@stepbind/binding';
import {
  JOURNAL_APPLICATION_ID,
  JOURNAL_SCHEMA_VERSION,
  openSqliteJournal as openStore,
  type SqliteJournalOptions,
} from '@stepbind/runtime';
import { expect, it } from 'vitest';
import { tempDir } from '@stepbind/testkit';
import { canMount, smallDisk } from '../support/disk.js';
import { context, receipt, record } from '../support/journal.js';
import { describeEachDriver } from './drivers.js';

async function rejection(promise: Promise<unknown>): Promise<StepbindError> {
  const error: unknown = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(JournalError);
  return error as StepbindError;
}

describeEachDriver('SQLite journal store', (driver) => {
  // Every test of this suite opens its journals on the suite's driver.
  const openSqliteJournal = (options: SqliteJournalOptions) => openStore({ driver, ...options });

  function openError(path: string, options: { readOnly?: boolean } = {}): JournalError {
    try {
      openSqliteJournal({ path, ...options });
    } catch (error) {
      expect(error).toBeInstanceOf(JournalError);
      return error as JournalError;
    }
    throw new Error(`expected opening ${path} to fail`);
  }

  it('opens on the driver asked for and names it with the SQLite version', async () => {
    using dir = tempDir('journal');
    const store = openSqliteJournal({ path: join(dir.path, 'journal.db') });
    expect(store.driver).toBe(driver);
    expect(store.sqliteVersion).toMatch(/^3\.\d+\.\d+$/);
    await store.close();
  });

  it('stores the context each write is given: one changed between two writes is written changed, a frozen one as it is', async () => {
    using dir = tempDir('journal');
    const store = openSqliteJournal({ path: join(dir.path, 'journal.db') });
    const open = { ...context() };
    expect(await store.insert(record('k', { context: open }))).toBe(true);
    (open as { stepId: string }).stepId = 'step-changed';
    const sent = record('k', { state: 'SENT', version: 2, context: open });
    expect((await store.update(sent, 1)).ok).toBe(true);
    expect((await store.get('k'))?.context.stepId).toBe('step-changed');
    const frozen = Object.freeze({ ...context(), stepId: 'step-frozen' });
    expect(await store.insert(record('f', { context: frozen }))).toBe(true);
    expect(
      (await store.update(record('f', { state: 'SENT', version: 2, context: frozen }), 1)).ok,
    ).toBe(true);
    expect((await store.get('f'))?.context).toEqual(frozen);
    await store.close();
  });

  it('creates a WAL journal tagged with its application id and schema version, and reopens it unchanged', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const first = openSqliteJournal({ path });
    expect(await first.insert(record('k1'))).toBe(true);
    await first.appendReceipt(receipt(1));
    await first.close();
    const raw = new Database(path, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(raw.pragma('application_id', { simple: true })).toBe(JOURNAL_APPLICATION_ID);
    expect(raw.pragma('user_version', { simple: true })).toBe(JOURNAL_SCHEMA_VERSION);
    raw.close();
    // Migrations are idempotent: opening again migrates nothing and keeps every row.
    const again = openSqliteJournal({ path });
    expect((await again.get('k1'))?.state).toBe('INTENT');
    expect((await again.readReceipts()).map((r) => r.seq)).toEqual([1]);
    await again.close();
  });

  it('checkpoints its WAL every 10,000 pages, not at the SQLite default of 1,000 (DESIGN §21.1)', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const store = openSqliteJournal({ path, synchronous: 'normal' });
    // Each insert is one commit of at least two pages (the row and its key index): 3,000 or more
    // frames, which a checkpoint every 1,000 pages would have started over from the WAL's start.
    for (let i = 0; i < 1_500; i++) expect(await store.insert(record(`k${i}`))).toBe(true);
    const frames = (statSync(`${path}-wal`).size - 32) / (4096 + 24);
    expect(frames).toBeGreaterThan(2_000);
    await store.close();
  });

  it('compare-and-sets across two connections to one file: one insert and one update win', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const a = openSqliteJournal({ path });
    const b = openSqliteJournal({ path });
    try {
      expect(await a.insert(record('k'))).toBe(true);
      expect(await b.insert(record('k', { owner: 'other' }))).toBe(false);
      const sent = record('k', { state: 'SENT', version: 2 });
      expect((await a.update(sent, 1)).ok).toBe(true);
      const stale = await b.update(record('k', { state: 'NOT_SENT', version: 2 }), 1);
      expect(stale).toMatchObject({ ok: false, current: { state: 'SENT', version: 2 } });
      // One chain, whichever connection appends.
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
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('counts a fsynced write only for durable updates under synchronous "full"', async () => {
    using dir = tempDir('journal');
    const full = openSqliteJournal({ path: join(dir.path, 'full.db') });
    const normal = openSqliteJournal({ path: join(dir.path, 'normal.db'), synchronous: 'normal' });
    for (const store of [full, normal]) {
      await store.insert(record('k'));
      await store.update(record('k', { state: 'SENT', version: 2 }), 1, { durable: true });
      await store.update(record('k', { state: 'COMPLETED', version: 3 }), 2);
      await store.close();
    }
    expect([full.durableWrites, full.commits]).toEqual([1, 3]);
    expect([normal.durableWrites, normal.commits]).toEqual([0, 3]);
  });

  it('prunes expired records and a prefix of old receipts, and still verifies from the anchor', async () => {
    using dir = tempDir('journal');
    const store = openSqliteJournal({ path: join(dir.path, 'journal.db') });
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
    // The two kept receipts and the prune receipt naming the anchor.
    expect(verifyChain(await store.anchor(), await store.readReceipts())).toMatchObject({
      ok: true,
      count: 3,
    });
    const verdict = verifyJournal({
      anchor: await store.anchor(),
      receipts: await store.readReceipts(),
      head: await store.head(),
    });
    expect(verdict.findings).toEqual([]);
    expect(verdict.head).toMatchObject({ seq: 6 });
    await store.close();
  });

  it('refuses a file that is not SQLite with JOURNAL_CORRUPT and leaves it byte for byte', () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'notes.txt');
    const text = 'these are my notes, not a database\n'.repeat(200);
    writeFileSync(path, text);
    const error = openError(path);
    expect(error.code).toBe('JOURNAL_CORRUPT');
    expect(error.detail).toMatchObject({ path, reason: 'not-sqlite' });
    expect(error.message).toContain(path);
    expect(readFileSync(path, 'utf8')).toBe(text);
    expect(readdirSync(dir.path)).toEqual(['notes.txt']);
  });

  it("refuses another application's SQLite database with JOURNAL_CORRUPT (foreign) and changes nothing", () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'app.db');
    const other = new Database(path);
    other.exec('CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)');
    other.close();
    const before = readFileSync(path);
    const error = openError(path);
    expect(error.code).toBe('JOURNAL_CORRUPT');
    expect(error.detail['reason']).toBe('foreign');
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('refuses a journal from a newer schema with JOURNAL_VERSION and changes nothing', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    await openSqliteJournal({ path }).close();
    const raw = new Database(path);
    raw.pragma(`user_version = ${JOURNAL_SCHEMA_VERSION + 1}`);
    raw.close();
    const before = readFileSync(path);
    const error = openError(path);
    expect(error.code).toBe('JOURNAL_VERSION');
    expect(error.detail).toMatchObject({
      reason: 'newer-schema',
      version: JOURNAL_SCHEMA_VERSION + 1,
    });
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('refuses a journal whose pages were damaged with JOURNAL_CORRUPT', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const store = openSqliteJournal({ path });
    for (let i = 0; i < 300; i++) await store.appendReceipt(receipt(i));
    await store.close();
    const bytes = readFileSync(path);
    expect(bytes.length).toBeGreaterThan(4 * 4096);
    // Overwrite the second page (a b-tree page) with noise; the header page stays valid.
    for (let i = 4096; i < 8192; i++) bytes[i] = (i * 31) & 0xff;
    writeFileSync(path, bytes);
    const error = openError(path);
    expect(error.code).toBe('JOURNAL_CORRUPT');
    expect(['integrity', 'malformed']).toContain(error.detail['reason']);
  });

  it('turns an empty file into a journal (the schema starts at version 0)', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    writeFileSync(path, '');
    const store = openSqliteJournal({ path });
    expect(await store.insert(record('k'))).toBe(true);
    await store.close();
  });

  it('reports a missing directory with JOURNAL_UNAVAILABLE and creates nothing', () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'missing', 'journal.db');
    const error = openError(path);
    expect(error.code).toBe('JOURNAL_UNAVAILABLE');
    expect(error.detail['reason']).toBe('missing-directory');
    expect(readdirSync(dir.path)).toEqual([]);
  });

  it('reports a read-only location at open with JOURNAL_UNAVAILABLE (read-only), not at the first call', async () => {
    if (canMount) {
      using disk = smallDisk(512);
      const path = join(disk.path, 'journal.db');
      const store = openSqliteJournal({ path });
      await store.insert(record('k'));
      await store.close();
      disk.remount('ro');
      const error = openError(path);
      expect(error.code).toBe('JOURNAL_UNAVAILABLE');
      expect(error.detail['reason']).toBe('read-only');
      expect(error.message).toContain(path);
      const fresh = openError(join(disk.path, 'new.db'));
      expect(fresh.detail['reason']).toBe('read-only');
      disk.remount('rw');
      return;
    }
    // Without root: permission bits make the directory read-only.
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    await openSqliteJournal({ path }).close();
    chmodSync(path, 0o444);
    chmodSync(dir.path, 0o555);
    try {
      expect(openError(path).detail['reason']).toBe('read-only');
    } finally {
      chmodSync(dir.path, 0o755);
      chmodSync(path, 0o644);
    }
  });

  it.skipIf(!canMount)(
    'reports a full disk at open with JOURNAL_UNAVAILABLE (disk-full) and leaves no file behind',
    () => {
      using disk = smallDisk(256);
      // Leave less than a page or two free.
      const filler = join(disk.path, 'filler');
      fillDisk(filler);
      const path = join(disk.path, 'journal.db');
      const error = openError(path);
      expect(error.code).toBe('JOURNAL_UNAVAILABLE');
      expect(error.detail['reason']).toBe('disk-full');
      expect(readdirSync(disk.path)).toEqual(['filler']);
    },
  );

  it.skipIf(!canMount)(
    'fails a write on a full disk with JOURNAL_UNAVAILABLE and never leaves a half-written record',
    async () => {
      using disk = smallDisk(1024);
      const path = join(disk.path, 'journal.db');
      const store = openSqliteJournal({ path });
      try {
        await store.insert(record('k'));
        fillDisk(join(disk.path, 'filler'));
        const big = {
          kind: 'result' as const,
          result: { content: [{ type: 'text' as const, text: 'x'.repeat(200_000) }] },
          receipt: {} as never,
        };
        const error = await rejection(
          store.update(record('k', { state: 'COMPLETED', version: 2, outcome: big }), 1, {
            receipt: receipt(1, 'k'),
          }),
        );
        expect(error.code).toBe('JOURNAL_UNAVAILABLE');
        expect(error.detail['reason']).toBe('disk-full');
        expect(await store.get('k')).toMatchObject({ state: 'INTENT', version: 1, outcome: null });
        expect(await store.readReceipts()).toEqual([]);
      } finally {
        await store.close();
      }
      expect(existsSync(path)).toBe(true);
    },
  );
});

/** Writes zeros to `path` until the disk is full. */
function fillDisk(path: string): void {
  const chunk = Buffer.alloc(4096);
  let written = 0;
  try {
    for (;;) {
      writeFileSync(path, chunk, { flag: 'a' });
      written += chunk.length;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  }
  expect(written).toBeGreaterThan(0);
}
