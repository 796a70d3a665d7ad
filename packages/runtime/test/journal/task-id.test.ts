/**
 * The task id on a journal record (DESIGN §20.2) in every store: kept by the in-memory store,
 * stored by SQLite (schema 3, a schema-2 file migrated at open keeping its records), and by
 * PostgreSQL (the fleet store's migration).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { MemoryJournalStore, type JournalStore } from '@stepbind/binding';
import { openSqliteJournal as openStore, JOURNAL_SCHEMA_VERSION } from '@stepbind/runtime';
import { migrateFleetStore, PgHandle, PostgresJournalStore } from '@stepbind/runtime/fleet';
import { tempDir } from '@stepbind/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { record } from '../support/journal.js';
import { usePostgres } from '../support/postgres.js';
import { describeEachDriver } from './drivers.js';

/** Inserts a SENT record, adds its task id by compare-and-set, and reads it back. */
async function roundTrip(store: JournalStore): Promise<void> {
  expect(await store.insert(record('k', { state: 'SENT' }))).toBe(true);
  const withTask = record('k', { state: 'SENT', version: 2, taskId: 'task-1' });
  expect((await store.update(withTask, 1, { durable: true })).ok).toBe(true);
  expect(await store.get('k')).toMatchObject({ state: 'SENT', version: 2, taskId: 'task-1' });
  expect((await store.get('k'))?.taskId).toBe('task-1');
  expect(await store.insert(record('plain'))).toBe(true);
  expect(await store.get('plain')).not.toHaveProperty('taskId');
}

describe('the task id on a journal record', () => {
  it('is kept by the in-memory store', async () => {
    await roundTrip(new MemoryJournalStore());
  });
});

describeEachDriver('the task id in the SQLite journal', (driver) => {
  it('is stored and read back, and a record without one has none', async () => {
    await using dir = tempDir('task-id');
    const store = openStore({ driver, path: join(dir.path, 'j.db') });
    try {
      await roundTrip(store);
    } finally {
      await store.close();
    }
  });

  it('migrates a schema-2 file at open (its records kept, without a task id), then stores task ids', async () => {
    await using dir = tempDir('task-id');
    const path = join(dir.path, 'j.db');
    const first = openStore({ driver, path });
    await first.insert(record('old', { state: 'SENT' }));
    await first.close();
    const raw = new Database(path);
    raw.exec('ALTER TABLE records DROP COLUMN task_id');
    raw.pragma('user_version = 2');
    raw.close();

    const store = openStore({ driver, path });
    try {
      expect(await store.get('old')).toMatchObject({ key: 'old', state: 'SENT' });
      expect(await store.get('old')).not.toHaveProperty('taskId');
      const updated = await store.update(
        record('old', { state: 'SENT', version: 2, taskId: 't' }),
        1,
      );
      expect(updated.ok).toBe(true);
      expect((await store.get('old'))?.taskId).toBe('t');
    } finally {
      await store.close();
    }
    const check = new Database(path, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(JOURNAL_SCHEMA_VERSION);
    check.close();
  });
});

const server = await usePostgres('task-id.test.ts');
afterAll(() => server?.stop());

describe.skipIf(server === undefined)('the task id in the PostgreSQL journal store', () => {
  it('is stored and read back after the migration that adds it', async () => {
    const handle = new PgHandle({ url: server!.url, schema: server!.schema('task') });
    await migrateFleetStore(handle);
    const store = new PostgresJournalStore(handle, { ownsHandle: true });
    try {
      await roundTrip(store);
    } finally {
      await store.close();
    }
  });
});
