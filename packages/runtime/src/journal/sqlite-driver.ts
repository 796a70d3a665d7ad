/**
 * The SQLite driver of the journal: the part of better-sqlite3 it uses, as interfaces of our own
 * (so no published declaration names a type of `better-sqlite3`), and the loader that requires the
 * optional package on the first journal opened. See DESIGN §17.4.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { requireOptional, dependencyMissing } from '../optional-dependency.js';

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
 * Opens `path` with better-sqlite3, loaded on first use.
 *
 * @param feature - What opens it, for a missing-package message (`the SQLite journal /x.db`).
 * @throws RuntimeError `DEPENDENCY_MISSING` when better-sqlite3 is not installed or its native
 * addon does not load under this Node; the driver's own errors (`SQLITE_*`) otherwise.
 */
export function openSqliteDatabase(
  path: string,
  feature: string,
  options: SqliteOpenOptions = {},
): SqliteDatabase {
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
