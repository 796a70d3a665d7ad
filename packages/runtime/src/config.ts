import { ConfigError, ErrorCode, type ApprovalMode } from '@stepbind/binding';
import { interpolate, type EnvironmentSource } from './interpolate.js';
import type { ToolFilterConfig } from './tool-filter.js';
import { parseStoreTarget, type FleetStoreTarget } from './fleet/target.js'; // fleet:

/**
 * Discovery limits (DESIGN §4) and call value bounds (`CallLimits` of `@stepbind/binding`: depth
 * and size of arguments and results) that may be set per server; unset ones take the defaults.
 */
export interface ServerLimits {
  readonly maxPages?: number;
  readonly maxTools?: number;
  readonly maxCursorBytes?: number;
  readonly totalTimeoutMs?: number;
  readonly maxRestarts?: number;
  /** @default 64 */
  readonly maxArgumentDepth?: number;
  /** @default 4194304 */
  readonly maxArgumentBytes?: number;
  /** @default 128 */
  readonly maxOutputDepth?: number;
  /** @default 16777216 */
  readonly maxOutputBytes?: number;
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
   * Which calls need an approval from the `prepare` hook (`ctx.approve()`), see `ApprovalMode`.
   * @default the runtime's `approval` option, else "unproven-writes"
   */
  readonly approval?: ApprovalMode;
  /** Raw tool names that never need an approval (Cline's `autoApprove`). @default [] */
  readonly autoApprove: readonly string[];
  /** Which tools are published: `allow`/`deny` globs, applied before model names are assigned. */
  readonly tools?: ToolFilterConfig;
  /** Roots offered to the server (`roots/list`): absolute paths or `file://` URIs. @default [] */
  readonly roots: readonly string[];
  /**
   * The largest single JSON-RPC message this server may send, in bytes (a stdio line, an HTTP JSON
   * body or one SSE event). Enforced while reading, before the message is buffered whole; a larger
   * one fails with `MESSAGE_TOO_LARGE`. @default 10485760 (10 MiB, {@link DEFAULT_MAX_MESSAGE_BYTES})
   */
  readonly maxMessageBytes: number;
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
  /**
   * The server's stderr: `pipe` keeps the last lines for start errors and delivers every line as a
   * `server-stderr` event; `inherit` shares this process's stderr; `ignore` drops it. @default "pipe"
   */
  readonly stderr: 'pipe' | 'inherit' | 'ignore';
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
  /** Servers present in the file with `"disabled": true` (validated, never started). */
  readonly disabled: readonly string[];
  /** The durable journal; absent: keys and receipts are kept in memory. */
  readonly journal?: JournalConfig;
  /** The shared PostgreSQL fleet store (`store`: a URL or `{ url, schema }`). */
  readonly store?: FleetStoreTarget; // fleet:
}

/** Options of {@link parseConfig}. */
export interface ParseConfigOptions {
  /** Where `${env:NAME}` / `${NAME}` references are resolved. @default process.env */
  readonly env?: EnvironmentSource;
}

/**
 * Default of `maxMessageBytes`: 10 MiB, the stdio buffer limit of the MCP SDK's own client, so a server
 * that works with SDK-based hosts (a tool result with a large image, a one-page catalog of thousands of
 * tools) also works here, while one runaway line cannot take the host's memory.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** Bounds of `maxMessageBytes`: 1 KiB to 256 MiB (a JSON text that V8 can still hold as a string). */
const MAX_MESSAGE_BYTES_RANGE = [1024, 256 * 1024 * 1024] as const;

/** Configured server names become model-name prefixes: keep them short and plain. */
export const SERVER_NAME_PATTERN = /^[A-Za-z0-9_-]{1,48}$/;

