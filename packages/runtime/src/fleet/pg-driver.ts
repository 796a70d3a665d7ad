/**
 * The PostgreSQL driver of the fleet store: the part of `pg` it uses, as interfaces of our own, so
 * no published declaration names a type of `pg` or `@types/pg` (`pg.ts` loads the optional package
 * on first use). See DESIGN §17.4.
 */

/** A result row: column name to value. */
export type PgRow = Record<string, unknown>;

/** What a query answers (the part of `pg`'s `QueryResult` used). */
export interface PgQueryResult<R extends object = PgRow> {
  readonly rows: R[];
  /** Rows the statement returned or changed; `null` for a statement that reports none. */
  readonly rowCount: number | null;
}

/** A query given as an object (`pg`'s `QueryConfig`), with pg's per-query `query_timeout`. */
export interface PgQueryConfig {
  readonly text: string;
  readonly values?: unknown[];
  readonly query_timeout?: number;
}

/** Something queries run on: a pooled or a standalone client. */
export interface PgQueryable {
  query<R extends object = PgRow>(
    text: string | PgQueryConfig,
    values?: unknown[],
  ): Promise<PgQueryResult<R>>;
}

/** A client checked out of the pool; `release(error)` closes it instead of returning it. */
export interface PgPoolClient extends PgQueryable {
  release(error?: Error | boolean): void;
}

/** A `LISTEN` notification. */
export interface PgNotification {
  readonly channel: string;
  readonly payload?: string | undefined;
}

/** A standalone connection (`pg`'s `Client`), for `LISTEN` and session locks. */
export interface PgClient extends PgQueryable {
  connect(): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  on(event: 'notification', listener: (message: PgNotification) => void): unknown;
}

/** The SQLSTATE a PostgreSQL error carries (`error.code`), if any. */
export function sqlStateOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
