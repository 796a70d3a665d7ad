/**
 * The execution journal of a fleet in PostgreSQL: the same {@link JournalStore} contract and
 * semantics as the SQLite store (DESIGN §13), shared by every worker. Keys are unique fleet-wide
 * (`INSERT … ON CONFLICT DO NOTHING`), every change is `UPDATE … WHERE version = $expected`, and a
 * receipt is chained under the lock of the one chain-head row, in the transaction of the change it
 * records. Commits are synchronous (PostgreSQL's default `synchronous_commit`), so every write is
 * durable when it resolves; `durable` needs nothing more. Its clock is the database's
 * ({@link DatabaseClock}), and it prunes on the database's clock in SQL. Every operation honours
 * its `signal` (the connection is destroyed, the operation abandoned).
 */
import type { PgPoolClient } from './pg-driver.js';
import {
  chainReceipt,
  ErrorCode,
  JOURNAL_STATES,
  JournalError,
  pruneReceipt,
  RuntimeError,
  StepbindError,
  stampReceipt,
  type ChainAnchor,
  type JournalRecord,
  type JournalState,
  type JournalStore,
  type PruneOptions,
  type ReadReceiptsOptions,
  type ReceiptBody,
  type ReceiptEntry,
  type StoreCallOptions,
  type StoredReceipt,
  type UpdateResult,
} from '@stepbind/binding/internal';
import { parseNullable, rowValues } from '../journal/rows.js';
import { DatabaseClock, DB_NOW_SQL } from './db-clock.js';
import type { PgHandle } from './pg.js';
import { BatchedReads, FleetGroupCommit, type GroupWrite } from './pg-batch.js';
import { DEADLINE_PASSED, deadlineGuard, headGuard } from './pg-group.js';

interface RecordRow {
  key: string;
  state: string;
  version: string;
  attempt: string;
  owner: string;
  context: string;
  args_digest: string;
  created_at: string;
  updated_at: string;
  lease_expires_at: string;
  expires_at: string | null;
  outcome: string | null;
  error: string | null;
  resolution: string | null;
  task_id: string | null;
}

interface ReceiptRow {
  seq: string;
  prev_digest: string;
  digest: string;
  body: string;
}

const COLUMNS =
  'key, state, version, attempt, owner, context, args_digest, created_at, updated_at, lease_expires_at, expires_at, outcome, error, resolution, task_id';

/** The compare-and-set of a record: `$1` its key, `$2`–`$15` its values, `$16` the version expected. */
const UPDATE_RECORD = `UPDATE records SET state = $2, version = $3, attempt = $4, owner = $5, context = $6,
  args_digest = $7, created_at = $8, updated_at = $9, lease_expires_at = $10,
  expires_at = $11, outcome = $12, error = $13, resolution = $14, task_id = $15
  WHERE key = $1 AND version = $16`;

/** A new record: `$1` its key, `$2`–`$15` its values; nothing when the key exists. */
const INSERT_RECORD = `INSERT INTO records (${COLUMNS})
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
  ON CONFLICT (key) DO NOTHING`;

/**
 * {@link INSERT_RECORD} of a write before a send: `$16` the database time after which it fails
 * ({@link deadlineGuard}) instead of writing.
 */
const INSERT_RECORD_BEFORE = `INSERT INTO records (${COLUMNS})
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
    CASE WHEN ${deadlineGuard('$16::float8')} THEN $9::bigint END, $10, $11, $12, $13, $14, $15)
  ON CONFLICT (key) DO NOTHING`;

/** {@link UPDATE_RECORD} of a write before a send: `$17` as `$16` of {@link INSERT_RECORD_BEFORE}. */
const UPDATE_RECORD_BEFORE = `${UPDATE_RECORD} AND ${deadlineGuard('$17::float8')}`;

/** `$17`–`$22`: a receipt's seq, previous digest, digest, key, time and text. */
const RECEIPT_VALUES = '$17::bigint, $18::text, $19::text, $20::text, $21::bigint, $22::text';