const TOP_KEYS = [
  '$schema',
  'mcpServers',
  'servers',
  'inputs',
  'concurrency',
  'journal',
  'store', // fleet:
] as const;
const COMMON_KEYS = [
  'type',
  'disabled',
  'required',
  'audience',
  'startupTimeoutMs',
  'requestTimeoutMs',
  'callTimeoutMs',
  'timeout',
  'limits',
  'approval',
  'autoApprove',
  'tools',
  'roots',
  'maxMessageBytes',
  'retryReads',
] as const;
const STDIO_KEYS: readonly string[] = [
  'command',
  'args',
  'env',
  'envPassthrough',
  'cwd',
  'stderr',
  ...COMMON_KEYS,
];
const HTTP_KEYS: readonly string[] = ['url', 'headers', ...COMMON_KEYS];
const LIMIT_KEYS = [
  'maxPages',
  'maxTools',
  'maxCursorBytes',
  'totalTimeoutMs',
  'maxRestarts',
  'maxArgumentDepth',
  'maxArgumentBytes',
  'maxOutputDepth',
  'maxOutputBytes',
] as const;
const TOOLS_KEYS = ['allow', 'deny'] as const;

/**
 * Validates a server configuration in the formats people already have: `mcpServers` (Claude
 * Desktop, Cursor, Cline) or VS Code's `servers` (with `type: "stdio" | "http"`; `inputs` is
 * accepted and ignored), extended per server with `required`, `audience`, timeouts, `limits`,
 * `approval`, `autoApprove`, `tools` filters and `disabled`; the top level may carry `concurrency`
 * and `$schema`. `${env:NAME}` and `${NAME}` in `command`, `args`, `env`, `cwd`, `url` and `headers`
 * are replaced from the environment. Unknown keys and bad values are rejected; the message lists the
 * keys allowed there. Every key is documented in the runtime README.
 *
 * @throws ConfigError `INVALID_CONFIG` whose `detail.path` is the JSON path of the problem
 *   (for example `$.mcpServers.files.args[2]`); never contains an interpolated value.
 */
export function parseConfig(input: unknown, options: ParseConfigOptions = {}): RuntimeConfig {
  const env = options.env ?? process.env;
  const root = expectObject(input, '$');
  checkKeys(root, '$', TOP_KEYS);
  if (root['inputs'] !== undefined) expectArray(root['inputs'], '$.inputs');
  const concurrency =
    root['concurrency'] === undefined ? 4 : expectInt(root['concurrency'], '$.concurrency', 1, 64);
  if (root['mcpServers'] !== undefined && root['servers'] !== undefined) {
    fail('$.servers', 'give the servers once, under "mcpServers" or under "servers", not both');
  }
  const journal = root['journal'] === undefined ? undefined : parseJournal(root['journal']);
  const key = root['servers'] !== undefined ? 'servers' : 'mcpServers';
  const serversObj = expectObject(root[key], `$.${key}`);
  const servers = new Map<string, ServerConfig>();
  const disabled: string[] = [];
  for (const [name, value] of Object.entries(serversObj)) {
    const path = `$.${key}${pathKey(name)}`;
    if (!SERVER_NAME_PATTERN.test(name)) {
      fail(path, `server name must match ${String(SERVER_NAME_PATTERN)}`);
    }
    const entry = expectObject(value, path);
    const off =
      entry['disabled'] === undefined ? false : expectBool(entry['disabled'], `${path}.disabled`);
    if (off) {
      // A disabled entry is checked for unknown keys only: it may name variables that are not set.
      checkKeys(entry, path, entry['url'] === undefined ? STDIO_KEYS : HTTP_KEYS);
      disabled.push(name);
      continue;
    }
    servers.set(name, parseServer(entry, path, env));
  }
  return Object.freeze({
    servers,
    concurrency,
    disabled: Object.freeze(disabled),
    ...(journal === undefined ? {} : { journal }),
    ...(root['store'] === undefined ? {} : { store: parseStoreTarget(root['store']) }), // fleet:
  });
}

const JOURNAL_KEYS = ['path', 'synchronous', 'retentionMs', 'inProgressTtlMs'] as const;

