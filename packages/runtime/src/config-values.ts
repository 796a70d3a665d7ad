import { ConfigError, ErrorCode, nearestName, type ApprovalMode } from '@stepbind/binding/internal';
import type { ConfigText } from './interpolate.js';
import type { ToolFilterConfig } from './tool-filter.js';

/**
 * The settings every server entry has, whatever its transport, and the readers of configuration
 * values: each refuses a bad value with `INVALID_CONFIG` naming its JSON path. The keys of each
 * transport live with it in `transports/`; `config.ts` puts a whole file together.
 */

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

/**
 * Which protocol era a server is spoken to in (`protocol` of a server entry):
 * - `auto`: probe with `server/discover` (for at most `discoverTimeoutMs`) and fall back to
 *   `initialize` on any other answer;
 * - `2026-07-28`: the modern era only, no fallback; the probe may take the whole
 *   `startupTimeoutMs`, and a server that does not answer it as a 2026-07-28 server fails to start;
 * - `2025-11-25`: the 2025 era only: never probed, plain `initialize`, which still negotiates an
 *   older version (down to 2024-11-05) with a server that offers only that.
 */
export type ProtocolPin = 'auto' | '2026-07-28' | '2025-11-25';

/** Every {@link ProtocolPin}. */
export const PROTOCOL_PINS = ['auto', '2026-07-28', '2025-11-25'] as const;

/** Default of `discoverTimeoutMs`: how long `auto` waits for `server/discover` (capped by `startupTimeoutMs`). */
export const DEFAULT_DISCOVER_TIMEOUT_MS = 2_000;

/** The keys every server entry has, whatever its transport. */
export interface CommonServerConfig {
  /** A required server that fails makes `open`/refresh fail; an optional one is left out. @default true */
  readonly required: boolean;
  /** The audience class whose catalogs this server's tools belong to. @default "default" */
  readonly audience: string;
  /** Budget to start the process (or open the session) and finish `initialize`. @default 30000 */
  readonly startupTimeoutMs: number;
  /** The protocol era this server is spoken to in, see {@link ProtocolPin}. @default "auto" */
  readonly protocol: ProtocolPin;
  /**
   * With `protocol: "auto"`: how long the `server/discover` probe may wait, counted from the
   * start, before falling back to `initialize`; capped by `startupTimeoutMs`. A modern server
   * that boots slower than this is taken for a 2025 one: raise it, or pin `"protocol":
   * "2026-07-28"`. @default 2000 ({@link DEFAULT_DISCOVER_TIMEOUT_MS})
   */
  readonly discoverTimeoutMs: number;
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
  /**
   * The application vouches for this server's tool annotations (its own server, say): a tool
   * marked `readOnlyHint: true` then needs no approval and may be re-sent under `retryReads` even
   * when the catalog is not proven. Otherwise annotations of an unproven catalog lower no bar.
   * @default false
   */
  readonly trustAnnotations: boolean;
  /**
   * When the server is started (DESIGN §19.3). `eager`: at open and at every refresh that needs
   * it, in parallel with the others (bounded by `concurrency`). `lazy`: a server whose catalog
   * is in the catalog cache is not spawned until a step calls one of its tools (or `hardRefresh`
   * asks), and stops again after `idleTimeoutMs` without calls; without a cached catalog it
   * starts as `eager` does. @default "eager"
   */
  readonly start: 'eager' | 'lazy';
  /**
   * A `lazy` server that ran no call for this long is stopped (its process or session closed)
   * and shown from its catalog again until the next call; 0 keeps it running. Ignored for
   * `eager` servers. @default 300000 (5 minutes, {@link DEFAULT_IDLE_TIMEOUT_MS})
   */
  readonly idleTimeoutMs: number;
}

/** Default of `idleTimeoutMs`: a lazy server idle for 5 minutes is stopped. */
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;

/**
 * Default of `maxMessageBytes`: 10 MiB, the stdio buffer limit of the MCP SDK's own client, so a server
 * that works with SDK-based hosts (a tool result with a large image, a one-page catalog of thousands of
 * tools) also works here, while one runaway line cannot take the host's memory.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** One problem of a configuration: the JSON path at fault and what is wrong there (never a value). */
export interface ConfigProblem {
  /** JSON path, for example `$.mcpServers.files.comand`. */
  readonly path: string;
  /** What is wrong and what to write instead. */
  readonly message: string;
}

