import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { RuntimeError } from '@stepbind/binding';
import { openSqliteJournal } from '@stepbind/runtime';
import { tempDir } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { loadNodeSqlite, sqliteCodeName } from '../../src/journal/node-sqlite.js';
import { openSqliteDatabase, resolveJournalDriver } from '../../src/journal/sqlite-driver.js';
import { AVAILABLE_DRIVERS, describeEachDriver } from './drivers.js';

function thrown(fn: () => unknown): { code?: unknown; name?: unknown; cause?: unknown } {
  try {
    fn();
  } catch (error) {
    return error as { code?: unknown };
  }
  throw new Error('expected a throw');
}

// The journal's seam (`SqliteDatabase`) behaves the same on both drivers: these run on each.
describeEachDriver('the SQLite seam', (driver) => {
  const open = (path: string, options = {}) =>
    openSqliteDatabase(path, `the test journal ${path}`, options, driver);

  it('rolls a transaction back when its function throws, and rethrows the error', () => {
    using dir = tempDir('seam');
    const db = open(join(dir.path, 'a.db'));
    db.exec('CREATE TABLE t (a INTEGER PRIMARY KEY)');
    const failing = db.transaction((n: number) => {
      db.prepare('INSERT INTO t VALUES (?)').run(n);
      throw new Error('boom');
    });
    expect(() => failing.immediate(1)).toThrow('boom');
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 0 });
    // No transaction is left open: the next one begins and commits.
    expect(
      db.transaction(() => db.prepare('INSERT INTO t VALUES (2)').run().changes).immediate(),
    ).toBe(1);
    db.close();
  });

  it('runs a nested transaction as a savepoint: its throw undoes only its own writes', () => {
    using dir = tempDir('seam');
    const db = open(join(dir.path, 'a.db'));
    db.exec('CREATE TABLE t (a INTEGER PRIMARY KEY)');
    const inner = db.transaction(() => {
      db.prepare('INSERT INTO t VALUES (2)').run();
      throw new Error('inner');
    });
    db.transaction(() => {
      db.prepare('INSERT INTO t VALUES (1)').run();
      expect(() => inner()).toThrow('inner');
    }).immediate();
    expect(db.prepare('SELECT a FROM t').all()).toEqual([{ a: 1 }]);
    db.close();
  });

  it('reports a write lock held by another connection as SQLITE_BUSY and is left outside any transaction', () => {
    using dir = tempDir('seam');
    const path = join(dir.path, 'a.db');
    const holder = open(path);
    holder.pragma('journal_mode = WAL');
    holder.exec('CREATE TABLE t (a INTEGER)');
    const other = open(path);
    other.pragma('busy_timeout = 0');
    holder.exec('BEGIN IMMEDIATE');
    const write = other.transaction(() => other.prepare('INSERT INTO t VALUES (1)').run());
    const error = thrown(() => write.immediate());
    expect(error.code).toBe('SQLITE_BUSY');
    holder.exec('COMMIT');
    expect(write.immediate().changes).toBe(1);
    holder.close();
    other.close();
  });

  it('answers pragmas as better-sqlite3 does: a value with simple, rows without', () => {
    using dir = tempDir('seam');
    const db = open(join(dir.path, 'a.db'));
    expect(db.pragma('journal_mode = WAL', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBe(0);
    expect(db.pragma('user_version')).toEqual([{ user_version: 0 }]);
    db.close();
  });

  it('names constraint failures and a missing file with better-sqlite3 codes', () => {
    using dir = tempDir('seam');
    const db = open(join(dir.path, 'a.db'));
    db.exec('CREATE TABLE t (a INTEGER PRIMARY KEY)');
    db.exec('INSERT INTO t VALUES (1)');
    expect(thrown(() => db.exec('INSERT INTO t VALUES (1)')).code).toBe(
      'SQLITE_CONSTRAINT_PRIMARYKEY',
    );
    db.close();
    const missing = join(dir.path, 'missing.db');
    expect(thrown(() => open(missing, { readonly: true, fileMustExist: true })).code).toBe(
      'SQLITE_CANTOPEN',
    );
    expect(existsSync(missing)).toBe(false);
  });
});

describe('node:sqlite result codes', () => {
  it('maps numeric primary and extended codes to better-sqlite3 names', () => {
    expect(sqliteCodeName(5)).toBe('SQLITE_BUSY');
    expect(sqliteCodeName(517)).toBe('SQLITE_BUSY_SNAPSHOT');
    expect(sqliteCodeName(778)).toBe('SQLITE_IOERR_WRITE');
    expect(sqliteCodeName(1032)).toBe('SQLITE_READONLY_DBMOVED');
    expect(sqliteCodeName(11)).toBe('SQLITE_CORRUPT');
    expect(sqliteCodeName(26)).toBe('SQLITE_NOTADB');
    expect(sqliteCodeName(13)).toBe('SQLITE_FULL');
    expect(sqliteCodeName(526)).toBe('SQLITE_CANTOPEN_ISDIR');
    expect(sqliteCodeName(2067)).toBe('SQLITE_CONSTRAINT_UNIQUE');
    // An extended code this build does not know keeps its primary name.
    expect(sqliteCodeName(5 | (40 << 8))).toBe('SQLITE_BUSY');
  });
});

describe('the driver choice', () => {
  const nodeSqlite = loadNodeSqlite() !== undefined;

  it('auto picks node:sqlite where this Node has it, else better-sqlite3', () => {
    expect(resolveJournalDriver('auto', 'x')).toBe(nodeSqlite ? 'node:sqlite' : 'better-sqlite3');
    expect(resolveJournalDriver(undefined, 'x')).toBe(resolveJournalDriver('auto', 'x'));
    expect(resolveJournalDriver('better-sqlite3', 'x')).toBe('better-sqlite3');
  });

  it('loads node:sqlite without printing its ExperimentalWarning and leaves process.emitWarning as it was', () => {
    // A fresh process: this one loaded node:sqlite already.
    const module = new URL('../../dist/journal/node-sqlite.js', import.meta.url).href;
    const script = `const { loadNodeSqlite } = await import(${JSON.stringify(module)});
      const before = process.emitWarning;
      const loaded = loadNodeSqlite() !== undefined;
      process.emitWarning('still shown', 'ExperimentalWarning');
      process.stdout.write(JSON.stringify({ loaded, same: process.emitWarning === before }));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    expect(JSON.parse(run.stdout)).toEqual({ loaded: nodeSqlite, same: true });
    expect(run.stderr).not.toMatch(/SQLite is an experimental feature/);
    expect(run.stderr).toMatch(/still shown/);
  });

  it.skipIf(nodeSqlite)(
    'refuses node:sqlite on a Node without it with DEPENDENCY_MISSING naming the Node it needs, and creates nothing',
    () => {
      using dir = tempDir('seam');
      const path = join(dir.path, 'journal.db');
      const error = thrown(() => openSqliteJournal({ path, driver: 'node:sqlite' }));
      expect(error).toBeInstanceOf(RuntimeError);
      const e = error as RuntimeError;
      expect(e.code).toBe('DEPENDENCY_MISSING');
      expect(e.detail).toMatchObject({ package: 'node:sqlite', reason: 'not-available' });
      expect(e.message).toContain('Node 22.13 or later');
      expect(e.message).toContain('"better-sqlite3"');
      expect(e.message).toContain(path);
      expect(existsSync(path)).toBe(false);
    },
  );

  it('finds at least one driver', () => {
    expect(AVAILABLE_DRIVERS.length).toBeGreaterThan(0);
  });
});