function parseJournal(value: unknown): JournalConfig {
  const obj = expectObject(value, '$.journal');
  checkKeys(obj, '$.journal', JOURNAL_KEYS);
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

function parseServer(
  obj: Record<string, unknown>,
  path: string,
  env: EnvironmentSource,
): ServerConfig {
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
  checkKeys(obj, path, hasCommand ? STDIO_KEYS : HTTP_KEYS);
  if (obj['timeout'] !== undefined && obj['callTimeoutMs'] !== undefined) {
    fail(`${path}.timeout`, 'give "timeout" (seconds, as Cline does) or "callTimeoutMs", not both');
  }
  const callTimeoutMs =
    obj['timeout'] === undefined
      ? optInt(obj['callTimeoutMs'], `${path}.callTimeoutMs`, 60_000)
      : expectInt(obj['timeout'], `${path}.timeout`, 1, 86_400) * 1000;
  const common: CommonServerConfig = {
    required:
      obj['required'] === undefined ? true : expectBool(obj['required'], `${path}.required`),
    audience:
      obj['audience'] === undefined ? 'default' : expectString(obj['audience'], `${path}.audience`),
    startupTimeoutMs: optInt(obj['startupTimeoutMs'], `${path}.startupTimeoutMs`, 30_000),
    requestTimeoutMs: optInt(obj['requestTimeoutMs'], `${path}.requestTimeoutMs`, 30_000),
    callTimeoutMs,
    limits: parseLimits(obj['limits'], `${path}.limits`),
    ...(obj['approval'] === undefined
      ? {}
      : { approval: expectOneOf(obj['approval'], `${path}.approval`, APPROVAL_MODES) }),
    autoApprove: stringList(obj['autoApprove'], `${path}.autoApprove`),
    roots: Object.freeze(
      stringList(obj['roots'], `${path}.roots`).map((root, i) => {
        const value = interpolate(root, `${path}.roots[${i}]`, env);
        if (!value.startsWith('file://') && !value.startsWith('/')) {
          fail(`${path}.roots[${i}]`, 'expected an absolute path or a file:// URI');
        }
        return value;
      }),
    ),
    ...(obj['tools'] === undefined
      ? {}
      : { tools: parseToolFilter(obj['tools'], `${path}.tools`) }),
    maxMessageBytes:
      obj['maxMessageBytes'] === undefined
        ? DEFAULT_MAX_MESSAGE_BYTES
        : expectInt(obj['maxMessageBytes'], `${path}.maxMessageBytes`, ...MAX_MESSAGE_BYTES_RANGE),
    retryReads:
      obj['retryReads'] === undefined ? false : expectBool(obj['retryReads'], `${path}.retryReads`),
  };
  const text = (value: unknown, at: string, allowEmpty = false): string =>
    interpolate(expectString(value, at, allowEmpty), at, env);
  if (hasCommand) {
    const args = obj['args'] === undefined ? [] : expectArray(obj['args'], `${path}.args`);
    const passthrough =
      obj['envPassthrough'] === undefined
        ? []
        : expectArray(obj['envPassthrough'], `${path}.envPassthrough`);
    const config: StdioServerConfig = {
      ...common,
      transport: 'stdio',
      command: text(obj['command'], `${path}.command`),
      args: Object.freeze(args.map((a, i) => text(a, `${path}.args[${i}]`, true))),
      env: expectStringRecord(
        obj['env'],
        `${path}.env`,
        ENV_NAME,
        'an environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
        env,
      ),
      envPassthrough: Object.freeze(
        passthrough.map((a, i) => {
          const name = expectString(a, `${path}.envPassthrough[${i}]`);
          if (!ENV_NAME.test(name)) {
            fail(
              `${path}.envPassthrough[${i}]`,
              `${JSON.stringify(name)} is not an environment variable name`,
            );
          }
          return name;
        }),
      ),
      ...(obj['cwd'] === undefined ? {} : { cwd: text(obj['cwd'], `${path}.cwd`) }),
      stderr:
        obj['stderr'] === undefined
          ? 'pipe'
          : expectOneOf(obj['stderr'], `${path}.stderr`, ['pipe', 'inherit', 'ignore'] as const),
    };
    return Object.freeze(config);
  }
  const url = text(obj['url'], `${path}.url`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    fail(`${path}.url`, 'is not a valid URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    fail(`${path}.url`, 'must be an http or https URL');
  }
  assertNoUrlCredentials(parsed, `${path}.url`);
  const config: HttpServerConfig = {
    ...common,
    transport: 'http',
    url,
    headers: expectStringRecord(
      obj['headers'],
      `${path}.headers`,
      HEADER_NAME,
      'an HTTP header name (RFC 9110 token)',
      env,
    ),
  };
  return Object.freeze(config);
}

function checkKeys(obj: Record<string, unknown>, path: string, allowed: readonly string[]): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) {
      fail(
        `${path}${pathKey(key)}`,
        `unknown key; the keys allowed here are ${allowed.join(', ')}`,
      );
    }
  }
}

