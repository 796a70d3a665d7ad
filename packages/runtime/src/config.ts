import { basename, dirname, isAbsolute, resolve } from 'node:path';
import { DEFAULT_DISCOVERY_LIMITS } from '@stepbind/binding/internal';
import {
  ConfigProblems,
  DEFAULT_IDLE_TIMEOUT_MS,
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
  type EditorVariables,
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
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  serverConfigPath,
} from './config-values.js';
export type {
  CommonServerConfig,
  ConfigProblem,
  ProtocolPin,
  ServerLimits,
} from './config-values.js';
export type { HttpServerConfig, ServerConfig, StdioServerConfig } from './transports/index.js';

/** The durable execution journal (DESIGN §13), the `journal` key of a configuration file. */
export interface JournalConfig {
  /**
   * The SQLite file (created when missing). In a configuration file (`loadConfigFile`,
   * `McpRuntime.open(path)`), a relative path resolves against the file's directory; in a
   * configuration passed as an object, against the working directory.
   */
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
  /**
   * The SQLite library: `auto` (`node:sqlite` where the running Node has it, else
   * `better-sqlite3`), `node:sqlite` or `better-sqlite3` (see `SqliteJournalOptions.driver`).
   * @default 'auto'
   */
  readonly driver?: 'auto' | 'node:sqlite' | 'better-sqlite3';
}

/** The persistent catalog cache (DESIGN §19.1), the `cache` key of a configuration file. */
export interface CatalogCacheConfig {
  /**
   * The JSON file (created with its folder on the first write). In a configuration file, a
   * relative path resolves against the file's directory; in a configuration passed as an object,
   * against the working directory.
   */
  readonly path: string;
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
  /** The persistent catalog cache; `false` turns it off (also the CLI's default one); absent: none. */
  readonly cache?: CatalogCacheConfig | false;
}

/** Options of {@link parseConfig}. */
export interface ParseConfigOptions {
  /** Where `${env:NAME}` / `${NAME}` references are resolved. @default process.env */
  readonly env?: EnvironmentSource;
  /**
   * The file the configuration was read from. Relative paths in it (`journal.path`, `cache.path`, a stdio
   * `cwd`, `roots`) then resolve against its directory, and `${workspaceFolder}` is its workspace
   * folder ({@link workspaceFolderOf}). Absent: relative paths stay as written (the working
   * directory's), relative `roots` and `${workspaceFolder}` are refused.
   */
  readonly file?: string;
  /** What `${userHome}` stands for. @default os.homedir() */
  readonly userHome?: string;
}

/**
 * The workspace folder of a configuration file, as VS Code sees it: the parent of the `.vscode`
 * (or Cursor's `.cursor`) directory when the file is in one, else the file's own directory.
 */
