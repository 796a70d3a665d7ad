/**
 * The journal file itself: its identity (`application_id`), its schema and migrations, and the
 * typed errors of a file that cannot be used (not SQLite, foreign, damaged, newer, read-only,
 * full, locked). `sqlite.ts` holds the store that reads and writes records in it.
 */
import { accessSync, constants, copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { ErrorCode, JournalError } from '@stepbind/binding/internal';
import { openSqliteDatabase, type JournalDriver, type SqliteDatabase } from './sqlite-driver.js';

/** `PRAGMA application_id` of a stepbind journal ("sbJ1"). */
export const JOURNAL_APPLICATION_ID = 0x73624a31;

/** The schema version this build writes (`PRAGMA user_version`). */
export const JOURNAL_SCHEMA_VERSION = 3;

/**
 * The versioned, idempotent migrations: entry `i` takes `user_version` from `i` to `i + 1`. One
 * secondary index only (`receipts.key`, read before a repeated key is used): every index page is
 * one more page each commit writes to the WAL (an index on `records.state` doubles the cost of a
 * claim), and the other queries that would use one (recovery at open, pruning once a minute) run
 * rarely and scan.
 */
const MIGRATIONS: readonly (string | ((db: SqliteDatabase) => void))[] = [
  `CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS records (
     key TEXT PRIMARY KEY,
     state TEXT NOT NULL CHECK (state IN ('INTENT','SENT','COMPLETED','NOT_SENT','OUTCOME_UNKNOWN')),
     version INTEGER NOT NULL,
     attempt INTEGER NOT NULL,
     owner TEXT NOT NULL,
     context TEXT NOT NULL,
     args_digest TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     lease_expires_at INTEGER NOT NULL,
     expires_at INTEGER,
     outcome TEXT,
     error TEXT,
     resolution TEXT
   ) STRICT;
   CREATE TABLE IF NOT EXISTS receipts (
     seq INTEGER PRIMARY KEY,
     prev_digest TEXT NOT NULL,
     digest TEXT NOT NULL,
     key TEXT,
     at INTEGER NOT NULL,
     body TEXT NOT NULL
   ) STRICT;
   CREATE TABLE IF NOT EXISTS chain_anchor (
     id INTEGER PRIMARY KEY CHECK (id = 1),
     seq INTEGER NOT NULL,
     digest TEXT NOT NULL
   ) STRICT;`,
  // 2: the chain head record (seq and digest of the newest receipt ever appended), written with
  // every append, so deleting the newest receipts shows; a journal migrated from 1 gets the head
  // its chain has now. The key index serves the record check before a repeated key is used.
  `CREATE TABLE IF NOT EXISTS chain_head (
     id INTEGER PRIMARY KEY CHECK (id = 1),
     seq INTEGER NOT NULL,
     digest TEXT NOT NULL
   ) STRICT;
   INSERT OR IGNORE INTO chain_head (id, seq, digest)
     SELECT 1, seq, digest FROM (
       SELECT seq, digest, 2 AS rank FROM receipts WHERE seq = (SELECT MAX(seq) FROM receipts)
       UNION ALL SELECT seq, digest, 1 FROM chain_anchor WHERE id = 1
       UNION ALL SELECT 0, '${'0'.repeat(64)}', 0
     ) ORDER BY rank DESC LIMIT 1;
   CREATE INDEX IF NOT EXISTS receipts_key ON receipts (key) WHERE key IS NOT NULL;`,
  // 3: the MCP task a key's call created (DESIGN §20.2); older records have none. SQLite has no
  // ADD COLUMN IF NOT EXISTS: a file whose version was set back by hand may have the column.
  (db) => {
    const columns = db.prepare<[], { name: string }>('PRAGMA table_info(records)').all();
    if (!columns.some((c) => c.name === 'task_id')) {
      db.exec('ALTER TABLE records ADD COLUMN task_id TEXT;');
    }
  },
];

/** Why a journal file cannot be used (`detail.reason` of its JournalError). */
export type Reason =
  | 'not-sqlite'
  | 'foreign'
  | 'malformed'
  | 'integrity'
  | 'newer-schema'
  | 'older-schema'
  | 'read-only'
  | 'disk-full'
  | 'locked'
  | 'missing-directory'
  | 'cannot-open'
  | 'closed'
  | 'io';

export function checkIdentity(db: SqliteDatabase, path: string, readOnly: boolean): void {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const version = db.pragma('user_version', { simple: true }) as number;
  const tables = db
    .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
    .all();
  if (applicationId !== JOURNAL_APPLICATION_ID && (applicationId !== 0 || tables.length > 0)) {
    throw new JournalError(
      ErrorCode.JOURNAL_CORRUPT,
      `${path} is a SQLite database of another application (application_id ${applicationId}), not a stepbind journal; nothing was changed. Point the journal at a new file.`,
      { detail: { path, reason: 'foreign', applicationId } },
    );
  }
  if (version > JOURNAL_SCHEMA_VERSION) {
    throw new JournalError(
      ErrorCode.JOURNAL_VERSION,
      `The journal ${path} was written by a newer stepbind (schema ${version}; this one reads up to ${JOURNAL_SCHEMA_VERSION}); nothing was changed. Upgrade stepbind to use it.`,
      { detail: { path, reason: 'newer-schema', version, supported: JOURNAL_SCHEMA_VERSION } },
    );
  }
  // Reading needs schema 1 (the chain); a schema-1 file read without migrating has no head record.
  if (readOnly && version < 1) {
    throw new JournalError(
      ErrorCode.JOURNAL_VERSION,
      `The journal ${path} has schema ${version}; open it read-write once (McpRuntime.open) to migrate it to ${JOURNAL_SCHEMA_VERSION}.`,
      { detail: { path, reason: 'older-schema', version, supported: JOURNAL_SCHEMA_VERSION } },
    );
  }
  if (applicationId === JOURNAL_APPLICATION_ID) {
    const check = db.pragma('quick_check', { simple: true }) as string;
    if (check !== 'ok') {
      throw new JournalError(
        ErrorCode.JOURNAL_CORRUPT,
        `The journal ${path} is damaged (${check}); nothing was changed. Restore it from a backup or move it aside.`,
        { detail: { path, reason: 'integrity', check } },
      );
    }
  }
}

/** Applies the missing migrations, each in one IMMEDIATE transaction that re-reads the version. */
export function migrate(db: SqliteDatabase): void {
  for (;;) {
    const step = db
      .transaction(() => {
        const version = db.pragma('user_version', { simple: true }) as number;
        const migration = MIGRATIONS[version];
        if (migration === undefined) return false;
        if (typeof migration === 'string') db.exec(migration);
        else migration(db);
        if (version === 0) db.pragma(`application_id = ${JOURNAL_APPLICATION_ID}`);
        db.pragma(`user_version = ${version + 1}`);
        return true;
      })
      .immediate();
    if (!step) return;
  }
}

/**
 * Opens `path` for reading only (the `stepbind receipts` commands): nothing is migrated or written.
 * A WAL-mode file needs its `-shm` companion, which a read-only location (a read-only mount, a
 * directory without write access) cannot hold; then the file and its `-wal` (whose committed
 * transactions the copy recovers) are copied to a private temporary directory and the copy is
 * read. `release` removes that copy.
 *
 * @throws JournalError (`JOURNAL_UNAVAILABLE`, reason `read-only`) when neither works.
 */
export function openForReading(
  path: string,
  driver: JournalDriver,
): { db: SqliteDatabase; release: () => void } {
  let db: SqliteDatabase | undefined;
  try {
    db = openSqliteDatabase(
      path,
      `the SQLite journal ${path}`,
      {
        readonly: true,
        fileMustExist: true,
      },
      driver,
    );
    // The first read opens the WAL index; a read-only location fails here, not at open.
    db.prepare('SELECT count(*) FROM sqlite_master').get();
    return { db, release: () => {} };
  } catch (error) {
    db?.close();
    const raw = (error as { code?: unknown }).code;
    const code = typeof raw === 'string' ? raw : '';
    if (!/^SQLITE_(CANTOPEN|READONLY|IOERR)/.test(code) || writable(dirname(path))) throw error;
  }
  const dir = mkdtempSync(join(tmpdir(), 'stepbind-journal-read-'));
  try {
    const copy = join(dir, basename(path));
    copyFileSync(path, copy);
    if (existsSync(`${path}-wal`)) copyFileSync(`${path}-wal`, `${copy}-wal`);
    const copied = openSqliteDatabase(
      copy,
      `the SQLite journal ${path}`,
      {
        readonly: true,
        fileMustExist: true,
      },
      driver,
    );
    return { db: copied, release: () => rmSync(dir, { recursive: true, force: true }) };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw new JournalError(
      ErrorCode.JOURNAL_UNAVAILABLE,
      `The journal ${path} is on a read-only location and could not be read in place or from a copy (${error instanceof Error ? error.message : String(error)}); its write-ahead log cannot be recovered here. Copy the file (with its -wal file) to a writable directory and read that copy.`,
      { detail: { path, reason: 'read-only' }, cause: error },
    );
  }
}

export function journalError(path: string, reason: Reason, why: string): JournalError {
  const code = ErrorCode.JOURNAL_UNAVAILABLE;
  return new JournalError(code, `The journal ${path} cannot be used: ${why}.${advice(reason)}`, {
    detail: { path, reason },
  });
}

function advice(reason: Reason): string {
  switch (reason) {
    case 'read-only':
      return ' Give the process write access to the file and its directory, or choose a writable path.';
    case 'disk-full':
      return ' Free disk space (or raise the quota) and retry; nothing was half-written.';
    case 'locked':
      return ' Another process holds its write lock; retry, or raise busyTimeoutMs.';
    case 'missing-directory':
      return ' Create the directory or fix the journal path.';
    case 'closed':
      return ' Open a new runtime.';
    case 'not-sqlite':
    case 'foreign':
    case 'malformed':
    case 'integrity':
      return ' Restore the file from a backup or point the journal at a new file.';
    case 'newer-schema':
    case 'older-schema':
    case 'cannot-open':
    case 'io':
      return ' Check the path and the disk.';
  }
}

/** Maps a SQLite failure (better-sqlite3's shape, which the node:sqlite adapter keeps) to a typed JournalError naming the file. */
export function mapSqliteError(error: unknown, path: string, what: string): JournalError {
  const code = (error as { code?: unknown }).code;
  const sqlite = typeof code === 'string' ? code : '';
  const message = error instanceof Error ? error.message : String(error);
  let reason: Reason;
  let errorCode: typeof ErrorCode.JOURNAL_CORRUPT | typeof ErrorCode.JOURNAL_UNAVAILABLE =
    ErrorCode.JOURNAL_UNAVAILABLE;
  if (sqlite === 'SQLITE_NOTADB') {
    reason = 'not-sqlite';
    errorCode = ErrorCode.JOURNAL_CORRUPT;
  } else if (sqlite.startsWith('SQLITE_CORRUPT')) {
    reason = 'malformed';
    errorCode = ErrorCode.JOURNAL_CORRUPT;
  } else if (sqlite === 'SQLITE_FULL') {
    reason = 'disk-full';
  } else if (sqlite.startsWith('SQLITE_READONLY') || sqlite === 'SQLITE_PERM') {
    reason = 'read-only';
  } else if (sqlite.startsWith('SQLITE_BUSY') || sqlite.startsWith('SQLITE_LOCKED')) {
    reason = 'locked';
  } else if (sqlite.startsWith('SQLITE_CANTOPEN')) {
    reason = writable(dirname(path)) ? 'cannot-open' : 'read-only';
  } else {
    reason = 'io';
  }
  const text =
    errorCode === ErrorCode.JOURNAL_CORRUPT
      ? `The journal ${path} is not a readable stepbind journal (${sqlite || 'error'}: ${message}); nothing was changed.${advice(reason)}`
      : `The journal ${path} failed to ${what} (${sqlite || 'error'}: ${message}).${advice(reason)}`;
  return new JournalError(errorCode, text, {
    detail: { path, reason, ...(sqlite === '' ? {} : { sqliteCode: sqlite }) },
    cause: error,
  });
}

function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
