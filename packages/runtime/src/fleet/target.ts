/**
 * The `store` option of a runtime or configuration file, validated without loading the database
 * driver (a runtime without a fleet never loads `pg`).
 */
import { checkKeys, fail } from '../config-values.js';
import { interpolate, type EnvironmentSource } from '../interpolate.js';

/** Where a fleet keeps its shared state: a PostgreSQL URL and the schema inside that database. */
export interface FleetStoreTarget {
  /** `postgres://` or `postgresql://` URL (credentials allowed; they are never printed). */
  readonly url: string;
  /** Schema holding every table (created by the migrations). @default "stepbind" */
  readonly schema?: string;
}

/** The schema used when none is given. */
export const DEFAULT_FLEET_SCHEMA = 'stepbind';

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,47}$/;
const STORE_KEYS = ['url', 'schema'] as const;

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
        : fail(path, 'expected a postgres:// URL or { "url": ..., "schema": ... }');
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
  return Object.freeze({ url, ...(schema === undefined ? {} : { schema }) });
}