/** The unknown keys of `obj` (not in `allowed`), each with its path, a did-you-mean and the keys allowed there. */
export function unknownKeys(
  obj: Record<string, unknown>,
  path: string,
  allowed: readonly string[],
): ConfigProblem[] {
  return Object.keys(obj)
    .filter((key) => !allowed.includes(key))
    .map((key) => {
      const near = nearestName(key, allowed);
      return {
        path: `${path}${pathKey(key)}`,
        message: `unknown key${near === undefined ? '' : ` (did you mean "${near}"?)`}; the keys allowed here are ${allowed.join(', ')}`,
      };
    });
}

/** Refuses any key of `obj` not in `allowed`, naming its path, the nearest allowed key and the keys allowed there. */
export function checkKeys(
  obj: Record<string, unknown>,
  path: string,
  allowed: readonly string[],
): void {
  const [first] = unknownKeys(obj, path, allowed);
  if (first !== undefined) fail(first.path, first.message);
}

/** How many problems the message of a many-problem `INVALID_CONFIG` spells out (all are in `detail.errors`). */
const PROBLEMS_IN_MESSAGE = 5;

/**
 * Collects the problems of one configuration, so that all of them are reported at once: each
 * reader runs under {@link ConfigProblems.read}, which records an `INVALID_CONFIG` it throws and
 * goes on with a fallback; {@link ConfigProblems.throwIfAny} then throws one error listing them.
 */
export class ConfigProblems {
  readonly #problems: ConfigProblem[] = [];
  readonly #first: ConfigError[] = [];

  /** Records a problem at `path`. */
  add(path: string, message: string): void {
    this.#problems.push({ path, message });
  }

  /** Records every unknown key of `obj` (see {@link unknownKeys}). */
  checkKeys(obj: Record<string, unknown>, path: string, allowed: readonly string[]): void {
    for (const problem of unknownKeys(obj, path, allowed)) this.add(problem.path, problem.message);
  }

