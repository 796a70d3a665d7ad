/**
 * The journal's SQLite seam on Node's built-in `node:sqlite` (`DatabaseSync`, Node 22.13 and
 * later without a flag): an adapter with better-sqlite3's semantics for every member the journal
 * uses, so one store runs on either driver and writes the same file. What it reproduces:
 * `pragma(src, { simple })`; `transaction(fn).immediate()` as better-sqlite3's wrapper does it
 * (`BEGIN IMMEDIATE`; a nested call is a savepoint; on a throw, including a `COMMIT` that fails
 * busy, a `ROLLBACK` when a transaction is still open); the open options `readonly` and
 * `fileMustExist`; and errors rewritten to better-sqlite3's shape (`code: 'SQLITE_BUSY'`,
 * `'SQLITE_IOERR_WRITE'`, ..., the original kept as `cause`). See DESIGN §18.1.
 */
import { existsSync } from 'node:fs';

/** The part of `node:sqlite`'s `StatementSync` the adapter calls. */
interface NodeStatement {
  run(...params: unknown[]): { changes: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** The part of `node:sqlite`'s `DatabaseSync` the adapter calls. */
interface NodeDatabase {
  prepare(source: string): NodeStatement;
  exec(source: string): void;
  close(): void;
  readonly isTransaction?: boolean;
}

/** The part of the `node:sqlite` module the adapter uses. */
interface NodeSqliteModule {
  DatabaseSync: new (
    path: string,
    options?: { readonly readOnly?: boolean; readonly timeout?: number },
  ) => NodeDatabase;
}

let loaded: NodeSqliteModule | null | undefined;

/**
 * `node:sqlite`, loaded once through `process.getBuiltinModule` (synchronous), or `undefined` when
 * the running Node does not have it (Node 20; 22.5 to 22.12 without `--experimental-sqlite`).
 * Only the `ExperimentalWarning` about SQLite that the first load emits is swallowed, and only
 * during that load: `process.emitWarning` is restored before this returns.
 */
export function loadNodeSqlite(): NodeSqliteModule | undefined {
  if (loaded !== undefined) return loaded ?? undefined;
  const getBuiltin = (
    process as { getBuiltinModule?: (id: string) => unknown }
  ).getBuiltinModule?.bind(process);
  // eslint-disable-next-line @typescript-eslint/unbound-method -- put back as is; called on process
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const text = typeof warning === 'string' ? warning : warning.message;
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: unknown })?.type;
    const name = typeof warning === 'string' ? type : warning.name;
    if (name === 'ExperimentalWarning' && /SQLite/i.test(text)) return;
    return Reflect.apply(emitWarning, process, [warning, ...rest]) as void;
  };
  try {
    const module = getBuiltin?.('node:sqlite') as NodeSqliteModule | undefined;
    loaded = typeof module?.DatabaseSync === 'function' ? module : null;
  } catch {
    loaded = null;
  } finally {
    process.emitWarning = emitWarning;
  }
  return loaded ?? undefined;
}

/** An error of `node:sqlite` in better-sqlite3's shape: `code` is the SQLite result code name. */
export class NodeSqliteError extends Error {
  /** `SQLITE_BUSY`, `SQLITE_IOERR_WRITE`, `SQLITE_CONSTRAINT_PRIMARYKEY`, ... */
  readonly code: string;
  /** The numeric (extended) result code node:sqlite reported. */
  readonly errcode: number;

  constructor(message: string, errcode: number, cause: unknown) {
    super(message, { cause });
    this.name = 'SqliteError';
    this.errcode = errcode;
    this.code = sqliteCodeName(errcode);
  }
}

// prettier-ignore
const PRIMARY: readonly string[] = [
  'OK', 'ERROR', 'INTERNAL', 'PERM', 'ABORT', 'BUSY', 'LOCKED', 'NOMEM', 'READONLY', 'INTERRUPT',
  'IOERR', 'CORRUPT', 'NOTFOUND', 'FULL', 'CANTOPEN', 'PROTOCOL', 'EMPTY', 'SCHEMA', 'TOOBIG',
  'CONSTRAINT', 'MISMATCH', 'MISUSE', 'NOLFS', 'AUTH', 'FORMAT', 'RANGE', 'NOTADB', 'NOTICE',
  'WARNING',
];

