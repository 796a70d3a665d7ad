/**
 * The `store` option of a runtime or configuration file, validated without loading the database
 * driver (a runtime without a fleet never loads `pg`).
 */
import { MAX_TIMER_MS } from '@stepbind/binding/internal';
import { checkKeys, expectInt, fail } from '../config-values.js';
import { interpolate, type EnvironmentSource } from '../interpolate.js';

/**
 * The bounds on a database that stops answering, settable in a configuration file's `store`
 * (DESIGN §15; defaults and meanings in `PgTuning` and `FleetOptions`).
 */
export interface FleetStoreTimeouts {
  /** Connection timeout. @default 5000 */
  readonly connectTimeoutMs?: number;
  /** The server's `statement_timeout`. @default 10000 */
  readonly statementTimeoutMs?: number;
  /** How long the client waits for any one answer. @default statementTimeoutMs + 2000 */
  readonly queryTimeoutMs?: number;
  /** The server's `idle_in_transaction_session_timeout`. @default 10000 */
  readonly idleInTransactionTimeoutMs?: number;
  /** TCP keepalive: idle time before the first probe. @default 10000 */
  readonly keepAliveInitialDelayMs?: number;
  /** How long `close()` waits for connections to end politely. @default 1000 */
  readonly closeGraceMs?: number;
  /** A policy view older than this refuses calls (`POLICY_STALE`). @default 10000 */
  readonly maxStalenessMs?: number;
}

/** Where a fleet keeps its shared state: a PostgreSQL URL and the schema inside that database. */
export interface FleetStoreTarget extends FleetStoreTimeouts {
  /** `postgres://` or `postgresql://` URL (credentials allowed; they are never printed). */
  readonly url: string;
  /** Schema holding every table (created by the migrations). @default "stepbind" */
  readonly schema?: string;
}

/** The schema used when none is given. */
export const DEFAULT_FLEET_SCHEMA = 'stepbind';

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,47}$/;
const TIMEOUT_KEYS = [
  'connectTimeoutMs',
  'statementTimeoutMs',
  'queryTimeoutMs',
  'idleInTransactionTimeoutMs',
  'keepAliveInitialDelayMs',
  'closeGraceMs',
  'maxStalenessMs',
] as const;
/** The keys of a `store` object. */
export const STORE_KEYS = ['url', 'schema', ...TIMEOUT_KEYS] as const;

/**
 * Validates a `store` value (`"postgres://…"` or `{ url, schema }`), as written in a configuration
 * file at `path` or given to `McpRuntime.open`. With `env` (a configuration file), `${env:NAME}`
 * references in the URL are replaced, so credentials can stay out of the file.
 *
 * @throws ConfigError `INVALID_CONFIG` naming `path` (the URL is never echoed).
 */
export function parseStoreTarget(
  value: unknown,
  path = '$.store',
  env?: EnvironmentSource,
): FleetStoreTarget {
  const obj: Record<string, unknown> =
    typeof value === 'string'
      ? { url: value }
      : typeof value === 'object' && value !== null && !Array.isArray(value)
        ? (value as Record<string, unknown>)
        : fail(path, 'expected a postgres:// URL or { "url": ..., "schema": ..., timeouts }');
  checkKeys(obj, path, STORE_KEYS);
  const urlPath = typeof value === 'string' ? path : `${path}.url`;
  const raw = obj['url'];
  if (typeof raw !== 'string') return fail(urlPath, 'expected a postgres:// URL string');
  const url = env === undefined ? raw : interpolate(raw, urlPath, env);
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (
    parsed === undefined ||
    (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:')
  ) {
    fail(urlPath, 'expected a URL starting with postgres:// or postgresql://');
  }
  const schema = obj['schema'];
  if (schema !== undefined && (typeof schema !== 'string' || !SCHEMA_PATTERN.test(schema))) {
    fail(`${path}.schema`, `expected a schema name matching ${String(SCHEMA_PATTERN)}`);
  }
  const timeouts: Record<string, number> = {};
  for (const key of TIMEOUT_KEYS) {
    if (obj[key] !== undefined)
      timeouts[key] = expectInt(obj[key], `${path}.${key}`, 1, MAX_TIMER_MS);
  }
  return Object.freeze({ url, ...(schema === undefined ? {} : { schema }), ...timeouts });
}