export function workspaceFolderOf(file: string): string {
  const dir = dirname(resolve(file));
  const name = basename(dir);
  return name === '.vscode' || name === '.cursor' ? dirname(dir) : dir;
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
  'cache',
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
  'start',
  'idleTimeoutMs',
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
 * Every problem is reported at once: an unknown key names its path and the nearest allowed key
 * (`$.mcpServers.files.comand: unknown key (did you mean "command"?)`).
 *
 * @throws ConfigError `INVALID_CONFIG` whose `detail.errors` lists every problem as `{ path,
 *   message }` (the message spells out the first few) and whose `detail.path` is the first one's
 *   JSON path (for example `$.mcpServers.files.args[2]`); never contains an interpolated value.
 */
export function parseConfig(input: unknown, options: ParseConfigOptions = {}): RuntimeConfig {
  const env = options.env ?? process.env;
  const file = options.file === undefined ? undefined : resolve(options.file);
  const base = file === undefined ? undefined : dirname(file);
  const p = new ConfigProblems();
  const root = p.read(() => expectObject(input, '$'), undefined) ?? p.raise();
  const editor: EditorVariables = {
    ...(file === undefined ? {} : { workspaceFolder: workspaceFolderOf(file) }),
    ...(options.userHome === undefined ? {} : { userHome: options.userHome }),
  };
  const read = configTextOf(configDialectOf(root), env, editor);
  p.checkKeys(root, '$', TOP_KEYS);
  if (root['inputs'] !== undefined) p.read(() => expectArray(root['inputs'], '$.inputs'), []);
  const concurrency =
    root['concurrency'] === undefined
      ? 4
      : p.read(() => expectInt(root['concurrency'], '$.concurrency', 1, 64), 4);
  if (root['mcpServers'] !== undefined && root['servers'] !== undefined) {
    p.add('$.servers', 'give the servers once, under "mcpServers" or under "servers", not both');
  }
  const journal =
    root['journal'] === undefined ? undefined : parseJournal(root['journal'], p, base);
  const cache = root['cache'] === undefined ? undefined : parseCache(root['cache'], p, base);
  const key = root['servers'] !== undefined ? 'servers' : 'mcpServers';
  const serversObj = p.read(() => expectObject(root[key], `$.${key}`), {});
  const servers = new Map<string, ServerConfig>();
  const disabled: string[] = [];
  for (const [name, value] of Object.entries(serversObj)) {
    const path = `$.${key}${pathKey(name)}`;
    if (!SERVER_NAME_PATTERN.test(name)) {
      p.add(path, `server name must match ${String(SERVER_NAME_PATTERN)}`);
    }
    const entry = p.read(() => expectObject(value, path), undefined);
    if (entry === undefined) continue;
    const off =
      entry['disabled'] === undefined
        ? false
        : p.read(() => expectBool(entry['disabled'], `${path}.disabled`), false);
    if (off) {
      // A disabled entry is checked for unknown keys only: it may name variables that are not set.
      p.checkKeys(entry, path, serverKeysOf(entry['url'] === undefined ? 'stdio' : 'http'));
      disabled.push(name);
      continue;
    }
    const server = parseServer(entry, path, read, p, base);
    if (server !== undefined) servers.set(name, server);
  }
  const store =
    root['store'] === undefined
      ? undefined
      : p.read(() => parseStoreTarget(root['store'], '$.store', env), undefined);
  p.throwIfAny();
  return Object.freeze({
    servers,
    concurrency,
    disabled: Object.freeze(disabled),
    ...(journal === undefined ? {} : { journal }),
    ...(store === undefined ? {} : { store }),
    ...(cache === undefined ? {} : { cache }),
  });
}

/** The `cache` key: `false`, or `{ path }` (relative to `base`, the file's directory, when given). */
function parseCache(
  value: unknown,
  p: ConfigProblems,
  base: string | undefined,
): CatalogCacheConfig | false | undefined {
  if (value === false) return false;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    p.add('$.cache', 'expected false or an object { "path": FILE }');
    return undefined;
  }
  const obj = value as Record<string, unknown>;
  p.checkKeys(obj, '$.cache', ['path']);
  const path = p.read(() => expectString(obj['path'], '$.cache.path'), undefined);
  if (path === undefined) return undefined;
  return Object.freeze({
    path: againstFile(base, path),
  });
}

/** A configured file path: a relative one is the configuration file's (`base`), wherever the process runs. */
function againstFile(base: string | undefined, path: string): string {
  return base === undefined || isAbsolute(path) ? path : resolve(base, path);
}

const JOURNAL_KEYS = [
  'path',
  'synchronous',
  'retentionMs',
  'inProgressTtlMs',
  'busyTimeoutMs',
  'driver',
] as const;

/** The `journal` key; a relative `path` resolves against `base` (the file's directory) when given. */
function parseJournal(
  value: unknown,
  p: ConfigProblems,
  base: string | undefined,
): JournalConfig | undefined {
  const obj = p.read(() => expectObject(value, '$.journal'), undefined);
  if (obj === undefined) return undefined;
  p.checkKeys(obj, '$.journal', JOURNAL_KEYS);
  const path = p.read(() => expectString(obj['path'], '$.journal.path'), '');
  const synchronous =
    obj['synchronous'] === undefined
      ? undefined
      : p.read(
          () =>
            expectOneOf(obj['synchronous'], '$.journal.synchronous', ['full', 'normal'] as const),
          undefined,
        );
  const driver =
    obj['driver'] === undefined
      ? undefined
      : p.read(
          () =>
            expectOneOf(obj['driver'], '$.journal.driver', [
              'auto',
              'node:sqlite',
              'better-sqlite3',
            ] as const),
          undefined,
        );
  const int = (name: string, min: number, max: number): Record<string, number> => {
    const v = obj[name];
    if (v === undefined) return {};
    const n = p.read(() => expectInt(v, `$.journal.${name}`, min, max), undefined);
    return n === undefined ? {} : { [name]: n };
  };
  return Object.freeze({
    path: againstFile(base, path),
    ...(synchronous === undefined ? {} : { synchronous }),
    ...int('retentionMs', 1, Number.MAX_SAFE_INTEGER),
    ...int('inProgressTtlMs', 1, Number.MAX_SAFE_INTEGER),
    ...int('busyTimeoutMs', 0, 2_147_483_647),
    ...(driver === undefined ? {} : { driver }),
  });
}