function stringList(value: unknown, path: string): readonly string[] {
  if (value === undefined) return Object.freeze([]);
  return Object.freeze(expectArray(value, path).map((v, i) => expectString(v, `${path}[${i}]`)));
}

function parseToolFilter(value: unknown, path: string): ToolFilterConfig {
  const obj = expectObject(value, path);
  checkKeys(obj, path, TOOLS_KEYS);
  return Object.freeze({
    ...(obj['allow'] === undefined ? {} : { allow: stringList(obj['allow'], `${path}.allow`) }),
    ...(obj['deny'] === undefined ? {} : { deny: stringList(obj['deny'], `${path}.deny`) }),
  });
}

/**
 * Refuses a URL with a user name or password in it (`https://user:secret@host/mcp`): credentials
 * in a URL end up in logs, proxies and error messages. The message never repeats the URL.
 *
 * @throws ConfigError `INVALID_CONFIG` with `detail.path` = `path`.
 */
export function assertNoUrlCredentials(url: string | URL, path: string): void {
  let parsed: URL;
  try {
    parsed = typeof url === 'string' ? new URL(url) : url;
  } catch {
    fail(path, 'is not a valid URL');
  }
  if (parsed.username === '' && parsed.password === '') return;
  fail(
    path,
    'must not contain credentials ("user:password@"); send them in "headers" instead, for example "Authorization": "Bearer <token>" with the token read from an environment variable by your program',
  );
}

function parseLimits(value: unknown, path: string): ServerLimits {
  if (value === undefined) return Object.freeze({});
  const obj = expectObject(value, path);
  checkKeys(obj, path, LIMIT_KEYS);
  const out: Record<string, number> = {};
  for (const [key, v] of Object.entries(obj)) {
    const min = key === 'maxTools' || key === 'maxRestarts' ? 0 : 1;
    out[key] = expectInt(v, `${path}.${key}`, min, 2_147_483_647);
  }
  return Object.freeze(out);
}

/** The JSON path of one key of one server's entry, e.g. `$.mcpServers.files.cwd`. */
export function serverConfigPath(server: string, key: string): string {
  return `$.mcpServers${pathKey(server)}${pathKey(key)}`;
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

const APPROVAL_MODES = ['none', 'unproven-writes', 'all-writes'] as const;

function expectOneOf<const T extends readonly string[]>(
  value: unknown,
  path: string,
  options: T,
): T[number] {
  if (typeof value !== 'string' || !options.includes(value)) {
    fail(path, `expected one of ${options.map((o) => JSON.stringify(o)).join(', ')}`);
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

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function expectStringRecord(
  value: unknown,
  path: string,
  keyPattern: RegExp,
  keyKind: string,
  env: EnvironmentSource,
): Readonly<Record<string, string>> {
  if (value === undefined) return Object.freeze({});
  const obj = expectObject(value, path);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj)) {
    // `__proto__` is a syntactically fine name but would be dropped by a plain assignment.
    if (!keyPattern.test(k) || k === '__proto__') {
      fail(`${path}${pathKey(k)}`, `${JSON.stringify(k)} is not ${keyKind}`);
    }
    if (typeof v !== 'string') fail(`${path}${pathKey(k)}`, 'expected a string');
    out[k] = interpolate(v, `${path}${pathKey(k)}`, env);
  }
  return Object.freeze(out);
}
