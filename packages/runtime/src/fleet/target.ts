/**
 * The `store` option of a runtime or configuration file, validated without loading the database
 * driver (a runtime without a fleet never loads `pg`).
 */
import { ConfigError, ErrorCode } from '@stepbind/binding/internal';

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

/**
 * Validates a `store` value (`"postgres://…"` or `{ url, schema }`), as written in a configuration
 * file at `path` or given to `McpRuntime.open`.
 *
 * @throws ConfigError `INVALID_CONFIG` naming `path` (the URL is never echoed).
 */
export function parseStoreTarget(value: unknown, path = '$.store'): FleetStoreTarget {
  const fail = (at: string, why: string): never => {
    throw new ConfigError(ErrorCode.INVALID_CONFIG, `${at}: ${why}.`, { detail: { path: at } });
  };
  const obj: Record<string, unknown> =
    typeof value === 'string'
      ? { url: value }
      : typeof value === 'object' && value !== null && !Array.isArray(value)
        ? (value as Record<string, unknown>)
        : fail(path, 'expected a postgres:// URL or { "url": ..., "schema": ... }');
  for (const key of Object.keys(obj)) {
    if (key !== 'url' && key !== 'schema') {
      fail(`${path}.${key}`, 'unknown key; allowed here: url, schema');
    }
  }
  const urlPath = typeof value === 'string' ? path : `${path}.url`;
  const url = obj['url'];
  if (typeof url !== 'string') return fail(urlPath, 'expected a postgres:// URL string');
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
  return Object.freeze({ url, ...(schema === undefined ? {} : { schema: schema as string }) });
}
