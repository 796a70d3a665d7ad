import { DEFAULT_DISCOVERY_LIMITS } from '@stepbind/binding/internal';
import {
  checkKeys,
  DEFAULT_MAX_MESSAGE_BYTES,
  expectBool,
  expectInt,
  expectObject,
  expectOneOf,
  expectArray,
  expectString,
  fail,
  optInt,
  parseProtocol,
  pathKey,
  stringList,
  type CommonServerConfig,
  type ServerLimits,
} from './config-values.js';
import {
  configTextOf,
  type ConfigDialect,
  type ConfigText,
  type EnvironmentSource,
} from './interpolate.js';
import type { ToolFilterConfig } from './tool-filter.js';
import { parseStoreTarget, type FleetStoreTarget } from './fleet/target.js';
import {
  parseTransportConfig,
  transportKeysOf,
  type ServerConfig,
  type TransportKind,
} from './transports/index.js';

export {
  assertNoUrlCredentials,
  DEFAULT_MAX_MESSAGE_BYTES,
  serverConfigPath,
} from './config-values.js';
export type { CommonServerConfig, ProtocolPin, ServerLimits } from './config-values.js';
export type { HttpServerConfig, ServerConfig, StdioServerConfig } from './transports/index.js';

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
  /**
   * How long an operation waits for another process holding the file's lock before it fails
   * `JOURNAL_BUSY` (see `SqliteJournalOptions.busyTimeoutMs`). @default 5000
   */
  readonly busyTimeoutMs?: number;
}

/** A validated `mcpServers` configuration, with defaults applied. */
export interface RuntimeConfig {
  /** Servers by configured name, in file order. */
  readonly servers: ReadonlyMap<string, ServerConfig>;
  /** How many servers may be starting or discovering at once. @default 4 */
  readonly concurrency: number;
  /** Servers present in the file with `"disabled": true` (validated, never started). */
  readonly disabled: readonly string[];
  /** The durable journal; absent: keys and receipts are kept in memory. */
  readonly journal?: JournalConfig;
  /** The shared PostgreSQL fleet store (`store`: a URL or `{ url, schema }`, DESIGN §15). */
  readonly store?: FleetStoreTarget;
}

/** Options of {@link parseConfig}. */
export interface ParseConfigOptions {
  /** Where `${env:NAME}` / `${NAME}` references are resolved. @default process.env */
  readonly env?: EnvironmentSource;
}

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
  'store',
] as const;
const COMMON_KEYS = [
  'type',
  'disabled',
  'required',
  'audience',
  'startupTimeoutMs',
  'protocol',
  'discoverTimeoutMs',
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
  'trustAnnotations',
] as const;
/** Every key a server entry of `kind` may have, its transport's first. */
function serverKeysOf(kind: TransportKind): readonly string[] {
  return [...transportKeysOf(kind), ...COMMON_KEYS];
}
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
/** The keys of a plain (Claude Desktop / Cursor) server entry: a file of these alone is read as such. */
const CLAUDE_DESKTOP_SERVER_KEYS: readonly string[] = ['command', 'args', 'env'];

/**
 * The dialect of a configuration file (see {@link ConfigDialect}): `vscode` for `servers`;
 * `claude-desktop` for `mcpServers` alone whose entries have only `command`, `args` and `env`;
 * `stepbind` for `mcpServers` with any other key (`$schema`, `concurrency`, `journal`, `store`, or
 * a server key such as `url`, `cwd`, `tools`, `required`).
 */
export function configDialectOf(root: Readonly<Record<string, unknown>>): ConfigDialect {
  if (root['servers'] !== undefined) return 'vscode';
  if (Object.keys(root).some((key) => key !== 'mcpServers')) return 'stepbind';
  const servers = root['mcpServers'];
  if (typeof servers !== 'object' || servers === null) return 'stepbind';
  const plain = Object.values(servers).every(
    (entry: unknown) =>
      typeof entry === 'object' &&
      entry !== null &&
      Object.keys(entry).every((key) => CLAUDE_DESKTOP_SERVER_KEYS.includes(key)),
  );
  return plain ? 'claude-desktop' : 'stepbind';
}

/**
 * Validates a server configuration in the formats people already have: `mcpServers` (Claude
 * Desktop, Cursor, Cline) or VS Code's `servers` (with `type: "stdio" | "http"`; `inputs` is
 * accepted and ignored), extended per server with `required`, `audience`, timeouts, `limits`,
 * `approval`, `autoApprove`, `tools` filters, `disabled` and (HTTP) `auth`; the top level may carry `concurrency`
 * and `$schema`. `${env:NAME}` and `${NAME}` in `command`, `args`, `env`, `cwd`, `url`, `headers`
 * and `auth` are replaced from the environment, unless the file is a plain Claude Desktop / Cursor one
 * ({@link configDialectOf}): there only Cursor's `${env:NAME}` is replaced and `$$`, `${NAME}` are
 * kept as written, as those applications keep them. Unknown keys and bad values are rejected; the message lists the
 * keys allowed there. Every key is documented in the runtime README.
 *
 * @throws ConfigError `INVALID_CONFIG` whose `detail.path` is the JSON path of the problem
 *   (for example `$.mcpServers.files.args[2]`); never contains an interpolated value.
 */
