/**
 * The one connection layer of the PostgreSQL fleet store: a `pg` pool confined to one schema,
 * bounded retries of work that provably did not take effect, and errors that never carry
 * credentials (the URL is shown through the shared redactor).
 */
import type pg from 'pg';
import {
  abortedError,
  ErrorCode,
  onAbort,
  RuntimeError,
  StepbindError,
} from '@stepbind/binding/internal';
import { Backoff } from '../backoff.js';
import { requireOptional } from '../optional-dependency.js';
import { createRedactor, redactUrl, type Redactor } from '../redact.js';
import type { PgClient, PgPoolClient, PgQueryResult, PgRow } from './pg-driver.js';
import { DEFAULT_FLEET_SCHEMA, parseStoreTarget, type FleetStoreTarget } from './target.js';

export { DEFAULT_FLEET_SCHEMA, parseStoreTarget, type FleetStoreTarget };

/** Upper bound of one retry delay of a store operation. */
const RETRY_MAX_DELAY_MS = 2000;

/** Connection tuning of the fleet store. */
export interface PgTuning {
  /** Attempts of one operation whose failure proves it had no effect (refused connection, a server restarting, a serialization failure). @default 6 */
  readonly maxAttempts?: number;
  /** Delay before the first retry; doubles per attempt, at most 2 s. @default 50 */
  readonly retryDelayMs?: number;
  /** Connection timeout. @default 5000 */
  readonly connectTimeoutMs?: number;
  /** Pool size. @default 4 */
  readonly poolSize?: number;
  /** The server's `statement_timeout` for every statement of this store. @default 10000 */
  readonly statementTimeoutMs?: number;
  /**
   * How long the client waits for any one answer (`query_timeout`): the bound on a database that
   * stopped answering (frozen, or a connection silently dropped). The connection is then closed,
   * never returned to the pool. @default statementTimeoutMs + 2000
   */
  readonly queryTimeoutMs?: number;
  /** The server's `idle_in_transaction_session_timeout`. @default 10000 */
  readonly idleInTransactionTimeoutMs?: number;
  /** TCP keepalive (always on): the idle time before the first probe. @default 10000 */
  readonly keepAliveInitialDelayMs?: number;
  /** How long `close()` waits for connections to end politely before destroying them. @default 1000 */
  readonly closeGraceMs?: number;
}

/** The last argument of a {@link PgHandle} operation. */
export interface PgCallOptions {
  /**
   * Gives up when it fires: the operation's connection is destroyed (so the server rolls back
   * what was not committed and nothing lingers), and it rejects with `STORE_UNAVAILABLE`
   * (`reason: 'timeout'`, for a `TimeoutError` reason) or `ABORTED`.
   */
  readonly signal?: AbortSignal | undefined;
}

/**
 * What a transaction's body tells {@link PgHandle.tx} when it sends the `COMMIT` itself
 * (`deferCommit`, the last statement of a one-round-trip string): `committing` once a failure may
 * have happened at or after that `COMMIT` started (a lost connection is then `commit-unknown`),
 * `committed` once its result returned.
 */
export interface TxCommit {
  committing: boolean;
  committed: boolean;
}

/**
 * The answer of a multi-statement simple query ({@link PgHandle.statements}): every statement's
 * result, or the error and how many statements completed before it (when the server reported the
 * error, the statement at that index is the one that failed and none after it ran).
 */
export type StatementsAnswer =
  | { readonly ok: true; readonly results: readonly PgQueryResult[] }
  | {
      readonly ok: false;
      readonly error: unknown;
      readonly completed: number;
      /** The row counts of the statements that completed (their rows are not kept). */
      readonly results: readonly PgQueryResult[];
      /** The server reported it (an `ErrorResponse`): `completed` is exact. */
      readonly reported: boolean;
    };

/** Why a store operation failed, in `detail.reason` of `STORE_UNAVAILABLE`. */
export type StoreFailureReason =
  'unreachable' | 'commit-unknown' | 'closed' | 'query' | 'newer-schema' | 'corrupt' | 'timeout';

