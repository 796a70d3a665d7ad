/**
 * The SQLite driver of the journal: the part of better-sqlite3 it uses, as interfaces of our own
 * (so no published declaration names a type of `better-sqlite3`), the choice between Node's
 * built-in `node:sqlite` (see `node-sqlite.ts`) and the optional better-sqlite3, and the loader
 * that requires better-sqlite3 on the first journal opened with it. See DESIGN §17.4 and §18.1.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import {
  requireOptional,
  dependencyMissing,
  capitalise,
  OPTIONAL_DEPENDENCIES,
} from '../optional-dependency.js';
import { loadNodeSqlite, NodeSqliteDatabase } from './node-sqlite.js';

/** The SQLite library a journal runs on. */
export type JournalDriver = 'node:sqlite' | 'better-sqlite3';

/** The journal's `driver` option: `auto` is `node:sqlite` where the running Node has it. */
export type JournalDriverOption = 'auto' | JournalDriver;

/** The drivers the running Node can use, `node:sqlite` first (better-sqlite3 when it loads). */
export function availableJournalDrivers(): JournalDriver[] {
  const drivers: JournalDriver[] = [];
  if (loadNodeSqlite() !== undefined) drivers.push('node:sqlite');
  try {
    const Database = requireOptional<typeof BetterSqlite3>('better-sqlite3', 'the SQLite journal');
    new Database(':memory:').close();
    drivers.push('better-sqlite3');
  } catch {
    // Not installed, or built for another Node: not available here.
  }
  return drivers;
}

/**
 * The driver `requested` means under the running Node: `auto` is `node:sqlite` when this Node has
 * it (22.13 and later), else `better-sqlite3`.
 *
 * @throws RuntimeError `DEPENDENCY_MISSING` (package `node:sqlite`, reason `not-available`) when
 *   `node:sqlite` is asked for on a Node without it; nothing is opened or created.
 */
export function resolveJournalDriver(
  requested: JournalDriverOption | undefined,
  feature: string,
): JournalDriver {
  const choice = requested ?? 'auto';
  if (choice === 'better-sqlite3') return choice;
  if (loadNodeSqlite() !== undefined) return 'node:sqlite';
  if (choice === 'auto') return 'better-sqlite3';
  throw nodeSqliteMissing(feature);
}

/** The error of a `node:sqlite` journal on a Node without it. */
function nodeSqliteMissing(feature: string): RuntimeError {
  const install = `npm install better-sqlite3@${OPTIONAL_DEPENDENCIES['better-sqlite3']}`;
  return new RuntimeError(
    ErrorCode.DEPENDENCY_MISSING,
    `${capitalise(feature)} asks for the driver "node:sqlite", which this Node (${process.version}) does not have: it needs Node 22.13 or later. Run a newer Node, or set the journal's driver to "better-sqlite3" (or "auto") and run \`${install}\`; nothing was opened.`,
    {
      detail: { package: 'node:sqlite', feature, install, reason: 'not-available' },
    },
  );
}

/** What a write statement reports. */
export interface SqliteRunResult {
  readonly changes: number;
}

/** A prepared statement taking parameters `P` and reading rows `R`. */
export interface SqliteStatement<P extends unknown[] = unknown[], R = unknown> {
  run(...params: P): SqliteRunResult;
  get(...params: P): R | undefined;
  all(...params: P): R[];
}

/** A function run in one transaction; `immediate` takes the write lock at `BEGIN`. */
export interface SqliteTransaction<A extends unknown[], T> {
  (...args: A): T;
  immediate(...args: A): T;
}

/** An open SQLite database, as the journal uses it (better-sqlite3's `Database`). */
export interface SqliteDatabase {
  pragma(source: string, options?: { readonly simple?: boolean }): unknown;
  prepare<P extends unknown[] = unknown[], R = unknown>(source: string): SqliteStatement<P, R>;
  transaction<A extends unknown[], T>(fn: (...args: A) => T): SqliteTransaction<A, T>;
  exec(source: string): unknown;
  close(): unknown;
}

/** How {@link openSqliteDatabase} opens a file. */
export interface SqliteOpenOptions {
  readonly readonly?: boolean;
  readonly fileMustExist?: boolean;
}

/**
 * Opens `path` with `driver` (see {@link resolveJournalDriver}); better-sqlite3 is loaded on first
 * use.
 *
 * @param feature - What opens it, for a missing-package message (`the SQLite journal /x.db`).
 * @throws RuntimeError `DEPENDENCY_MISSING` when better-sqlite3 is not installed or its native
 * addon does not load under this Node; the driver's own errors (`SQLITE_*`, in better-sqlite3's
 * shape for both drivers) otherwise.
 */
export function openSqliteDatabase(
  path: string,
  feature: string,
  options: SqliteOpenOptions = {},
  driver: JournalDriver = 'better-sqlite3',
): SqliteDatabase {
  if (driver === 'node:sqlite') {
    const module = loadNodeSqlite();
    if (module === undefined) throw nodeSqliteMissing(feature);
    return new NodeSqliteDatabase(module, path, options) as unknown as SqliteDatabase;
  }
  const Database = requireOptional<typeof BetterSqlite3>('better-sqlite3', feature);
  try {
    // better-sqlite3's generic signatures are wider than ours; the members we name match.
    return new Database(path, options) as unknown as SqliteDatabase;
  } catch (error) {
    // The native addon is loaded by the first constructor call, not by require().
    if (isAddonFailure(error)) throw dependencyMissing('better-sqlite3', feature, error);
    throw error;
  }
}

/** True for a failure to load better-sqlite3's native addon (not a SQLite error about the file). */
function isAddonFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.startsWith('SQLITE_')) return false;
  if (code === 'ERR_DLOPEN_FAILED' || code === 'MODULE_NOT_FOUND') return true;
  const message = error instanceof Error ? error.message : '';
  return /Could not locate the bindings file|NODE_MODULE_VERSION|better_sqlite3\.node/.test(
    message,
  );
}