/** Extended result code names by primary code: entry `i` is the code `primary | (i + 1) << 8`. */
// prettier-ignore
const EXTENDED: Readonly<Record<number, readonly string[]>> = {
  0: ['LOAD_PERMANENTLY', 'SYMLINK'],
  1: ['MISSING_COLLSEQ', 'RETRY', 'SNAPSHOT', 'RESERVESIZE', 'KEY', 'UNABLE'],
  4: ['ROLLBACK'],
  5: ['RECOVERY', 'SNAPSHOT', 'TIMEOUT'],
  6: ['SHAREDCACHE', 'VTAB'],
  8: ['RECOVERY', 'CANTLOCK', 'ROLLBACK', 'DBMOVED', 'CANTINIT', 'DIRECTORY'],
  10: [
    'READ', 'SHORT_READ', 'WRITE', 'FSYNC', 'DIR_FSYNC', 'TRUNCATE', 'FSTAT', 'UNLOCK', 'RDLOCK',
    'DELETE', 'BLOCKED', 'NOMEM', 'ACCESS', 'CHECKRESERVEDLOCK', 'LOCK', 'CLOSE', 'DIR_CLOSE',
    'SHMOPEN', 'SHMSIZE', 'SHMLOCK', 'SHMMAP', 'SEEK', 'DELETE_NOENT', 'MMAP', 'GETTEMPPATH',
    'CONVPATH', 'VNODE', 'AUTH', 'BEGIN_ATOMIC', 'COMMIT_ATOMIC', 'ROLLBACK_ATOMIC', 'DATA',
    'CORRUPTFS', 'IN_PAGE',
  ],
  11: ['VTAB', 'SEQUENCE', 'INDEX'],
  14: ['NOTEMPDIR', 'ISDIR', 'FULLPATH', 'CONVPATH', 'DIRTYWAL', 'SYMLINK'],
  19: [
    'CHECK', 'COMMITHOOK', 'FOREIGNKEY', 'FUNCTION', 'NOTNULL', 'PRIMARYKEY', 'TRIGGER', 'UNIQUE',
    'VTAB', 'ROWID', 'PINNED', 'DATATYPE',
  ],
  23: ['USER'],
  27: ['RECOVER_WAL', 'RECOVER_ROLLBACK', 'RBU'],
  28: ['AUTOINDEX'],
};

/**
 * The name better-sqlite3 gives the (extended) SQLite result code `errcode`: `5` is
 * `SQLITE_BUSY`, `517` `SQLITE_BUSY_SNAPSHOT`, `778` `SQLITE_IOERR_WRITE`; an extended code this
 * table does not know is named by its primary code (better-sqlite3 names it `UNKNOWN_SQLITE_ERROR_`).
 */
export function sqliteCodeName(errcode: number): string {
  const primary = errcode & 0xff;
  const base = PRIMARY[primary] ?? (primary === 100 ? 'ROW' : primary === 101 ? 'DONE' : undefined);
  if (base === undefined) return `UNKNOWN_SQLITE_ERROR_${errcode}`;
  const extended = errcode >> 8;
  if (extended === 0) return `SQLITE_${base}`;
  const name = EXTENDED[primary]?.[extended - 1];
  return name === undefined ? `SQLITE_${base}` : `SQLITE_${base}_${name}`;
}

/** Rewrites a `node:sqlite` error (`ERR_SQLITE_ERROR` with `errcode`) to better-sqlite3's shape. */
function rewrite(error: unknown): unknown {
  const e = error as { code?: unknown; errcode?: unknown; message?: unknown } | null;
  if (e?.code !== 'ERR_SQLITE_ERROR' || typeof e.errcode !== 'number') return error;
  return new NodeSqliteError(String(e.message), e.errcode, error);
}

function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    throw rewrite(error);
  }
}

/** A row as better-sqlite3 returns it: a plain object (node:sqlite's has a null prototype). */
function plain(row: unknown): unknown {
  return row === undefined || row === null ? undefined : { ...row };
}

