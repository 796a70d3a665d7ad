/**
 * The configuration as written (a file, or an object given to `McpRuntime.open`): the input type
 * `parseConfig` checks at run time, so a TypeScript caller gets completion and a typo is a compile
 * error. `stepbind.schema.json` describes the same shape for editors; `config.schema.test.ts` keeps
 * the three in step.
 */
import type { ApprovalMode } from '@stepbind/binding/internal';
import type { CatalogCacheConfig, JournalConfig } from './config.js';
import type { ProtocolPin, ServerLimits } from './config-values.js';
import type { FleetStoreTarget } from './fleet/target.js';
import type { ToolFilterConfig } from './tool-filter.js';
import type { ServerAuthConfig } from './auth/types.js';

/** The keys every server entry may have, whatever its transport. Defaults as in `CommonServerConfig`. */
export interface CommonServerEntry {
  /** Skip this server (checked for unknown keys only, never started). @default false */
  readonly disabled?: boolean;
  /** A required server that fails makes `open`/refresh fail; an optional one is left out. @default true */
  readonly required?: boolean;
  /** The audience class whose catalogs this server's tools belong to. @default "default" */
  readonly audience?: string;
  /** Budget to start the server and finish `initialize`, in ms. @default 30000 */
  readonly startupTimeoutMs?: number;
  /** The protocol era. @default "auto" */
  readonly protocol?: ProtocolPin;
  /** With `protocol: "auto"`: how long the `server/discover` probe may wait, in ms. @default 2000 */
  readonly discoverTimeoutMs?: number;
  /** Budget of each `tools/list` request, in ms. @default 30000 */
  readonly requestTimeoutMs?: number;
  /** Default budget of each `tools/call`, in ms. @default 60000 */
  readonly callTimeoutMs?: number;
  /** Cline's call timeout in seconds (instead of `callTimeoutMs`). */
  readonly timeout?: number;
  /** Discovery and call bounds. */
  readonly limits?: ServerLimits;
  /** Which calls need an approval. @default the runtime option, else "unproven-writes" */
  readonly approval?: ApprovalMode;
  /** Raw tool names that never need an approval (Cline). */
  readonly autoApprove?: readonly string[];
  /** Which tools are published (`allow`, `deny` globs). */
  readonly tools?: ToolFilterConfig;
  /** Roots offered to the server: absolute paths, `file://` URIs, or (in a file) paths relative to it. */
  readonly roots?: readonly string[];
  /** Largest single message the server may send, in bytes. @default 10485760 */
  readonly maxMessageBytes?: number;
  /** Under an idempotency key whose outcome is unknown, `read` tools may be sent again. @default false */
  readonly retryReads?: boolean;
  /** The application vouches for this server's tool annotations. @default false */
  readonly trustAnnotations?: boolean;
}

/** A server started as a child process speaking MCP over stdio. */
export interface StdioServerEntry extends CommonServerEntry {
  /** Inferred from `command`. */
  readonly type?: 'stdio';
  /** The program to start. */
  readonly command: string;
  readonly args?: readonly string[];
  /** Extra environment variables on top of the safe default set. */
  readonly env?: Readonly<Record<string, string>>;
  /** Variables copied from this process's environment when they are set. */
  readonly envPassthrough?: readonly string[];
  /** Working directory (in a file, relative to the file's directory). */
  readonly cwd?: string;
  /** The server's stderr. @default "pipe" */
  readonly stderr?: 'pipe' | 'inherit' | 'ignore';
  readonly url?: never;
}

/** A server reached over HTTP. */
export interface HttpServerEntry extends CommonServerEntry {
  /** Inferred from `url`; `"sse"` is the legacy HTTP+SSE transport of 2024-11-05. */
  readonly type?: 'http' | 'streamable-http' | 'sse';
  /** The endpoint (no `user:password@`: use `headers` or `auth`). */
  readonly url: string;
  /** Request headers (never printed). */
  readonly headers?: Readonly<Record<string, string>>;
  /** A static bearer token or OAuth 2.1 (never printed). */
  readonly auth?: ServerAuthConfig;
  readonly command?: never;
}

/** One entry of `mcpServers` / `servers`. */
export type ServerEntry = StdioServerEntry | HttpServerEntry;

/** The keys of a configuration besides its servers. */
export interface StepbindConfigCommon {
  /** The JSON Schema the file follows (for editors); ignored. */
  readonly $schema?: string;
  /** VS Code prompt definitions: accepted and ignored (`${input:...}` references are refused). */
  readonly inputs?: readonly unknown[];
  /** How many servers may be starting or discovering at once. @default 4 */
  readonly concurrency?: number;
  /** The durable execution journal; absent: keys and receipts are kept in memory. */
  readonly journal?: JournalConfig;
  /** The shared PostgreSQL fleet store: a `postgres://` URL or `{ url, schema, ...timeouts }`. */
  readonly store?: string | FleetStoreTarget;
  /**
   * The persistent catalog cache file (DESIGN §19.1), relative to the file's directory; `false`
   * turns it off, also the CLI's default one. @default none (the CLI: the user's cache directory)
   */
  readonly cache?: CatalogCacheConfig | false;
}

/**
 * A configuration as written: `mcpServers` (Claude Desktop, Cursor, Cline) or VS Code's `servers`,
 * never both, and stepbind's keys. What `McpRuntime.open` and `parseConfig` take; every key is
 * still checked at run time (a JavaScript caller has no compiler).
 */
export type StepbindConfig = StepbindConfigCommon &
  (
    | { readonly mcpServers: Readonly<Record<string, ServerEntry>>; readonly servers?: never }
    | { readonly servers: Readonly<Record<string, ServerEntry>>; readonly mcpServers?: never }
  );