/**
 * The compare-and-set of a record and, when it wins, its receipt and the new chain head, in one
 * statement (the head only if it is the one the receipt chained after, `pg-group.ts`). When it loses it fails with a division by zero (`LOST_CAS` of `pg-group.ts`): the receipts a
 * group chained after this one must not run (`pg-group.ts`).
 */
const UPDATE_RECORD_AND_APPEND = `WITH changed AS (${UPDATE_RECORD} RETURNING 1),
  appended AS (
    INSERT INTO receipts (seq, prev_digest, digest, key, at, body)
    SELECT ${RECEIPT_VALUES} FROM changed RETURNING 1
  )
  UPDATE chain_head SET seq = $17::bigint, digest = $19::text
  WHERE id = 1 AND 1 / (SELECT count(*) FROM appended)::int = 1
    AND ${headGuard('$17::bigint', '$18::text')}
  RETURNING ${DB_NOW_SQL} AS now`;

/** A receipt and the new chain head in one statement: `$1`–`$6` as {@link RECEIPT_VALUES}. */
const APPEND = `WITH appended AS (
    INSERT INTO receipts (seq, prev_digest, digest, key, at, body) VALUES ($1, $2, $3, $4, $5, $6)
  )
  UPDATE chain_head SET seq = $1, digest = $3 WHERE id = 1 AND ${headGuard('$1::bigint', '$2::text')}
  RETURNING ${DB_NOW_SQL} AS now`;

function receiptValues(entry: ReceiptEntry): unknown[] {
  return [entry.seq, entry.prevDigest, entry.digest, entry.body.key, entry.body.at, entry.text];
}

/**
 * The PostgreSQL {@link JournalStore}. Obtain it from `attachFleet` (which migrates the schema
 * first) or construct it over a migrated {@link PgHandle}. It does not own the handle unless
 * `ownsHandle` is set.
 */
export class PostgresJournalStore implements JournalStore {
  readonly location: string;
  /** The database's clock, measured by {@link syncClock} and in every receipt append. */
  readonly clock: DatabaseClock;
  /**
   * The group commit of its record and receipt writes (DESIGN §21.6): its counters (`commits`,
   * `writes`, `largestGroup`) are for benchmarks; `grouping = false` commits every write alone.
   * @internal
   */
  readonly group: FleetGroupCommit;
  /** The record reads of one turn, in one query (`queries` counts them, for benchmarks). @internal */
  readonly reads: BatchedReads<RecordRow>;
  readonly #pg: PgHandle;
  readonly #ownsHandle: boolean;
  /** Commits of the writes that run outside the group (prunes). */
  #alone = 0;
  #closed = false;