/** The statement adapter: `run` reports `changes` as a number, rows are plain objects. */
class Statement {
  readonly #stmt: NodeStatement;
  constructor(stmt: NodeStatement) {
    this.#stmt = stmt;
  }
  run(...params: unknown[]): { changes: number } {
    return guard(() => ({ changes: Number(this.#stmt.run(...params).changes) }));
  }
  get(...params: unknown[]): unknown {
    return guard(() => plain(this.#stmt.get(...params)));
  }
  all(...params: unknown[]): unknown[] {
    return guard(() => this.#stmt.all(...params).map(plain));
  }
}

/** How {@link openNodeSqlite} opens a file (better-sqlite3's option names). */
export interface NodeSqliteOpenOptions {
  readonly readonly?: boolean;
  readonly fileMustExist?: boolean;
}

/**
 * The adapter: a `DatabaseSync` behind better-sqlite3's members (see the module comment).
 * `timeout` is 5000 ms at open, better-sqlite3's default busy timeout.
 */
export class NodeSqliteDatabase {
  readonly #db: NodeDatabase;
  /** Transactions this adapter began and did not end (where `isTransaction` is missing). */
  #depth = 0;
  #controller: { begin: NodeStatement; commit: NodeStatement; rollback: NodeStatement } | undefined;

  constructor(module: NodeSqliteModule, path: string, options: NodeSqliteOpenOptions = {}) {
    if (options.fileMustExist === true && !existsSync(path)) {
      // better-sqlite3 reports a missing file this way (SQLITE_CANTOPEN).
      throw new NodeSqliteError('unable to open database file', 14, undefined);
    }
    this.#db = guard(
      () => new module.DatabaseSync(path, { readOnly: options.readonly === true, timeout: 5000 }),
    );
  }

  /** True while a transaction is open (better-sqlite3's `inTransaction`). */
  get inTransaction(): boolean {
    const flag = this.#db.isTransaction;
    return typeof flag === 'boolean' ? flag : this.#depth > 0;
  }

  pragma(source: string, options: { readonly simple?: boolean } = {}): unknown {
    return guard(() => {
      const stmt = this.#db.prepare(`PRAGMA ${source}`);
      if (options.simple !== true) return stmt.all().map(plain);
      const row = stmt.get() as Record<string, unknown> | undefined;
      return row === undefined ? undefined : Object.values(row)[0];
    });
  }

  prepare(source: string): Statement {
    return new Statement(guard(() => this.#db.prepare(source)));
  }

  exec(source: string): this {
    guard(() => this.#db.exec(source));
    return this;
  }

  close(): this {
    guard(() => this.#db.close());
    return this;
  }

  /**
   * better-sqlite3's transaction wrapper: the function runs between `BEGIN` (or, nested, a
   * savepoint) and `COMMIT`; on any throw, including from the `COMMIT` itself (busy), the open
   * transaction is rolled back and the error rethrown, so a retry starts from a clean state.
   */
  transaction<A extends unknown[], T>(
    fn: (...args: A) => T,
  ): ((...args: A) => T) & { immediate(...args: A): T } {
    const run = (immediate: boolean, args: A): T => {
      const nested = this.inTransaction;
      const c = this.#statements();
      const savepoint = nested ? this.#db.prepare('SAVEPOINT "_stepbind"') : undefined;
      guard(() => (savepoint ?? (immediate ? c.begin : this.#db.prepare('BEGIN'))).run());
      if (!nested) this.#depth++;
      try {
        const result = fn(...args);
        if (typeof (result as { then?: unknown } | null)?.then === 'function' && result !== null) {
          throw new TypeError('Transaction function cannot return a promise');
        }
        guard(() => (nested ? this.#db.prepare('RELEASE "_stepbind"') : c.commit).run());
        if (!nested) this.#depth--;
        return result;
      } catch (error) {
        if (this.inTransaction) {
          if (nested) {
            guard(() => this.#db.prepare('ROLLBACK TO "_stepbind"').run());
            guard(() => this.#db.prepare('RELEASE "_stepbind"').run());
          } else {
            guard(() => c.rollback.run());
          }
        }
        if (!nested) this.#depth = 0;
        throw error;
      }
    };
    const wrapped = (...args: A): T => run(false, args);
    return Object.assign(wrapped, { immediate: (...args: A): T => run(true, args) });
  }

  #statements(): { begin: NodeStatement; commit: NodeStatement; rollback: NodeStatement } {
    this.#controller ??= guard(() => ({
      begin: this.#db.prepare('BEGIN IMMEDIATE'),
      commit: this.#db.prepare('COMMIT'),
      rollback: this.#db.prepare('ROLLBACK'),
    }));
    return this.#controller;
  }
}