/** One server entry, its problems recorded in `p` (undefined when it cannot be read at all). */
function parseServer(
  obj: Record<string, unknown>,
  path: string,
  read: ConfigText,
  p: ConfigProblems,
  base: string | undefined,
): ServerConfig | undefined {
  const hasCommand = obj['command'] !== undefined;
  const hasUrl = obj['url'] !== undefined;
  if (hasCommand === hasUrl) {
    p.add(path, 'needs exactly one of "command" (stdio) or "url" (http)');
    // Without either, a typo is the likely cause: name it against the keys of both transports.
    if (!hasCommand)
      p.checkKeys(obj, path, [...new Set([...serverKeysOf('stdio'), ...serverKeysOf('http')])]);
    return undefined;
  }
  const type = obj['type'];
  if (
    type !== undefined &&
    type !== (hasCommand ? 'stdio' : 'http') &&
    !(hasUrl && (type === 'streamable-http' || type === 'sse'))
  ) {
    p.add(`${path}.type`, `does not match the ${hasCommand ? 'command' : 'url'} given`);
  }
  if (hasCommand && obj['auth'] !== undefined) {
    p.add(
      `${path}.auth`,
      'is for HTTP servers ("url") only; give a stdio server its credentials in "env"',
    );
  }
  // `auth` on a stdio entry was named above, with what to do instead.
  const kind = hasCommand ? 'stdio' : type === 'sse' ? 'sse' : 'http';
  const { auth: _auth, ...rest } = obj;
  p.checkKeys(hasCommand ? rest : obj, path, serverKeysOf(kind));
  if (obj['timeout'] !== undefined && obj['callTimeoutMs'] !== undefined) {
    p.add(
      `${path}.timeout`,
      'give "timeout" (seconds, as Cline does) or "callTimeoutMs", not both',
    );
  }
  const common = parseCommon(obj, path, read, p, base);
  const text = (value: unknown, at: string, allowEmpty = false): string =>
    read(expectString(value, at, allowEmpty), at);
  const config = p.read(() => parseTransportConfig(kind, obj, path, common, text, read), undefined);
  // A relative working directory is the file's, wherever the process runs.
  if (config?.transport !== 'stdio' || config.cwd === undefined || base === undefined)
    return config;
  return isAbsolute(config.cwd)
    ? config
    : Object.freeze({ ...config, cwd: resolve(base, config.cwd) });
}

