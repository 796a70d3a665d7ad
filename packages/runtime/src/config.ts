import { ConfigError, ErrorCode } from '@stepbind/binding';

/** Discovery limits that may be set per server (see DESIGN §4 for the defaults). */
export interface ServerLimits {
  readonly maxPages?: number;
  readonly maxTools?: number;
  readonly maxCursorBytes?: number;
  readonly totalTimeoutMs?: number;
  readonly maxRestarts?: number;
}

interface CommonServerConfig {
  /** A required server that fails makes `open`/refresh fail; an optional one is left out. @default true */
  readonly required: boolean;
  /** The audience class whose catalogs this server's tools belong to. @default "default" */
  readonly audience: string;
  /** Budget to start the process (or open the session) and finish `initialize`. @default 30000 */
  readonly startupTimeoutMs: number;
  /** Budget for each `tools/list` request. @default 30000 */
  readonly requestTimeoutMs: number;
  /** Default budget for each `tools/call`. @default 60000 */
  readonly callTimeoutMs: number;
  /** Discovery limits for this server. */
  readonly limits: ServerLimits;
  /**
   * Under an idempotency key whose outcome is unknown, this server's `read` tools may be sent
   * again (tools of other effect classes never are). @default false
   */
  readonly retryReads: boolean;
}

/** A server started as a child process speaking MCP over stdio. */
export interface StdioServerConfig extends CommonServerConfig {
  readonly transport: 'stdio';
  readonly command: string;
  readonly args: readonly string[];
  /** Extra environment variables, on top of the SDK's safe default set (PATH, HOME, ...). */
  readonly env: Readonly<Record<string, string>>;
  /** Names of variables copied from this process's environment when they are set. */
  readonly envPassthrough: readonly string[];
  readonly cwd?: string;
}