export function parseConfig(input: unknown, options: ParseConfigOptions = {}): RuntimeConfig {
  const env = options.env ?? process.env;
  const root = expectObject(input, '$');
  const read = configTextOf(configDialectOf(root), env);
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
      checkKeys(entry, path, serverKeysOf(entry['url'] === undefined ? 'stdio' : 'http'));
      disabled.push(name);
      continue;
    }
    servers.set(name, parseServer(entry, path, read));
  }
  return Object.freeze({
    servers,
    concurrency,
    disabled: Object.freeze(disabled),
    ...(journal === undefined ? {} : { journal }),
    ...(root['store'] === undefined
      ? {}
      : { store: parseStoreTarget(root['store'], '$.store', env) }),
  });
}

const JOURNAL_KEYS = [
  'path',
  'synchronous',
  'retentionMs',
  'inProgressTtlMs',
  'busyTimeoutMs',
] as const;

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
    ...(obj['busyTimeoutMs'] === undefined
      ? {}
      : {
          busyTimeoutMs: expectInt(
            obj['busyTimeoutMs'],
            '$.journal.busyTimeoutMs',
            0,
            2_147_483_647,
          ),
        }),
  });
}

function parseServer(obj: Record<string, unknown>, path: string, read: ConfigText): ServerConfig {
  const hasCommand = obj['command'] !== undefined;
  const hasUrl = obj['url'] !== undefined;
  if (hasCommand === hasUrl) fail(path, 'needs exactly one of "command" (stdio) or "url" (http)');
  const type = obj['type'];
  if (
    type !== undefined &&
    type !== (hasCommand ? 'stdio' : 'http') &&
    !(hasUrl && (type === 'streamable-http' || type === 'sse'))
  ) {
    fail(`${path}.type`, `does not match the ${hasCommand ? 'command' : 'url'} given`);
  }
  if (hasCommand && obj['auth'] !== undefined) {
    fail(
      `${path}.auth`,
      'is for HTTP servers ("url") only; give a stdio server its credentials in "env"',
    );
  }
  const kind = hasCommand ? 'stdio' : type === 'sse' ? 'sse' : 'http';
  checkKeys(obj, path, serverKeysOf(kind));
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
    ...parseProtocol(obj, path),
    requestTimeoutMs: optInt(
      obj['requestTimeoutMs'],
      `${path}.requestTimeoutMs`,
      DEFAULT_DISCOVERY_LIMITS.requestTimeoutMs,
    ),
    callTimeoutMs,
    limits: parseLimits(obj['limits'], `${path}.limits`),
    ...(obj['approval'] === undefined
      ? {}
      : { approval: expectOneOf(obj['approval'], `${path}.approval`, APPROVAL_MODES) }),
    autoApprove: stringList(obj['autoApprove'], `${path}.autoApprove`),
    roots: Object.freeze(
      stringList(obj['roots'], `${path}.roots`).map((root, i) => {
        const value = read(root, `${path}.roots[${i}]`);
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
    trustAnnotations:
      obj['trustAnnotations'] === undefined
        ? false
        : expectBool(obj['trustAnnotations'], `${path}.trustAnnotations`),
  };
  const text = (value: unknown, at: string, allowEmpty = false): string =>
    read(expectString(value, at, allowEmpty), at);
  return parseTransportConfig(kind, obj, path, common, text, read);
}

function parseToolFilter(value: unknown, path: string): ToolFilterConfig {
  const obj = expectObject(value, path);
  checkKeys(obj, path, TOOLS_KEYS);
  return Object.freeze({
    ...(obj['allow'] === undefined ? {} : { allow: stringList(obj['allow'], `${path}.allow`) }),
    ...(obj['deny'] === undefined ? {} : { deny: stringList(obj['deny'], `${path}.deny`) }),
  });
}

function parseLimits(value: unknown, path: string): ServerLimits {
  if (value === undefined) return Object.freeze({});
  const obj = expectObject(value, path);
  checkKeys(obj, path, LIMIT_KEYS);
  const out: Record<string, number> = {};
  for (const [key, v] of Object.entries(obj)) {
    // The minimums of binding's `DISCOVERY_LIMIT_MINIMUMS` (0 means "none" for these two),
    // repeated here: the two must stay equal.
    const min = key === 'maxTools' || key === 'maxRestarts' ? 0 : 1;
    out[key] = expectInt(v, `${path}.${key}`, min, 2_147_483_647);
  }
  return Object.freeze(out);
}

const APPROVAL_MODES = ['none', 'unproven-writes', 'all-writes'] as const;
