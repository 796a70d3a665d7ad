/**
 * The one connection layer of the PostgreSQL fleet store: a `pg` pool confined to one schema,
 * bounded retries of work that provably did not take effect, and errors that never carry
 * credentials (the URL is shown through the shared redactor).
 */
import pg from 'pg';
import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding/internal';
import { createRedactor, redactUrl, type Redactor } from '../redact.js';
import { DEFAULT_FLEET_SCHEMA, parseStoreTarget, type FleetStoreTarget } from './target.js';

export { DEFAULT_FLEET_SCHEMA, parseStoreTarget, type FleetStoreTarget };

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
}

/** Why a store operation failed, in `detail.reason` of `STORE_UNAVAILABLE`. */
export type StoreFailureReason =
  'unreachable' | 'commit-unknown' | 'closed' | 'query' | 'newer-schema' | 'corrupt';

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
  readonly #config: pg.ClientConfig;
  readonly #pool: pg.Pool;
  readonly #maxAttempts: number;
  readonly #retryDelayMs: number;
  #closed = false;

  constructor(target: FleetStoreTarget, tuning: PgTuning = {}) {
    const checked = parseStoreTarget(target, '$.store');
    this.schema = checked.schema ?? DEFAULT_FLEET_SCHEMA;
    this.channel = `stepbind_policy_${this.schema}`;
    this.redactor = createRedactor(checked.url);
    this.location = `${redactUrl(checked.url)} (schema ${this.schema})`;
    this.#maxAttempts = Math.max(1, Math.trunc(tuning.maxAttempts ?? 6));
    this.#retryDelayMs = Math.max(1, tuning.retryDelayMs ?? 50);
    this.#config = {
      connectionString: checked.url,
      connectionTimeoutMillis: tuning.connectTimeoutMs ?? 5000,
      options: `-c search_path=${this.schema}`,
      application_name: 'stepbind',
    };
    this.#pool = new pg.Pool({ ...this.#config, max: tuning.poolSize ?? 4 });
    // An idle client whose server went away errors here; the pool replaces it on next use. A
    // checked-out one errors on itself: its query rejects, which is where the failure is handled.
    this.#pool.on('error', () => undefined);
    this.#pool.on('connect', (client) => client.on('error', () => undefined));
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** A fresh client outside the pool (for `LISTEN`), with this handle's settings. */
  client(applicationName = 'stepbind-listen'): pg.Client {
    return new pg.Client({ ...this.#config, application_name: applicationName });
  }

  /** A read, or a statement safe to repeat; retried on connection failures. */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values: readonly unknown[] = [],
    what = 'read',
  ): Promise<pg.QueryResult<R>> {
    return this.#retry(what, async () => {
      const client = await this.#connect();
      let broken: unknown;
      try {
        return await client.query<R>(text, values as unknown[]);
      } catch (error) {
        broken = isConnectionError(error) ? error : undefined;
        throw error;
      } finally {
        client.release(broken as Error | undefined);
      }
    });
  }

  /**
   * Runs `fn` in one transaction (`BEGIN` … `COMMIT`, or `SERIALIZABLE` when asked), retrying
   * the whole of it while the failure proves nothing committed.
   */
  async tx<T>(
    what: string,
    fn: (client: pg.PoolClient) => Promise<T>,
    options: { readonly serializable?: boolean } = {},
  ): Promise<T> {
    return this.#retry(what, async () => {
      const client = await this.#connect();
      let broken: unknown;
      let committing = false;
      try {
        await client.query(
          options.serializable === true ? 'BEGIN ISOLATION LEVEL SERIALIZABLE' : 'BEGIN',
        );
        const result = await fn(client);
        committing = true;
        await client.query('COMMIT');
        return result;
      } catch (error) {
        if (isConnectionError(error)) broken = error;
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
    });
  }

  /** A `STORE_UNAVAILABLE` error naming the store (redacted) and what failed. */
  failure(what: string, reason: StoreFailureReason, cause: unknown, why?: string): RuntimeError {
    const text =
      why ?? (cause instanceof Error ? this.redactor.text(cause.message) : String(cause));
    const error = new RuntimeError(
      ErrorCode.STORE_UNAVAILABLE,
      `The fleet store ${this.location} failed to ${what}: ${text}. Check that PostgreSQL is running and reachable; nothing that failed before committing was changed.`,
      {
        detail: { store: this.location, reason, ...pgCode(cause) },
        ...(cause === undefined ? {} : { cause }),
      },
    );
    return this.redactor.error(error);
  }

  /** Ends every pooled connection. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.end();
  }

  async #connect(): Promise<pg.PoolClient> {
    if (this.#closed) throw this.failure('connect', 'closed', undefined, 'the store is closed');
    return this.#pool.connect();
  }

  async #retry<T>(what: string, attempt: () => Promise<T>): Promise<T> {
    let delay = this.#retryDelayMs;
    for (let i = 1; ; i++) {
      try {
        return await attempt();
      } catch (error) {
        // A typed refusal (a publish conflict, an epoch that is not higher) is an answer, not a fault.
        if (StepbindError.isInstance(error)) throw error;
        const retryable = isConnectionError(error) || isSerializationFailure(error);
        if (!retryable || this.#closed) {
          throw retryable
            ? this.failure(what, 'unreachable', error)
            : this.failure(what, 'query', error);
        }
        if (i >= this.#maxAttempts) throw this.failure(what, 'unreachable', error);
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(2000, delay * 2);
      }
    }
  }
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

function isSerializationFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === '40001' || code === '40P01';
}

function pgCode(error: unknown): { readonly pgCode?: string } {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? { pgCode: code } : {};
}