  constructor(
    handle: PgHandle,
    options: { readonly ownsHandle?: boolean; readonly monotonic?: () => number } = {},
  ) {
    this.#pg = handle;
    this.location = handle.location;
    this.#ownsHandle = options.ownsHandle === true;
    this.clock = new DatabaseClock(options.monotonic);
    this.group = new FleetGroupCommit(handle, this.clock);
    this.reads = new BatchedReads(handle, 'read a record', async (keys, signal) => {
      const { rows } = await this.#pg.query<RecordRow>(
        `SELECT ${COLUMNS} FROM records WHERE key = ANY($1::text[])`,
        [keys],
        'read a record',
        { signal },
      );
      return new Map(rows.map((row) => [row.key, row]));
    });
  }

  /** Round trips to the database on this store's connections, counted at the driver (tests, benchmarks). */
  get roundTrips(): number {
    return this.#pg.roundTrips;
  }

  /** Committed write transactions since construction (a group is one), for benchmarks. */
  get commits(): number {
    return this.group.commits + this.#alone;
  }

  /** Measures the database's clock (one round trip); `attachFleet` does so at open. */
  async syncClock(options: StoreCallOptions = {}): Promise<void> {
    const before = this.clock.mark();
    const { rows } = await this.#read(() =>
      this.#pg.query<{ now: string }>(`SELECT ${DB_NOW_SQL} AS now`, [], 'read the clock', options),
    );
    this.clock.observe(before, Number(rows[0]?.now), this.clock.mark());
  }

  async get(key: string, options: StoreCallOptions = {}): Promise<JournalRecord | undefined> {
    const row = await this.#read(() => this.reads.get(key, options.signal));
    return row === undefined ? undefined : this.#toRecord(row);
  }

  async insert(
    record: JournalRecord,
    options: { readonly durable?: boolean } & StoreCallOptions = {},
  ): Promise<boolean> {
    const values = [record.key, ...rowValues(record)];
    const before = this.#deadlineOf(options);
    return this.#grouped('insert a record', options, {
      statement: () =>
        before === undefined
          ? { text: INSERT_RECORD, values }
          : { text: INSERT_RECORD_BEFORE, values: [...values, before] },
      answer: (result) => result?.rowCount === 1,
    });
  }

  async update(
    record: JournalRecord,
    expectedVersion: number,
    options: { readonly receipt?: ReceiptBody; readonly durable?: boolean } & StoreCallOptions = {},
  ): Promise<UpdateResult> {
    const values = [record.key, ...rowValues(record), expectedVersion];
    const before = this.#deadlineOf(options);
    const written = await this.#grouped<ReceiptEntry | false | undefined>(
      'update a record',
      options,
      {
        receipt: options.receipt === undefined ? undefined : stampReceipt(options.receipt, record),
        // The change, and with a receipt the receipt and the head, in one statement.
        statement: (entry) =>
          entry !== undefined
            ? { text: UPDATE_RECORD_AND_APPEND, values: [...values, ...receiptValues(entry)] }
            : before === undefined
              ? { text: UPDATE_RECORD, values }
              : { text: UPDATE_RECORD_BEFORE, values: [...values, before] },
        // No result: the statement with a receipt lost its compare-and-set (LOST_CAS).
        answer: (result, entry) =>
          result === undefined || (entry === undefined && result.rowCount !== 1) ? false : entry,
      },
    );
    if (written === false) return { ok: false, current: await this.get(record.key, options) };
    return { ok: true, receipt: written };
  }

  async appendReceipt(receipt: ReceiptBody, options: StoreCallOptions = {}): Promise<ReceiptEntry> {
    return this.#grouped('append a receipt', options, {
      receipt,
      statement: (entry) => ({ text: APPEND, values: receiptValues(entry!) }),
      answer: (_, entry) => entry,
    });
  }

  async listRecords(
    filter: { readonly states?: readonly JournalState[] } = {},
  ): Promise<JournalRecord[]> {
    const states = filter.states ?? JOURNAL_STATES;
    const { rows } = await this.#read(() =>
      this.#pg.query<RecordRow>(
        `SELECT ${COLUMNS} FROM records WHERE state = ANY($1::text[]) ORDER BY created_at, key`,
        [[...states]],
      ),
    );
    return rows.map((row) => this.#toRecord(row));
  }

  async readReceipts(options: ReadReceiptsOptions = {}): Promise<StoredReceipt[]> {
    const values: unknown[] = [options.afterSeq ?? 0];
    let where = 'seq > $1';
    if (options.key !== undefined) {
      values.push(options.key);
      where += ' AND key = $2';
    }
    const limit =
      options.limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.trunc(options.limit))}`;
    const { rows } = await this.#read(() =>
      this.#pg.query<ReceiptRow>(
        `SELECT seq, prev_digest, digest, body FROM receipts WHERE ${where} ORDER BY seq${limit}`,
        values,
      ),
    );
    return rows.map((row) => ({
      seq: Number(row.seq),
      prevDigest: row.prev_digest,
      digest: row.digest,
      text: row.body,
    }));
  }

  async anchor(): Promise<ChainAnchor> {
    const { rows } = await this.#read(() =>
      this.#pg.query<{ seq: string; digest: string }>(
        'SELECT seq, digest FROM chain_anchor WHERE id = 1',
      ),
    );
    const row = rows[0];
    if (row === undefined) throw this.#corrupt('the chain anchor row is missing');
    return { seq: Number(row.seq), digest: row.digest };
  }

  /** The chain head row: seq and digest of the newest receipt ever appended. */
  async head(): Promise<ChainAnchor> {
    const { rows } = await this.#read(() =>
      this.#pg.query<{ seq: string; digest: string }>(
        'SELECT seq, digest FROM chain_head WHERE id = 1',
      ),
    );
    const row = rows[0];
    if (row === undefined) throw this.#corrupt('the chain head row is missing');
    return { seq: Number(row.seq), digest: row.digest };
  }

  async prune(
    options: PruneOptions,
  ): Promise<{ readonly records: number; readonly receipts: number }> {
    // On the database's clock, never later than the journal asked: a worker whose own clock runs
    // ahead cannot prune what the fleet still keeps (DESIGN §15).
    const retention = Math.max(0, Math.trunc(options.retentionMs ?? 0));
    return this.#write('prune', options, async (client) => {
      const records =
        (
          await client.query(
            `DELETE FROM records WHERE expires_at IS NOT NULL
               AND expires_at <= LEAST($1::float8, ${DB_NOW_SQL})
               AND updated_at <= ${DB_NOW_SQL} - $2::float8`,
            [options.now, retention],
          )
        ).rowCount ?? 0;
      // Appends wait behind this lock, so the prefix chosen below stays a prefix.
      await client.query('SELECT seq FROM chain_head WHERE id = 1 FOR UPDATE');
      const firstKept = await client.query<{ seq: string }>(
        `SELECT seq FROM receipts WHERE at >= LEAST($1::float8, ${DB_NOW_SQL} - $2::float8)
         ORDER BY seq LIMIT 1`,
        [options.receiptsBefore, retention],
      );
      const bound = firstKept.rows[0]?.seq ?? '9223372036854775807';
      const last = await client.query<{ seq: string; digest: string }>(
        'SELECT seq, digest FROM receipts WHERE seq < $1 ORDER BY seq DESC LIMIT 1',
        [bound],
      );
      const lastRow = last.rows[0];
      if (lastRow === undefined) return { records, receipts: 0 };
      const receipts =
        (await client.query('DELETE FROM receipts WHERE seq <= $1', [lastRow.seq])).rowCount ?? 0;
      await client.query('UPDATE chain_anchor SET seq = $1, digest = $2 WHERE id = 1', [
        lastRow.seq,
        lastRow.digest,
      ]);
      // Chained in this transaction: a prefix deleted without a prune receipt naming its anchor shows.
      await append(
        client,
        pruneReceipt({ seq: Number(lastRow.seq), digest: lastRow.digest }, options.now),
        this.clock,
      );
      return { records, receipts };
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsHandle) await this.#pg.close();
  }

  async #read<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw this.#unavailable('closed', 'the journal is closed');
    try {
      return await fn();
    } catch (error) {
      throw this.#map(error);
    }
  }

  async #write<T>(
    what: string,
    options: StoreCallOptions,
    fn: (client: PgPoolClient) => Promise<T>,
  ): Promise<T> {
    if (this.#closed) throw this.#unavailable('closed', 'the journal is closed');
    try {
      const result = await this.#pg.tx(what, fn, { signal: options.signal });
      this.#alone++;
      return result;
    } catch (error) {
      throw this.#map(error);
    }
  }

  /** A write of the group commit: it resolves after the commit of the group that holds it. */
  async #grouped<T>(what: string, options: StoreCallOptions, write: GroupWrite): Promise<T> {
    if (this.#closed) throw this.#unavailable('closed', 'the journal is closed');
    try {
      return await this.group.add<T>(what, options.signal, write);
    } catch (error) {
      throw this.#map(error);
    }
  }

  /**
   * The database time after which a write before a send (`durable`) is refused there: the
   * caller's deadline on the database's clock, less its uncertainty (DESIGN §21.6). None without
   * a deadline or before the clock was measured.
   */
  #deadlineOf(options: { readonly durable?: boolean } & StoreCallOptions): number | undefined {
    const { deadline } = options;
    const guarded = options.durable === true && this.clock.measured;
    if (!guarded || deadline === undefined || !Number.isFinite(deadline)) return undefined;
    const left = deadline - performance.now();
    return Math.floor(this.clock.now() + left - this.clock.uncertaintyMs);
  }

  #map(error: unknown): StepbindError {
    if (error instanceof JournalError) return error;
    if (error instanceof RuntimeError && error.detail['pgCode'] === DEADLINE_PASSED) {
      return new JournalError(
        ErrorCode.JOURNAL_UNAVAILABLE,
        `The journal at ${this.location} did not answer in time: the database ran the write only after the caller's deadline, so it refused it and nothing was written. Check that PostgreSQL is running and answering (not frozen, not stuck behind another session).`,
        { detail: { path: this.location, reason: 'timeout' }, cause: error },
      );
    }
    // The caller's cancellation stays ABORTED; a store that did not answer in time keeps its
    // reason (`timeout`) under JOURNAL_UNAVAILABLE below.
    if (StepbindError.isInstance(error) && error.code === ErrorCode.ABORTED) return error;
    if (error instanceof RuntimeError) {
      return new JournalError(ErrorCode.JOURNAL_UNAVAILABLE, error.message, {
        detail: { ...error.detail, path: this.location },
        cause: error,
      });
    }
    return this.#unavailable('io', error instanceof Error ? error.message : String(error), error);
  }

  #unavailable(reason: string, why: string, cause?: unknown): JournalError {
    return new JournalError(
      ErrorCode.JOURNAL_UNAVAILABLE,
      `The journal ${this.location} cannot be used: ${this.#pg.redactor.text(why)}.${reason === 'closed' ? ' Open a new runtime.' : ''}`,
      { detail: { path: this.location, reason }, ...(cause === undefined ? {} : { cause }) },
    );
  }

  #corrupt(why: string, key?: string): JournalError {
    return new JournalError(
      ErrorCode.JOURNAL_CORRUPT,
      `The journal ${this.location} holds damaged data (${why}). Restore the database from a backup.`,
      {
        detail: { path: this.location, reason: 'malformed', ...(key === undefined ? {} : { key }) },
      },
    );
  }

  #toRecord(row: RecordRow): JournalRecord {
    try {
      if (!(JOURNAL_STATES as readonly string[]).includes(row.state)) throw new Error('bad state');
      return {
        key: row.key,
        state: row.state as JournalState,
        version: Number(row.version),
        attempt: Number(row.attempt),
        owner: row.owner,
        context: JSON.parse(row.context) as JournalRecord['context'],
        argsDigest: row.args_digest,
        createdAt: Number(row.created_at),
        updatedAt: Number(row.updated_at),
        leaseExpiresAt: Number(row.lease_expires_at),
        expiresAt: row.expires_at === null ? null : Number(row.expires_at),
        outcome: parseNullable(row.outcome) as JournalRecord['outcome'],
        error: parseNullable(row.error) as JournalRecord['error'],
        resolution: parseNullable(row.resolution) as JournalRecord['resolution'],
        ...(row.task_id === null ? {} : { taskId: row.task_id }),
      };
    } catch (error) {
      throw this.#corrupt(
        `record for key "${row.key}": ${error instanceof Error ? error.message : String(error)}`,
        row.key,
      );
    }
  }
}

/**
 * Chains `body` after the head, under the head row's lock (held until the transaction ends); the
 * same round trip measures the database's clock.
 */
async function append(
  client: PgPoolClient,
  body: ReceiptBody,
  clock: DatabaseClock,
): Promise<ReceiptEntry> {
  const before = clock.mark();
  const head = await client.query<{ seq: string; digest: string; now: string }>(
    `SELECT seq, digest, ${DB_NOW_SQL} AS now FROM chain_head WHERE id = 1 FOR UPDATE`,
  );
  const row = head.rows[0];
  // Not a clean measurement when the row lock was waited for: observe keeps the more precise one.
  clock.observe(before, Number(row?.now), clock.mark());
  if (row === undefined) throw new Error('the chain head row is missing');
  const entry = chainReceipt({ seq: Number(row.seq), digest: row.digest }, body);
  await client.query(
    'INSERT INTO receipts (seq, prev_digest, digest, key, at, body) VALUES ($1, $2, $3, $4, $5, $6)',
    [entry.seq, entry.prevDigest, entry.digest, body.key, body.at, entry.text],
  );
  await client.query('UPDATE chain_head SET seq = $1, digest = $2 WHERE id = 1', [
    entry.seq,
    entry.digest,
  ]);
  return entry;
}