/** A server reached over Streamable HTTP. */
export interface HttpServerConfig extends CommonServerConfig {
  readonly transport: 'http';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** One validated server entry. */
export type ServerConfig = StdioServerConfig | HttpServerConfig;

/** The durable execution journal (DESIGN §13), the `journal` key of a configuration file. */
export interface JournalConfig {
  /** The SQLite file (created when missing). Relative paths resolve against the config file's directory when loaded with `loadConfigFile`, else the working directory. */
  readonly path: string;
  /** Durability of the write before each send (see `SqliteJournalOptions`). @default 'full' */
  readonly synchronous?: 'full' | 'normal';
  /** How long completed and not-sent records and receipts are kept. @default 86400000 (24 h) */
  readonly retentionMs?: number;
  /** In-progress expiry of a key whose holder went silent. @default 600000 (10 min) */
  readonly inProgressTtlMs?: number;
}

/** A validated `mcpServers` configuration, with defaults applied. */
export interface RuntimeConfig {
  /** Servers by configured name, in file order. */
  readonly servers: ReadonlyMap<string, ServerConfig>;
  /** How many servers may be starting or enumerating at once. @default 4 */
  readonly concurrency: number;
  /** The durable journal; absent: keys and receipts are kept in memory. */
  readonly journal?: JournalConfig;
}

/** Configured server names become model-name prefixes: keep them short and plain. */
export const SERVER_NAME_PATTERN = /^[A-Za-z0-9_-]{1,48}$/;

const STDIO_KEYS = new Set([
  'command',
  'args',
  'env',
  'envPassthrough',
  'cwd',
  'type',
  'required',
  'audience',
  'startupTimeoutMs',
  'requestTimeoutMs',
  'callTimeoutMs',
  'limits',
  'retryReads',
]);
const HTTP_KEYS = new Set([
  'url',
  'headers',
  'type',
  'required',
  'audience',
  'startupTimeoutMs',
  'requestTimeoutMs',
  'callTimeoutMs',
  'limits',
  'retryReads',
]);
const LIMIT_KEYS = [
  'maxPages',
  'maxTools',
  'maxCursorBytes',
  'totalTimeoutMs',
  'maxRestarts',
] as const;

/**
 * Validates an `mcpServers` configuration (the JSON format of Claude Desktop, Cursor and VS Code,
 * extended per server with `required`, `audience`, timeouts, `limits` and `retryReads`; top level
 * may carry `concurrency` and `journal`). Unknown keys and bad values are rejected.
 *
 * @throws ConfigError `INVALID_CONFIG` whose `detail.path` is the JSON path of the problem
 *   (for example `$.mcpServers.files.args[2]`).
 */
export function parseConfig(input: unknown): RuntimeConfig {
  const root = expectObject(input, '$');
  for (const key of Object.keys(root)) {
    if (key !== 'mcpServers' && key !== 'concurrency' && key !== 'journal') {
      fail(`$.${key}`, 'unknown key');
    }
  }
  const concurrency =
    root['concurrency'] === undefined ? 4 : expectInt(root['concurrency'], '$.concurrency', 1, 64);
  const journal = root['journal'] === undefined ? undefined : parseJournal(root['journal']);
  const serversObj = expectObject(root['mcpServers'], '$.mcpServers');
  const servers = new Map<string, ServerConfig>();
  for (const [name, value] of Object.entries(serversObj)) {
    const path = `$.mcpServers${pathKey(name)}`;
    if (!SERVER_NAME_PATTERN.test(name)) {
      fail(path, `server name must match ${String(SERVER_NAME_PATTERN)}`);
    }
    servers.set(name, parseServer(value, path));
  }
  return Object.freeze({ servers, concurrency, ...(journal === undefined ? {} : { journal }) });
}

const JOURNAL_KEYS = new Set(['path', 'synchronous', 'retentionMs', 'inProgressTtlMs']);

function parseJournal(value: unknown): JournalConfig {
  const obj = expectObject(value, '$.journal');
  for (const key of Object.keys(obj)) {
    if (!JOURNAL_KEYS.has(key)) fail(`$.journal${pathKey(key)}`, 'unknown key');
  }
  const synchronous = obj['synchronous'];
  if (synchronous !== undefined && synchronous !== 'full' && synchronous !== 'normal') {
    fail('$.journal.synchronous', 'expected "full" or "normal"');
  }
  return Object.freeze({
    path: expectString(obj['path'], '$.journal.path'),
    ...(synchronous === undefined ? {} : { synchronous }),
    ...(obj['retentionMs'] === undefined
      ? {}
      : {
          retentionMs: expectInt(
            obj['retentionMs'],
            '$.journal.retentionMs',
            1,
            Number.MAX_SAFE_INTEGER,
          ),
        }),
    ...(obj['inProgressTtlMs'] === undefined
      ? {}
      : {
          inProgressTtlMs: expectInt(
            obj['inProgressTtlMs'],
            '$.journal.inProgressTtlMs',
            1,
            Number.MAX_SAFE_INTEGER,
          ),
        }),
  });
}

function parseServer(value: unknown, path: string): ServerConfig {
  const obj = expectObject(value, path);
  const hasCommand = obj['command'] !== undefined;
  const hasUrl = obj['url'] !== undefined;
  if (hasCommand === hasUrl) fail(path, 'needs exactly one of "command" (stdio) or "url" (http)');
  const type = obj['type'];
  if (type === 'sse') {
    fail(`${path}.type`, 'the legacy SSE transport is not supported; use Streamable HTTP ("http")');
  }
  if (
    type !== undefined &&
    type !== (hasCommand ? 'stdio' : 'http') &&
    !(hasUrl && type === 'streamable-http')
  ) {
    fail(`${path}.type`, `does not match the ${hasCommand ? 'command' : 'url'} given`);
  }
  const allowed = hasCommand ? STDIO_KEYS : HTTP_KEYS;
  for (const key of Object.keys(obj)) {
    if (!allowed.has(key)) fail(`${path}${pathKey(key)}`, 'unknown key');
  }
  const common: CommonServerConfig = {
    required:
      obj['required'] === undefined ? true : expectBool(obj['required'], `${path}.required`),
    audience:
      obj['audience'] === undefined ? 'default' : expectString(obj['audience'], `${path}.audience`),
    startupTimeoutMs: optInt(obj['startupTimeoutMs'], `${path}.startupTimeoutMs`, 30_000),
    requestTimeoutMs: optInt(obj['requestTimeoutMs'], `${path}.requestTimeoutMs`, 30_000),
    callTimeoutMs: optInt(obj['callTimeoutMs'], `${path}.callTimeoutMs`, 60_000),
    limits: parseLimits(obj['limits'], `${path}.limits`),
    retryReads:
      obj['retryReads'] === undefined ? false : expectBool(obj['retryReads'], `${path}.retryReads`),
  };
  if (hasCommand) {
    const args = obj['args'] === undefined ? [] : expectArray(obj['args'], `${path}.args`);
    const passthrough =
      obj['envPassthrough'] === undefined
        ? []
        : expectArray(obj['envPassthrough'], `${path}.envPassthrough`);
    const config: StdioServerConfig = {
      ...common,
      transport: 'stdio',
      command: expectString(obj['command'], `${path}.command`),
      args: Object.freeze(args.map((a, i) => expectString(a, `${path}.args[${i}]`, true))),
      env: expectStringRecord(obj['env'], `${path}.env`),
      envPassthrough: Object.freeze(
        passthrough.map((a, i) => expectString(a, `${path}.envPassthrough[${i}]`)),
      ),
      ...(obj['cwd'] === undefined ? {} : { cwd: expectString(obj['cwd'], `${path}.cwd`) }),
    };
    return Object.freeze(config);
  }
  const url = expectString(obj['url'], `${path}.url`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    fail(`${path}.url`, 'is not a valid URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    fail(`${path}.url`, 'must be an http or https URL');
  }
  const config: HttpServerConfig = {
    ...common,
    transport: 'http',
    url,
    headers: expectStringRecord(obj['headers'], `${path}.headers`),
  };
  return Object.freeze(config);
}

function parseLimits(value: unknown, path: string): ServerLimits {
  if (value === undefined) return Object.freeze({});
  const obj = expectObject(value, path);
  const out: Record<string, number> = {};
  for (const [key, v] of Object.entries(obj)) {
    if (!(LIMIT_KEYS as readonly string[]).includes(key))
      fail(`${path}${pathKey(key)}`, 'unknown key');
    const min = key === 'maxTools' || key === 'maxRestarts' ? 0 : 1;
    out[key] = expectInt(v, `${path}.${key}`, min, 2_147_483_647);
  }
  return Object.freeze(out);
}

function fail(path: string, problem: string): never {
  throw new ConfigError(ErrorCode.INVALID_CONFIG, `Invalid configuration at ${path}: ${problem}.`, {
    detail: { path },
  });
}

function pathKey(key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

function expectObject(value: unknown, path: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(path, 'expected an object');
  }
  return value as Record<string, unknown>;
}

function expectArray(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value)) fail(path, 'expected an array');
  return value;
}

function expectString(value: unknown, path: string, allowEmpty = false): string {
  if (typeof value !== 'string' || (!allowEmpty && value.length === 0)) {
    fail(path, allowEmpty ? 'expected a string' : 'expected a non-empty string');
  }
  return value;
}

function expectBool(value: unknown, path: string): boolean {
  if (typeof value !== 'boolean') fail(path, 'expected true or false');
  return value;
}

function expectInt(value: unknown, path: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(path, `expected an integer from ${min} to ${max}`);
  }
  return value;
}

function optInt(value: unknown, path: string, fallback: number): number {
  return value === undefined ? fallback : expectInt(value, path, 1, 2_147_483_647);
}

function expectStringRecord(value: unknown, path: string): Readonly<Record<string, string>> {
  if (value === undefined) return Object.freeze({});
  const obj = expectObject(value, path);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (typeof v !== 'string') fail(`${path}${pathKey(k)}`, 'expected a string');
    out[k] = v;
  }
  return Object.freeze(out);
}