/** The keys every server entry has, whatever its transport (see {@link CommonServerConfig}). */
function parseCommon(
  obj: Record<string, unknown>,
  path: string,
  read: ConfigText,
  p: ConfigProblems,
  base: string | undefined,
): CommonServerConfig {
  const callTimeoutMs = p.read(
    () =>
      obj['timeout'] === undefined
        ? optInt(obj['callTimeoutMs'], `${path}.callTimeoutMs`, 60_000)
        : expectInt(obj['timeout'], `${path}.timeout`, 1, 86_400) * 1000,
    60_000,
  );
  const approval =
    obj['approval'] === undefined
      ? undefined
      : p.read(() => expectOneOf(obj['approval'], `${path}.approval`, APPROVAL_MODES), undefined);
  const tools =
    obj['tools'] === undefined ? undefined : parseToolFilter(obj['tools'], `${path}.tools`, p);
  return {
    required: p.read(
      () =>
        obj['required'] === undefined ? true : expectBool(obj['required'], `${path}.required`),
      true,
    ),
    audience: p.read(
      () =>
        obj['audience'] === undefined
          ? 'default'
          : expectString(obj['audience'], `${path}.audience`),
      'default',
    ),
    startupTimeoutMs: p.read(
      () => optInt(obj['startupTimeoutMs'], `${path}.startupTimeoutMs`, 30_000),
      30_000,
    ),
    ...p.read(() => parseProtocol(obj, path), { protocol: 'auto', discoverTimeoutMs: 0 }),
    requestTimeoutMs: p.read(
      () =>
        optInt(
          obj['requestTimeoutMs'],
          `${path}.requestTimeoutMs`,
          DEFAULT_DISCOVERY_LIMITS.requestTimeoutMs,
        ),
      0,
    ),
    callTimeoutMs,
    limits: parseLimits(obj['limits'], `${path}.limits`, p),
    ...(approval === undefined ? {} : { approval }),
    autoApprove: p.read(() => stringList(obj['autoApprove'], `${path}.autoApprove`), []),
    roots: parseRoots(obj['roots'], `${path}.roots`, read, p, base),
    ...(tools === undefined ? {} : { tools }),
    maxMessageBytes: p.read(
      () =>
        obj['maxMessageBytes'] === undefined
          ? DEFAULT_MAX_MESSAGE_BYTES
          : expectInt(
              obj['maxMessageBytes'],
              `${path}.maxMessageBytes`,
              ...MAX_MESSAGE_BYTES_RANGE,
            ),
      0,
    ),
    retryReads: p.read(
      () =>
        obj['retryReads'] === undefined
          ? false
          : expectBool(obj['retryReads'], `${path}.retryReads`),
      false,
    ),
    trustAnnotations: p.read(
      () =>
        obj['trustAnnotations'] === undefined
          ? false
          : expectBool(obj['trustAnnotations'], `${path}.trustAnnotations`),
      false,
    ),
    start: p.read(
      () =>
        obj['start'] === undefined
          ? 'eager'
          : expectOneOf(obj['start'], `${path}.start`, START_MODES),
      'eager',
    ),
    idleTimeoutMs: p.read(
      () =>
        obj['idleTimeoutMs'] === undefined
          ? DEFAULT_IDLE_TIMEOUT_MS
          : expectInt(obj['idleTimeoutMs'], `${path}.idleTimeoutMs`, 0, 2_147_483_647),
      DEFAULT_IDLE_TIMEOUT_MS,
    ),
  };
}

const START_MODES = ['eager', 'lazy'] as const;

/** `roots`: absolute paths or `file://` URIs; in a file, a relative path resolves against it. */
function parseRoots(
  value: unknown,
  path: string,
  read: ConfigText,
  p: ConfigProblems,
  base: string | undefined,
): readonly string[] {
  const list = p.read(() => stringList(value, path), []);
  const roots: string[] = [];
  list.forEach((root, i) =>
    p.read(() => {
      const at = `${path}[${i}]`;
      const text = read(root, at);
      if (text.startsWith('file://') || isAbsolute(text)) return roots.push(text);
      if (base !== undefined) return roots.push(resolve(base, text));
      return fail(
        at,
        'expected an absolute path or a file:// URI (a relative path is relative to a configuration file, and this configuration was not read from one)',
      );
    }, 0),
  );
  return Object.freeze(roots);
}

function parseToolFilter(
  value: unknown,
  path: string,
  p: ConfigProblems,
): ToolFilterConfig | undefined {
  const obj = p.read(() => expectObject(value, path), undefined);
  if (obj === undefined) return undefined;
  p.checkKeys(obj, path, TOOLS_KEYS);
  const list = (key: 'allow' | 'deny'): Partial<ToolFilterConfig> =>
    obj[key] === undefined
      ? {}
      : { [key]: p.read(() => stringList(obj[key], `${path}.${key}`), []) };
  return Object.freeze({ ...list('allow'), ...list('deny') });
}

function parseLimits(value: unknown, path: string, p: ConfigProblems): ServerLimits {
  if (value === undefined) return Object.freeze({});
  const obj = p.read(() => expectObject(value, path), {});
  p.checkKeys(obj, path, LIMIT_KEYS);
  const out: Record<string, number> = {};
  for (const [key, v] of Object.entries(obj)) {
    // The minimums of binding's `DISCOVERY_LIMIT_MINIMUMS` (0 means "none" for these two),
    // repeated here: the two must stay equal.
    const min = key === 'maxTools' || key === 'maxRestarts' ? 0 : 1;
    if (!(LIMIT_KEYS as readonly string[]).includes(key)) continue;
    out[key] = p.read(() => expectInt(v, `${path}.${key}`, min, 2_147_483_647), 0);
  }
  return Object.freeze(out);
}

const APPROVAL_MODES = ['none', 'unproven-writes', 'all-writes'] as const;