  /** Runs `reader`; an `INVALID_CONFIG` it throws is recorded and `fallback` returned instead. */
  read<T>(reader: () => T, fallback: T): T {
    try {
      return reader();
    } catch (error) {
      if (!(error instanceof ConfigError) || error.code !== ErrorCode.INVALID_CONFIG) throw error;
      const path = typeof error.detail['path'] === 'string' ? error.detail['path'] : '$';
      const prefix = `Invalid configuration at ${path}: `;
      const text = error.message.startsWith(prefix)
        ? error.message.slice(prefix.length)
        : error.message;
      if (this.#problems.length === 0) this.#first.push(error);
      this.#problems.push({ path, message: text.replace(/\.$/, '') });
      return fallback;
    }
  }

  /** Throws the recorded problems, when reading cannot go on (at least one must be recorded). */
  raise(): never {
    this.throwIfAny();
    throw new Error('ConfigProblems.raise: no problem was recorded');
  }

  /**
   * Throws one `INVALID_CONFIG` when any problem was recorded: `detail.errors` lists every
   * `{ path, message }` in the order found, `detail.path` is the first one's; a single problem keeps its
   * own message and detail (`variable`, `reference`...).
   */
  throwIfAny(): void {
    const problems = Object.freeze(this.#problems.map((p) => Object.freeze({ ...p })));
    const [first] = problems;
    if (first === undefined) return;
    if (problems.length === 1) {
      const original = this.#first[0];
      throw new ConfigError(
        ErrorCode.INVALID_CONFIG,
        original?.message ?? `Invalid configuration at ${first.path}: ${first.message}.`,
        {
          detail: { ...(original?.detail ?? {}), path: first.path, errors: problems },
          ...(original === undefined ? {} : { cause: original }),
        },
      );
    }
    const shown = problems
      .slice(0, PROBLEMS_IN_MESSAGE)
      .map((p) => `at ${p.path}: ${p.message}.`)
      .join(' ');
    const more = problems.length - PROBLEMS_IN_MESSAGE;
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      `Invalid configuration: ${problems.length} problems. ${shown}${more > 0 ? ` And ${more} more (see detail.errors).` : ''}`,
      { detail: { path: first.path, errors: problems } },
    );
  }
}

/** An optional array of strings (frozen; empty when absent). */
export function stringList(value: unknown, path: string): readonly string[] {
  if (value === undefined) return Object.freeze([]);
  return Object.freeze(expectArray(value, path).map((v, i) => expectString(v, `${path}[${i}]`)));
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

/**
 * `protocol` and `discoverTimeoutMs` of a server entry at `path`. Older 2025-era versions are
 * refused with the reason (`2025-11-25` already negotiates them), and so is a probe budget
 * without a probe to spend it on.
 */
export function parseProtocol(
  obj: Record<string, unknown>,
  path: string,
): Pick<CommonServerConfig, 'protocol' | 'discoverTimeoutMs'> {
  const raw = obj['protocol'];
  if (
    typeof raw === 'string' &&
    /^20\d\d-\d\d-\d\d$/.test(raw) &&
    !PROTOCOL_PINS.some((p) => p === raw)
  ) {
    fail(
      `${path}.protocol`,
      `${JSON.stringify(raw)} is not a version stepbind pins; use "2025-11-25" for the 2025 era (its initialize still negotiates an older version such as 2025-06-18 or 2024-11-05 with a server that offers only that), "2026-07-28" for the modern era, or "auto"`,
    );
  }
  const protocol = raw === undefined ? 'auto' : expectOneOf(raw, `${path}.protocol`, PROTOCOL_PINS);
  if (obj['discoverTimeoutMs'] !== undefined && protocol !== 'auto') {
    fail(
      `${path}.discoverTimeoutMs`,
      protocol === '2025-11-25'
        ? 'a server pinned to "2025-11-25" is never probed with server/discover; remove "discoverTimeoutMs" or set "protocol" to "auto"'
        : 'a server pinned to "2026-07-28" may take the whole "startupTimeoutMs" to answer server/discover; remove "discoverTimeoutMs" (or set "protocol" to "auto")',
    );
  }
  return {
    protocol,
    discoverTimeoutMs: optInt(
      obj['discoverTimeoutMs'],
      `${path}.discoverTimeoutMs`,
      DEFAULT_DISCOVER_TIMEOUT_MS,
    ),
  };
}

/** The JSON path of one key of one server's entry, e.g. `$.mcpServers.files.cwd`. */
export function serverConfigPath(server: string, key: string): string {
  return `$.mcpServers${pathKey(server)}${pathKey(key)}`;
}

/** Throws `INVALID_CONFIG` for `path` with `problem` (never the value, which may be a secret). */
export function fail(path: string, problem: string): never {
  throw new ConfigError(ErrorCode.INVALID_CONFIG, `Invalid configuration at ${path}: ${problem}.`, {
    detail: { path },
  });
}

/** One JSON-path step: `.key` for an identifier, `["key"]` otherwise. */
export function pathKey(key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/** A plain object (not null, not an array). */
export function expectObject(value: unknown, path: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(path, 'expected an object');
  }
  return value as Record<string, unknown>;
}

/** An array. */
export function expectArray(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value)) fail(path, 'expected an array');
  return value;
}

/** A string, non-empty unless `allowEmpty`. */
export function expectString(value: unknown, path: string, allowEmpty = false): string {
  if (typeof value !== 'string' || (!allowEmpty && value.length === 0)) {
    fail(path, allowEmpty ? 'expected a string' : 'expected a non-empty string');
  }
  return value;
}

/** One of the string `options`. */
export function expectOneOf<const T extends readonly string[]>(
  value: unknown,
  path: string,
  options: T,
): T[number] {
  if (typeof value !== 'string' || !options.includes(value)) {
    fail(path, `expected one of ${options.map((o) => JSON.stringify(o)).join(', ')}`);
  }
  return value;
}

/** `true` or `false`. */
export function expectBool(value: unknown, path: string): boolean {
  if (typeof value !== 'boolean') fail(path, 'expected true or false');
  return value;
}

/** An integer from `min` to `max`. */
export function expectInt(value: unknown, path: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(path, `expected an integer from ${min} to ${max}`);
  }
  return value;
}

/** A positive 32-bit integer, or `fallback` when absent. */
export function optInt(value: unknown, path: string, fallback: number): number {
  return value === undefined ? fallback : expectInt(value, path, 1, 2_147_483_647);
}

/** An environment variable name. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** An object of string values (read by `read`) whose keys match `keyPattern` (`__proto__` refused). */
export function expectStringRecord(
  value: unknown,
  path: string,
  keyPattern: RegExp,
  keyKind: string,
  read: ConfigText,
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
    out[k] = read(v, `${path}${pathKey(k)}`);
  }
  return Object.freeze(out);
}