/**
 * A pool confined to one schema (`search_path`), with bounded retries. Transactions retry only
 * while nothing can have committed: a failure before `COMMIT` was sent (the server rolls the
 * transaction back), or a refused connection. A connection lost during `COMMIT` is reported as
 * `commit-unknown`, never retried blindly.
 */
export class PgHandle {
  /** The redacted URL and schema, for messages. */
  readonly location: string;
  readonly schema: string;
  /** `LISTEN/NOTIFY` channel of this schema. */
  readonly channel: string;
  readonly redactor: Redactor;
  /** The `pg` module, loaded by the first handle made (an optional peer dependency). */
  readonly #pg: typeof pg;
  readonly #config: pg.ClientConfig;
  readonly #pool: pg.Pool;
  readonly #maxAttempts: number;
  readonly #retryDelayMs: number;
  readonly #closeGraceMs: number;
  /** Fires at `close()`: every pending operation is abandoned. */
  readonly #closing = new AbortController();
  /** Every client of the pool, to destroy those that do not end politely at close. */
  readonly #clients = new Set<PgClient>();
  #closed = false;
  /** Queries sent on pooled connections (round trips), counted at the driver, for tests and benchmarks. */
  roundTrips = 0;

  constructor(target: FleetStoreTarget, tuning: PgTuning = {}) {
    const checked = parseStoreTarget(target, '$.store');
    this.#pg = requireOptional<typeof pg>('pg', `the fleet store ${redactUrl(checked.url)}`);
    this.schema = checked.schema ?? DEFAULT_FLEET_SCHEMA;
    this.channel = `stepbind_policy_${this.schema}`;
    this.redactor = createRedactor(checked.url);
    this.location = `${redactUrl(checked.url)} (schema ${this.schema})`;
    this.#maxAttempts = Math.max(1, Math.trunc(tuning.maxAttempts ?? 6));
    this.#retryDelayMs = Math.max(1, tuning.retryDelayMs ?? 50);
    this.#closeGraceMs = Math.max(0, tuning.closeGraceMs ?? 1000);
    const statementTimeoutMs = Math.max(1, Math.trunc(tuning.statementTimeoutMs ?? 10_000));
    this.#config = {
      connectionString: checked.url,
      connectionTimeoutMillis: tuning.connectTimeoutMs ?? 5000,
      options: `-c search_path=${this.schema}`,
      application_name: 'stepbind',
      statement_timeout: statementTimeoutMs,
      query_timeout: Math.max(1, Math.trunc(tuning.queryTimeoutMs ?? statementTimeoutMs + 2000)),
      idle_in_transaction_session_timeout: Math.max(
        1,
        Math.trunc(tuning.idleInTransactionTimeoutMs ?? 10_000),
      ),
      keepAlive: true,
      keepAliveInitialDelayMillis: Math.max(0, tuning.keepAliveInitialDelayMs ?? 10_000),
    };
    this.#pool = new this.#pg.Pool({ ...this.#config, max: tuning.poolSize ?? 4 });
    // An idle client whose server went away errors here; the pool replaces it on next use. A
    // checked-out one errors on itself: its query rejects, which is where the failure is handled.
    this.#pool.on('error', () => undefined);
    this.#pool.on('connect', (client) => {
      this.#clients.add(client);
      client.on('error', () => undefined);
      // Every query of a pooled connection is one round trip: counted here, at the driver.
      const send = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
        this.roundTrips++;
        return send(...args);
      };
    });
    this.#pool.on('remove', (client) => this.#clients.delete(client));
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** A fresh client outside the pool (for `LISTEN`), with this handle's settings. */
  client(applicationName = 'stepbind-listen'): PgClient {
    return new this.#pg.Client({ ...this.#config, application_name: applicationName });
  }

  /** How long `close()` lets a connection end politely (for clients made by {@link client}). */
  get closeGraceMs(): number {
    return this.#closeGraceMs;
  }

  /** A read, or a statement safe to repeat; retried on connection failures. */
  async query<R extends object = PgRow>(
    text: string,
    values: readonly unknown[] = [],
    what = 'read',
    options: PgCallOptions = {},
  ): Promise<PgQueryResult<R>> {
    return this.#retry(what, options.signal, (signals) =>
      this.#withClient(what, signals, async (client) => {
        let broken: unknown;
        try {
          return await client.query<R>(text, values as unknown[]);
        } catch (error) {
          broken = isConnectionError(error) || isTimeout(error) ? error : undefined;
          throw error;
        } finally {
          client.release(broken as Error | undefined);
        }
      }),
    );
  }

  /**
   * Runs `fn` in one transaction (`BEGIN` … `COMMIT`, or `SERIALIZABLE` when asked), retrying
   * the whole of it while the failure proves nothing committed. For the fleet's stores.
   *
   * @internal
   */
  async tx<T>(
    what: string,
    fn: (client: PgPoolClient, commit: TxCommit) => Promise<T>,
    options: {
      readonly serializable?: boolean;
      /** `fn` sends the `BEGIN` itself, with its first statement (one round trip less). */
      readonly deferBegin?: boolean;
      /**
       * `fn` sends the `COMMIT` itself, as the last statement of a string, and says so in its
       * second argument ({@link TxCommit}); it must have committed when it returns.
       */
      readonly deferCommit?: boolean;
    } & PgCallOptions = {},
  ): Promise<T> {
    return this.#retry(what, options.signal, (signals) =>
      this.#withClient(what, signals, async (client) => {
        let broken: unknown;
        const commit: TxCommit = { committing: false, committed: false };
        try {
          if (options.deferBegin !== true) {
            await client.query(
              options.serializable === true ? 'BEGIN ISOLATION LEVEL SERIALIZABLE' : 'BEGIN',
            );
          }
          const result = await fn(client, commit);
          if (options.deferCommit === true) {
            if (!commit.committed) throw new Error(`${what}: the transaction was not committed`);
            return result;
          }
          commit.committing = true;
          await client.query('COMMIT');
          return result;
        } catch (error) {
          const committing = commit.committing;
          // A connection that timed out or was lost is closed, never rolled back over (it would wait).
          if (isConnectionError(error) || isTimeout(error)) broken = error;
          else await client.query('ROLLBACK').catch(() => undefined);
          if (committing && isConnectionError(error)) {
            throw this.failure(
              what,
              'commit-unknown',
              error,
              'the connection was lost while committing, so the change may or may not have been made',
            );
          }
          throw error;
        } finally {
          client.release(broken as Error | undefined);
        }
      }),
    );
  }

  /**
   * Sends `statements` as one multi-statement simple-protocol query (one round trip; values must
   * be literals already). Never rejects: a failure comes back with the number of statements that
   * completed before it, counted from the server's `CommandComplete` messages.
   *
   * @internal
   */
  statements(client: PgPoolClient, statements: readonly string[]): Promise<StatementsAnswer> {
    return new Promise((resolve) => {
      const done: PgQueryResult[] = [];
      // The text alone: a config object would be cloned property by property (pg's normalizeQueryConfig).
      const query = new this.#pg.Query(statements.join(';\n')) as unknown as {
        callback: (error: unknown, results: unknown) => void;
        handleCommandComplete: (...args: unknown[]) => void;
      };
      const complete = query.handleCommandComplete.bind(query);
      query.handleCommandComplete = (...args) => {
        done.push({ rows: [], rowCount: rowCountOf(args[0]) });
        complete(...args);
      };
      query.callback = (error, results) => {
        if (error !== null && error !== undefined) {
          const reported = typeof (error as { severity?: unknown }).severity === 'string';
          resolve({ ok: false, error, completed: done.length, results: done, reported });
          return;
        }
        const list = Array.isArray(results) ? results : [results];
        resolve({ ok: true, results: list as PgQueryResult[] });
      };
      (client as unknown as { query(submittable: unknown): unknown }).query(query);
    });
  }

  /** A `STORE_UNAVAILABLE` error naming the store (redacted) and what failed. */
  failure(what: string, reason: StoreFailureReason, cause: unknown, why?: string): RuntimeError {
    const text =
      why ?? (cause instanceof Error ? this.redactor.text(cause.message) : String(cause));
    const error = new RuntimeError(
      ErrorCode.STORE_UNAVAILABLE,
      `The fleet store ${this.location} failed to ${what}: ${text}. ${
        reason === 'timeout'
          ? 'Check that PostgreSQL is running and answering (not frozen, not stuck behind another session).'
          : 'Check that PostgreSQL is running and reachable; nothing that failed before committing was changed.'
      }`,
      {
        detail: { store: this.location, reason, ...pgCode(cause) },
        ...(cause === undefined ? {} : { cause }),
      },
    );
    return this.redactor.error(error);
  }

  /**
   * Abandons every pending operation and ends every pooled connection, destroying those that do
   * not end within `closeGraceMs` (a frozen server never answers the goodbye). Bounded; idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort(this.failure('finish', 'closed', undefined, 'the store was closed'));
    const ended = this.#pool.end().catch(() => undefined);
    if (!(await settlesWithin(ended, this.#closeGraceMs))) {
      for (const client of this.#clients) destroyClient(client);
      await settlesWithin(ended, this.#closeGraceMs);
    }
    this.#clients.clear();
  }

  /**
   * Runs `work` on a pooled client, abandoning it when one of `signals` fires: the client's connection is
   * destroyed (its pending query fails, the server rolls back what was not committed) and the
   * operation rejects at once with the typed reason.
   */
  async #withClient<T>(
    what: string,
    signals: Signals,
    work: (client: PgPoolClient) => Promise<T>,
  ): Promise<T> {
    if (this.#closed) throw this.failure('connect', 'closed', undefined, 'the store is closed');
    const fired = abortedOf(signals);
    if (fired !== undefined) throw this.abandoned(what, fired.reason);
    let client: PgPoolClient | undefined;
    let abandoned = false;
    const running = (async () => {
      const connected = await this.#pool.connect();
      if (abandoned) {
        connected.release(new Error('abandoned'));
        throw new Error('abandoned');
      }
      client = connected;
      return work(connected);
    })();
    return new Promise<T>((resolve, reject) => {
      const stop = onAnyAbort(signals, (signal) => {
        abandoned = true;
        if (client !== undefined) destroyClient(client);
        // The abandoned work still settles (its connection is gone); nothing waits for it.
        running.catch(() => undefined);
        reject(this.abandoned(what, signal.reason));
      });
      running.then(
        (value) => {
          stop();
          resolve(value);
        },
        (error: unknown) => {
          stop();
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }

  /** The error of an operation abandoned for `reason`: a timeout, the store's close, or ABORTED. */
  abandoned(what: string, reason: unknown): StepbindError {
    if (StepbindError.isInstance(reason)) return reason;
    if (isTimeout(reason)) return this.#timeout(what, reason);
    return abortedError(
      `The fleet store ${this.location} was asked to ${what} and the caller cancelled before it answered; the operation was abandoned (a write may or may not have been made).`,
      reason,
      { as: RuntimeError },
    );
  }

  #timeout(what: string, cause: unknown): RuntimeError {
    return this.failure(
      what,
      'timeout',
      cause,
      'the database did not answer in time (the call deadline or the store timeout passed), so the operation was abandoned and its connection closed; a write may or may not have been made',
    );
  }

  async #retry<T>(
    what: string,
    callerSignal: AbortSignal | undefined,
    attempt: (signals: Signals) => Promise<T>,
  ): Promise<T> {
    // Both watched, not combined: `AbortSignal.any` costs a signal and weak references per call.
    const signals: Signals =
      callerSignal === undefined ? [this.#closing.signal] : [callerSignal, this.#closing.signal];
    // Made at the first failure: most operations succeed at once and need none.
    let backoff: Backoff | undefined;
    for (;;) {
      try {
        return await attempt(signals);
      } catch (error) {
        // A typed refusal (a publish conflict, an epoch that is not higher) is an answer, not a fault.
        if (StepbindError.isInstance(error)) throw error;
        // A timeout proves nothing about what the server did: never retried.
        if (isTimeout(error)) throw this.#timeout(what, error);
        const retryable = isConnectionError(error) || isSerializationFailure(error);
        if (!retryable || this.#closed) {
          throw retryable
            ? this.failure(what, 'unreachable', error)
            : this.failure(what, 'query', error);
        }
        backoff ??= new Backoff({
          initialMs: this.#retryDelayMs,
          // A retryDelayMs above the usual cap is the first wait as given, as it always was.
          maxMs: Math.max(RETRY_MAX_DELAY_MS, this.#retryDelayMs),
          maxAttempts: this.#maxAttempts,
        });
        const delay = backoff.fail();
        if (delay === undefined) throw this.failure(what, 'unreachable', error);
        await pause(delay, signals);
        const fired = abortedOf(signals);
        if (fired !== undefined) throw this.abandoned(what, fired.reason);
      }
    }
  }
}

/**
 * True for a timeout: an abort reason `TimeoutError`, pg's `query_timeout` ("Query read
 * timeout"), or the server's `statement_timeout`/lock timeout cancelling a statement (57014).
 */
export function isTimeout(error: unknown): boolean {
  if (error instanceof Error && error.name === 'TimeoutError') return true;
  if ((error as { code?: unknown } | undefined)?.code === '57014') return true;
  return error instanceof Error && /Query read timeout/.test(error.message);
}

/** Destroys `client`'s socket: its pending query fails at once and the pool drops it. */
export function destroyClient(client: PgClient | PgPoolClient): void {
  (
    client as unknown as { connection?: { stream?: { destroy(): void } } }
  ).connection?.stream?.destroy();
}

/** True when `promise` settles within `ms` (an unref'd timer: never keeps the process up). */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Signals watched together: the first to fire (the first of them already aborted) wins. */
type Signals = readonly AbortSignal[];

/** The first of `signals` already aborted, if any (as `AbortSignal.any` would take its reason). */
function abortedOf(signals: Signals): AbortSignal | undefined {
  return signals.find((signal) => signal.aborted);
}

/**
 * Calls `callback` once, with the signal, when the first of `signals` aborts (as {@link onAbort},
 * for each); returns the function that unregisters it from all of them.
 */
function onAnyAbort(signals: Signals, callback: (signal: AbortSignal) => void): () => void {
  let done = false;
  const stops = signals.map((signal) =>
    onAbort(signal, () => {
      if (done) return;
      stop();
      callback(signal);
    }),
  );
  const stop = (): void => {
    done = true;
    for (const unregister of stops) unregister();
  };
  return stop;
}

function pause(ms: number, signals: Signals): Promise<void> {
  return new Promise((resolve) => {
    const stop = onAnyAbort(signals, () => {
      clearTimeout(timer);
      resolve();
    });
    const timer = setTimeout(() => {
      stop();
      resolve();
    }, ms);
  });
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOENT',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** True when the failure was the connection's (the server restarting, refused, dropped). */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  return /Connection terminated|connection error|not queryable|timeout exceeded when trying to connect|the database system is (starting up|shutting down)/i.test(
    error.message,
  );
}

/** The row count a `CommandComplete` message reports (`INSERT 0 1`, `UPDATE 3`), as pg reads it. */
function rowCountOf(message: unknown): number | null {
  const text = (message as { text?: unknown } | undefined)?.text;
  const match = typeof text === 'string' ? /^[A-Za-z]+(?: (\d+))?(?: (\d+))?/.exec(text) : null;
  const count = match?.[2] ?? match?.[1];
  return count === undefined ? null : Number(count);
}

function isSerializationFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === '40001' || code === '40P01';
}

function pgCode(error: unknown): { readonly pgCode?: string } {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? { pgCode: code } : {};
}
