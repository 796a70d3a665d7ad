/**
 * The durable {@link JournalStore}: one SQLite file in WAL mode, on `node:sqlite` or better-sqlite3
 * (see `sqlite-driver.ts`). See DESIGN §13
 * for the durability policy: the `SENT` record that precedes every send is committed with
 * `synchronous=FULL` (an fsync of the WAL, which also covers the `INTENT` before it); other writes
 * use `synchronous=NORMAL`, which survives a crash of the process (the commit is in the WAL when it
 * returns) and loses at most the newest writes on a power loss, every one of which recovery turns
 * into a safe state (a lost `COMPLETED` leaves `SENT`, which becomes `OUTCOME_UNKNOWN`).
 */
import { existsSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import {
  chainReceipt,
  checkOptions,
  sameKeys,
  ConfigError,
  GENESIS_ANCHOR,
  StepbindError,
  JOURNAL_STATES,
  pruneReceipt,
  stampReceipt,
  JournalError,
  type ChainAnchor,
  type JournalRecord,
  type JournalState,
  type JournalStore,
  type PruneOptions,
  type ReadReceiptsOptions,
  type ReceiptBody,
  type ReceiptEntry,
  type StoredReceipt,
  type UpdateResult,
} from '@stepbind/binding/internal';
import { systemClock, type RuntimeClock } from '../clock.js';
import { sqliteJournalOptionsSchema } from '../options-schema.js';
import { GroupCommit, type PendingWrite } from './sqlite-batch.js';
import { rowValues, toRecord, type ReceiptRow, type RecordRow } from './rows.js';
import { isBusy, retryBusy, waitCancelled, type JournalOperation } from './sqlite-busy.js';
import {
  openSqliteDatabase,
  resolveJournalDriver,
  type JournalDriver,
  type JournalDriverOption,
  type SqliteDatabase,
  type SqliteStatement,
} from './sqlite-driver.js';
import {
  checkIdentity,
  journalError,
  mapSqliteError,
  migrate,
  openForReading,
} from './sqlite-file.js';

export { JOURNAL_APPLICATION_ID, JOURNAL_SCHEMA_VERSION } from './sqlite-file.js';

/** Options of {@link openSqliteJournal}. */
export interface SqliteJournalOptions {
  /** The journal file; created (with its directory's `-wal`/`-shm` companions) when missing. */
  readonly path: string;
  /**
   * `full`: the write before each send is fsynced, so a key that may have been sent survives a
   * power loss. `normal`: no fsync per call; every commit survives a crash of the process, and a
   * power loss may forget the newest keys (a forgotten `SENT` key could then run again).
   * @default 'full'
   */
  readonly synchronous?: 'full' | 'normal';
  /**
   * How long an operation waits for another process holding the file's lock before it fails
   * `JOURNAL_BUSY` (nothing written; a call it preceded is not sent). Once open, the wait never
   * blocks the event loop: a locked attempt fails at once and is retried after a short pause on
   * `clock` (see `sqlite-busy.ts`). Opening the file (its migrations and probe write) is
   * synchronous and waits inside SQLite, up to the same bound. Finite, 0 to 2^31−1.
   * @default 5000
   */
  readonly busyTimeoutMs?: number;
  /**
   * The SQLite library: `node:sqlite` (built into Node 22.13 and later, no native module to
   * install), `better-sqlite3` (the optional package), or `auto`: `node:sqlite` where the running
   * Node has it, else `better-sqlite3`. Both write the same file, so a journal moves between them.
   * `node:sqlite` on a Node without it fails `DEPENDENCY_MISSING` (nothing created).
   * @default 'auto'
   */
  readonly driver?: JournalDriverOption;
  /** The timers of the busy wait (the runtime's `clock`). @default the system clock */
  readonly clock?: RuntimeClock;
  /** Open for reading only (the `stepbind receipts` commands): nothing is migrated or written. */
  readonly readOnly?: boolean;
}
sameKeys<SqliteJournalOptions>()(sqliteJournalOptionsSchema);

/** What every store operation accepts besides its own options. */
interface Waits {
  /** Ends a wait for another process's lock with `ABORTED` (nothing written). */
  readonly signal?: AbortSignal;
}

/**
 * Opens (creating or migrating when needed) the SQLite journal at `options.path`.
 *
 * @throws ConfigError `INVALID_OPTIONS` for an unknown or wrong option (nothing opened);
 *   JournalError `JOURNAL_CORRUPT` (not SQLite, another application's database, a damaged
 *   file or record), `JOURNAL_VERSION` (written by a newer stepbind) or `JOURNAL_UNAVAILABLE`
 *   (read-only path, full disk, missing directory, locked). A file this call created is removed
 *   again on failure; an existing one is never left half-migrated (each migration is one
 *   transaction).
 */
export function openSqliteJournal(options: SqliteJournalOptions): SqliteJournalStore {
  return new SqliteJournalStore(options);
}

/** The SQLite {@link JournalStore}; use {@link openSqliteJournal}. */
export class SqliteJournalStore implements JournalStore {
  /** Absolute path of the file. */
  readonly location: string;
  /** The durability policy in force (see {@link SqliteJournalOptions.synchronous}). */
  readonly synchronous: 'full' | 'normal';
  /** The SQLite library this store runs on (see {@link SqliteJournalOptions.driver}). */
  readonly driver: JournalDriver;
  /** The version of the SQLite library in use (`sqlite_version()`), such as `3.54.1`. */
  readonly sqliteVersion: string;
  /**
   * Writes made durable with an fsync (`synchronous=FULL`) since open, for benchmarks; the writes
   * of one group commit share one fsync (see {@link fsyncs}).
   */
  durableWrites = 0;
  /** Commits made with an fsync since open, for benchmarks. */
  fsyncs = 0;
  /** Committed write transactions since open (a group commit is one), for benchmarks. */
  commits = 0;
  /** The most writes one group commit held since open, for benchmarks. */
  get largestGroup(): number {
    return this.#group.largestGroup;
  }
  readonly #db: SqliteDatabase;
  readonly #readOnly: boolean;
  readonly #busyTimeoutMs: number;
  readonly #clock: RuntimeClock;
  /** Aborted by {@link close}: ends every busy wait. */
  readonly #closing = new AbortController();
  #closed = false;
  /** Removes the private copy a read-only location was read from (see `openForReading`). */
  #release: () => void = () => {};
  readonly #stmt: {
    get: SqliteStatement<[string], RecordRow>;
    insert: SqliteStatement<unknown[]>;
    update: SqliteStatement<unknown[]>;
    head: SqliteStatement<[], { seq: number; digest: string }> | undefined;
    setHead: SqliteStatement<unknown[]> | undefined;
    anchor: SqliteStatement<[], { seq: number; digest: string }>;
    append: SqliteStatement<unknown[]>;
    syncFull: SqliteStatement;
    syncNormal: SqliteStatement;
  };
  readonly #updateTx: (
    record: JournalRecord,
    expectedVersion: number,
    receipt: ReceiptBody | undefined,
  ) => ReceiptEntry | undefined | false;
  /** The same update's statements alone, for a group's transaction (no savepoint). */
  readonly #updateLocked: (
    record: JournalRecord,
    expectedVersion: number,
    receipt: ReceiptBody | undefined,
  ) => ReceiptEntry | undefined | false;
  readonly #appendTx: (receipt: ReceiptBody) => ReceiptEntry;
  readonly #appendLocked: (receipt: ReceiptBody) => ReceiptEntry;
  /** Collects the writes of one turn of the event loop into one transaction (DESIGN §21.1). */
  readonly #group: GroupCommit;

  /** @internal use {@link openSqliteJournal}. */
  constructor(options: SqliteJournalOptions) {
    checkOptions(sqliteJournalOptionsSchema, options, {
      fn: 'openSqliteJournal',
      as: ConfigError,
      consequence: 'Nothing was opened; fix the option and call again.',
    });
    const path = resolve(options.path);
    this.location = path;
    this.synchronous = options.synchronous ?? 'full';
    this.#readOnly = options.readOnly === true;
    this.#busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    this.#clock = options.clock ?? systemClock;
    // A driver this Node lacks fails before anything touches the disk.
    this.driver = resolveJournalDriver(options.driver, `the SQLite journal ${path}`);
    const existed = existsSync(path);
    if (!existsSync(dirname(path))) {
      throw journalError(
        path,
        'missing-directory',
        `its directory ${dirname(path)} does not exist`,
      );
    }
    if (existed && statSync(path).isDirectory()) {
      throw journalError(path, 'cannot-open', 'it is a directory');
    }
    if (this.#readOnly && !existed) {
      throw journalError(path, 'cannot-open', 'the file does not exist');
    }
    let db: SqliteDatabase | undefined;
    try {
      if (this.#readOnly) {
        const reading = openForReading(path, this.driver);
        db = reading.db;
        this.#release = reading.release;
      } else {
        db = openSqliteDatabase(path, `the SQLite journal ${path}`, {}, this.driver);
      }
      // Opening is synchronous: here SQLite itself waits for a lock (see busyTimeoutMs).
      db.pragma(`busy_timeout = ${this.#busyTimeoutMs}`);
      checkIdentity(db, path, this.#readOnly);
      if (!this.#readOnly) {
        if (db.pragma('journal_mode = WAL', { simple: true }) !== 'wal') {
          throw journalError(path, 'read-only', 'WAL mode could not be enabled');
        }
        db.pragma('synchronous = NORMAL');
        db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
        migrate(db);
        // A real write now, so a read-only file or a full disk is reported at open, not mid-call.
        db.prepare(
          `INSERT INTO meta (name, value) VALUES ('opened_at', ?)
                    ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
        ).run(String(Date.now()));
      }
    } catch (error) {
      try {
        db?.close();
      } catch {
        // Closing after a failed open is best effort; the open error is what is reported.
      }
      this.#release();
      // A file this open created is removed again, unless a lock was met: then another process
      // created it at the same moment and is using it (its journal must not be unlinked).
      if (
        !existed &&
        !this.#readOnly &&
        !isBusy(error) &&
        !String((error as { code?: unknown } | null)?.code).startsWith('SQLITE_LOCKED')
      ) {
        for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) {
          rmSync(file, { force: true });
        }
      }
      throw StepbindError.isInstance(error) ? error : mapSqliteError(error, path, 'open');
    }
    // From here on a lock is waited for by retryBusy, off SQLite's sleeping busy handler.
    db.pragma('busy_timeout = 0');
    this.#db = db;
    this.sqliteVersion = db.prepare<[], { v: string }>('SELECT sqlite_version() AS v').get()!.v;
    const schema = db.pragma('user_version', { simple: true }) as number;
    const hasHead = schema >= 2;
    // A schema-2 file read without migrating has no task column; nothing writes to it then.
    const task =
      schema >= 3 ? { column: ', task_id', value: ', ?', set: ', task_id = ?' } : NO_TASK;
    this.#stmt = {
      get: db.prepare<[string], RecordRow>('SELECT * FROM records WHERE key = ?'),
      insert: db.prepare(
        `INSERT INTO records (key, state, version, attempt, owner, context, args_digest, created_at,
           updated_at, lease_expires_at, expires_at, outcome, error, resolution${task.column})
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?${task.value}) ON CONFLICT (key) DO NOTHING`,
      ),
      update: db.prepare(
        `UPDATE records SET state = ?, version = ?, attempt = ?, owner = ?, context = ?,
           args_digest = ?, created_at = ?, updated_at = ?, lease_expires_at = ?, expires_at = ?,
           outcome = ?, error = ?, resolution = ?${task.set}
         WHERE key = ? AND version = ?`,
      ),
      // A schema-1 file read without migrating has no head record (see checkIdentity).
      head: hasHead
        ? db.prepare<[], { seq: number; digest: string }>(
            'SELECT seq, digest FROM chain_head WHERE id = 1',
          )
        : undefined,
      setHead: hasHead
        ? db.prepare('UPDATE chain_head SET seq = ?, digest = ? WHERE id = 1')
        : undefined,
      anchor: db.prepare<[], { seq: number; digest: string }>(
        'SELECT seq, digest FROM chain_anchor WHERE id = 1',
      ),
      append: db.prepare(
        'INSERT INTO receipts (seq, prev_digest, digest, key, at, body) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      syncFull: db.prepare('PRAGMA synchronous = FULL'),
      syncNormal: db.prepare('PRAGMA synchronous = NORMAL'),
    };
    const appendLocked = (receipt: ReceiptBody): ReceiptEntry => {
      // The next link hangs off the head record, not the newest row: a deleted newest receipt
      // leaves a gap the next append cannot paper over.
      const head = this.#stmt.head?.get();
      if (head === undefined) throw new Error('the chain head record is missing');
      const entry = chainReceipt(head, receipt);
      this.#stmt.append.run(
        entry.seq,
        entry.prevDigest,
        entry.digest,
        receipt.key,
        receipt.at,
        entry.text,
      );
      this.#stmt.setHead?.run(entry.seq, entry.digest);
      return entry;
    };
    this.#appendLocked = appendLocked;
    // The compare-and-set, then the receipt: a lost CAS returns before anything is written.
    const updateLocked = (
      record: JournalRecord,
      expectedVersion: number,
      receipt: ReceiptBody | undefined,
    ): ReceiptEntry | false | undefined => {
      const changed = this.#stmt.update.run(...rowValues(record), record.key, expectedVersion);
      if (changed.changes !== 1) return false;
      return receipt === undefined ? undefined : appendLocked(stampReceipt(receipt, record));
    };
    this.#updateLocked = updateLocked;
    const update = db.transaction(updateLocked);
    this.#updateTx = (record, expectedVersion, receipt) =>
      update.immediate(record, expectedVersion, receipt);
    const append = db.transaction(appendLocked);
    this.#appendTx = (receipt) => append.immediate(receipt);
    // A group's writes run inside one transaction, each without a savepoint (sqlite-batch.ts).
    const group = db.transaction((writes: () => unknown[]) => writes());
    this.#group = new GroupCommit({
      retry: (operation, attempt) => {
        let attempts = 0;
        return this.#run(operation, {}, () => attempt(attempts++ > 0));
      },
      transaction: (durableWrites, fn) => this.#committed(durableWrites, () => group.immediate(fn)),
      commitOne: (write) => this.#commitOne(write),
      cancelled: (write) => waitCancelled(this.location, write.operation, write.signal),
    });
  }

  async get(key: string, options: Waits = {}): Promise<JournalRecord | undefined> {
    const row = await this.#run('get', options, () => this.#stmt.get.get(key));
    return row === undefined ? undefined : toRecord(row, this.location);
  }

  async insert(
    record: JournalRecord,
    options: Waits & { readonly durable?: boolean } = {},
  ): Promise<boolean> {
    return this.#write('insert', options.durable === true, options, () => {
      const info = this.#stmt.insert.run(record.key, ...rowValues(record));
      return info.changes === 1;
    });
  }

  async update(
    record: JournalRecord,
    expectedVersion: number,
    options: Waits & { readonly receipt?: ReceiptBody; readonly durable?: boolean } = {},
  ): Promise<UpdateResult> {
    const written = await this.#write(
      'update',
      options.durable === true,
      options,
      () => this.#updateTx(record, expectedVersion, options.receipt),
      () => this.#updateLocked(record, expectedVersion, options.receipt),
    );
    if (written === false) return { ok: false, current: await this.get(record.key, options) };
    return { ok: true, receipt: written };
  }

  async appendReceipt(receipt: ReceiptBody, options: Waits = {}): Promise<ReceiptEntry> {
    return this.#write(
      'appendReceipt',
      false,
      options,
      () => this.#appendTx(receipt),
      () => this.#appendLocked(receipt),
    );
  }

  async listRecords(
    filter: { readonly states?: readonly JournalState[] } = {},
    options: Waits = {},
  ): Promise<JournalRecord[]> {
    const states = filter.states ?? JOURNAL_STATES;
    const rows = await this.#run('listRecords', options, () =>
      this.#db
        .prepare<unknown[], RecordRow>(
          `SELECT * FROM records WHERE state IN (${states.map(() => '?').join(', ')})
           ORDER BY created_at, key`,
        )
        .all(...states),
    );
    return rows.map((row) => toRecord(row, this.location));
  }

  async readReceipts(options: ReadReceiptsOptions & Waits = {}): Promise<StoredReceipt[]> {
    const rows = await this.#run('readReceipts', options, () => {
      const where = ['seq > ?'];
      const params: unknown[] = [options.afterSeq ?? 0];
      if (options.key !== undefined) {
        where.push('key = ?');
        params.push(options.key);
      }
      const limit = options.limit === undefined ? '' : ` LIMIT ${Math.max(0, options.limit)}`;
      return this.#db
        .prepare<unknown[], ReceiptRow>(
          `SELECT seq, prev_digest, digest, body FROM receipts WHERE ${where.join(' AND ')}
           ORDER BY seq${limit}`,
        )
        .all(...params);
    });
    return rows.map((row) => ({
      seq: row.seq,
      prevDigest: row.prev_digest,
      digest: row.digest,
      text: row.body,
    }));
  }

  async anchor(options: Waits = {}): Promise<ChainAnchor> {
    return (await this.#run('anchor', options, () => this.#stmt.anchor.get())) ?? GENESIS_ANCHOR;
  }

  /** The newest time a record or receipt of this file was written, if any (see `JournalTime`). */
  async newestWrite(options: Waits = {}): Promise<number | undefined> {
    const row = await this.#run('newestWrite', options, () =>
      this.#db
        .prepare<[], { newest: number | null }>(
          `SELECT max(newest) AS newest FROM (SELECT max(updated_at) AS newest FROM records
           UNION ALL SELECT max(at) FROM receipts)`,
        )
        .get(),
    );
    return row?.newest ?? undefined;
  }

  /**
   * The head record. `undefined` only for a schema-1 file opened read-only (not migrated), whose
   * truncation at the end cannot be detected.
   */
  async head(options: Waits = {}): Promise<ChainAnchor | undefined> {
    const row = await this.#run('head', options, () => this.#stmt.head?.get());
    return row === undefined ? undefined : { seq: row.seq, digest: row.digest };
  }

  async prune(
    options: PruneOptions & Waits,
  ): Promise<{ readonly records: number; readonly receipts: number }> {
    return this.#write('prune', false, options, () =>
      this.#db
        .transaction(() => {
          const records = this.#db
            .prepare('DELETE FROM records WHERE expires_at IS NOT NULL AND expires_at <= ?')
            .run(options.now).changes;
          // Only a prefix of the chain may go, so that what is kept still verifies from the anchor.
          const firstKept = this.#db
            .prepare<[number], { seq: number }>(
              'SELECT seq FROM receipts WHERE at >= ? ORDER BY seq LIMIT 1',
            )
            .get(options.receiptsBefore);
          const last = this.#db
            .prepare<[number], { seq: number; digest: string }>(
              'SELECT seq, digest FROM receipts WHERE seq < ? ORDER BY seq DESC LIMIT 1',
            )
            .get(firstKept?.seq ?? Number.MAX_SAFE_INTEGER);
          if (last === undefined) return { records, receipts: 0 };
          const receipts = this.#db
            .prepare('DELETE FROM receipts WHERE seq <= ?')
            .run(last.seq).changes;
          this.#db
            .prepare(
              `INSERT INTO chain_anchor (id, seq, digest) VALUES (1, ?, ?)
             ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, digest = excluded.digest`,
            )
            .run(last.seq, last.digest);
          this.#appendLocked(pruneReceipt(last, options.now));
          return { records, receipts };
        })
        .immediate(),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort();
    try {
      this.#db.close();
    } catch (error) {
      throw mapSqliteError(error, this.location, 'close');
    } finally {
      this.#release();
    }
  }

  /** Runs `fn` (one whole transaction), again while another process holds the lock. */
  async #run<T>(operation: JournalOperation, options: Waits, fn: () => T): Promise<T> {
    if (this.#closed) throw journalError(this.location, 'closed', 'the journal is closed');
    try {
      return await retryBusy(fn, {
        clock: this.#clock,
        boundMs: this.#busyTimeoutMs,
        location: this.location,
        operation,
        signal: options.signal,
        closed: this.#closing.signal,
      });
    } catch (error) {
      if (error instanceof JournalError) throw error;
      throw mapSqliteError(error, this.location, READS.has(operation) ? 'read' : 'write');
    }
  }

  /** Queues `fn` for the next group commit (`sqlite-batch.ts`); settles after its commit. */
  #write<T>(
    operation: JournalOperation,
    durable: boolean,
    options: Waits,
    fn: () => T,
    grouped?: () => T,
  ): Promise<T> {
    if (this.#readOnly) {
      throw journalError(this.location, 'read-only', 'it was opened for reading only');
    }
    const signal = options.signal;
    return this.#group.add({ operation, durable, signal, fn, grouped }) as Promise<T>;
  }

  /** One write in its own transaction (a group of one, or a failed group's writes one by one). */
  #commitOne(write: PendingWrite): Promise<unknown> {
    return this.#run(write.operation, { signal: write.signal }, () =>
      this.#committed(write.durable ? 1 : 0, write.fn),
    );
  }

  /** Runs `fn` (a whole transaction) with an fsync on its commit when it holds durable writes. */
  #committed<T>(durableWrites: number, fn: () => T): T {
    const durable = durableWrites > 0 && this.synchronous === 'full';
    if (!durable) {
      const result = fn();
      this.commits++;
      return result;
    }
    this.#stmt.syncFull.run();
    try {
      const result = fn();
      this.commits++;
      this.fsyncs++;
      this.durableWrites += durableWrites;
      return result;
    } finally {
      this.#stmt.syncNormal.run();
    }
  }
}

const READS: ReadonlySet<JournalOperation> = new Set([
  'get',
  'listRecords',
  'readReceipts',
  'anchor',
]);

/**
 * Pages the WAL may hold before a commit checkpoints it into the database file (SQLite's default
 * is 1000). A checkpoint copies every distinct page the WAL holds and syncs the file; the pages a
 * keyed call touches (the chain head, the newest record and receipt leaves, their index pages) are
 * the same from call to call, so a longer interval copies each of them once for ten times as many
 * calls: about a fifth of a sequential keyed call's SQLite time (DESIGN §21.1). The WAL file grows
 * to about 40 MB; durability is the commit's (the WAL), not the checkpoint's.
 */
const WAL_CHECKPOINT_PAGES = 10_000;

/** The task column's SQL fragments of a file older than schema 3 (none). */
const NO_TASK = { column: '', value: '', set: '' } as const;
