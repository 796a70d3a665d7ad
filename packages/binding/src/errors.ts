/**
 * Every error stepbind raises is a {@link StepbindError} with a stable string `code` from
 * {@link ErrorCode}. Dependency errors (SDK `McpError`, async-mutex, p-queue, Ajv) are mapped at the
 * boundary and kept as `cause`. Messages say what happened, which server and tool, and what to do.
 *
 * @packageDocumentation
 */

/** The fixed table of error codes. Codes are stable across releases; messages are not. */
export const ErrorCode = {
  // discovery (CatalogError)
  INVALID_OPTIONS: 'INVALID_OPTIONS',
  DUPLICATE_TOOL_NAME: 'DUPLICATE_TOOL_NAME',
  CURSOR_REPEATED: 'CURSOR_REPEATED',
  PAGE_LIMIT: 'PAGE_LIMIT',
  TOOL_LIMIT: 'TOOL_LIMIT',
  CURSOR_TOO_LARGE: 'CURSOR_TOO_LARGE',
  INVALID_TOOL: 'INVALID_TOOL',
  INVALID_PAGE: 'INVALID_PAGE',
  SERVER_ERROR: 'SERVER_ERROR',
  CATALOG_CHANGED: 'CATALOG_CHANGED',
  REVISION_CHANGED: 'REVISION_CHANGED',
  // validation (CatalogError)
  INVALID_TOOL_NAME: 'INVALID_TOOL_NAME',
  INVALID_INPUT_SCHEMA: 'INVALID_INPUT_SCHEMA',
  INVALID_OUTPUT_SCHEMA: 'INVALID_OUTPUT_SCHEMA',
  UNKNOWN_SCHEMA_DIALECT: 'UNKNOWN_SCHEMA_DIALECT',
  REMOTE_REF: 'REMOTE_REF',
  UNRESOLVED_REF: 'UNRESOLVED_REF',
  SCHEMA_TOO_LARGE: 'SCHEMA_TOO_LARGE',
  SCHEMA_INVALID: 'SCHEMA_INVALID',
  // publication (CatalogError)
  PUBLISH_CONFLICT: 'PUBLISH_CONFLICT',
  SNAPSHOT_RETIRED: 'SNAPSHOT_RETIRED',
  // calls (CallError)
  STALE_CATALOG: 'STALE_CATALOG',
  UNKNOWN_TOOL: 'UNKNOWN_TOOL',
  INVALID_ARGUMENTS: 'INVALID_ARGUMENTS',
  INVALID_TOOL_OUTPUT: 'INVALID_TOOL_OUTPUT',
  TOOL_DENIED: 'TOOL_DENIED',
  APPROVAL_REQUIRED: 'APPROVAL_REQUIRED',
  BINDING_RELEASED: 'BINDING_RELEASED',
  // shared by discovery, calls and the runtime
  TIMEOUT: 'TIMEOUT',
  ABORTED: 'ABORTED',
  CONNECTION_CLOSED: 'CONNECTION_CLOSED',
  // runtime and configuration
  INVALID_CONFIG: 'INVALID_CONFIG',
  SERVER_START_FAILED: 'SERVER_START_FAILED',
  SERVER_NOT_READY: 'SERVER_NOT_READY',
  REQUIRED_SERVERS_FAILED: 'REQUIRED_SERVERS_FAILED',
  RUNTIME_CLOSED: 'RUNTIME_CLOSED',
  // message-level safety at the transport boundary (RuntimeError): what a server sent broke the
  // protocol. MESSAGE_TOO_LARGE: one message went over the server's `maxMessageBytes` (detail: limit,
  // configKey). MALFORMED_MESSAGE: a response that is not valid JSON-RPC (detail: reason).
  MESSAGE_TOO_LARGE: 'MESSAGE_TOO_LARGE',
  MALFORMED_MESSAGE: 'MALFORMED_MESSAGE',
  // delivery and durable execution (CallError, JournalError): a call that may have run is
  // OUTCOME_UNKNOWN, never retried under the same key; the journal's own failures are typed.
  OUTCOME_UNKNOWN: 'OUTCOME_UNKNOWN',
  IDEMPOTENCY_CONFLICT: 'IDEMPOTENCY_CONFLICT',
  IDEMPOTENCY_IN_PROGRESS: 'IDEMPOTENCY_IN_PROGRESS',
  JOURNAL_CORRUPT: 'JOURNAL_CORRUPT',
  JOURNAL_VERSION: 'JOURNAL_VERSION',
  JOURNAL_UNAVAILABLE: 'JOURNAL_UNAVAILABLE',
  // JOURNAL_BUSY (JournalError): another process held the SQLite journal's lock for longer than
  // its busyTimeoutMs; the write did not happen (detail: location, waitedMs, operation).
  JOURNAL_BUSY: 'JOURNAL_BUSY',
  // fleet store. POLICY_STALE (CallError, delivery not-sent): the worker's local policy
  // view is older than its staleness bound (notification connection lost), so the call was refused
  // rather than admitted (detail: ageMs, maxStalenessMs). STORE_UNAVAILABLE (RuntimeError): the
  // shared PostgreSQL store could not be reached after bounded retries (detail: store, reason).
  POLICY_STALE: 'POLICY_STALE',
  STORE_UNAVAILABLE: 'STORE_UNAVAILABLE',
  // the 2026-07-28 protocol era (RuntimeError, CallError). UNSUPPORTED_PROTOCOL_VERSION
  // (-32022; detail: supported, requested), HEADER_MISMATCH (-32020), MISSING_CLIENT_CAPABILITY
  // (-32021; detail: capabilities), INPUT_REQUIRED: a server asked for input (MRTR) that the
  // application cannot give (no elicitation handler, or more rounds than allowed; detail: requests).
  UNSUPPORTED_PROTOCOL_VERSION: 'UNSUPPORTED_PROTOCOL_VERSION',
  HEADER_MISMATCH: 'HEADER_MISMATCH',
  MISSING_CLIENT_CAPABILITY: 'MISSING_CLIENT_CAPABILITY',
  INPUT_REQUIRED: 'INPUT_REQUIRED',
  // authorization of remote servers (RuntimeError, CallError). AUTH_REQUIRED: the server wants an
  // OAuth login and there is no usable token and no `authorize` hook (detail: command, the CLI
  // line that fixes it). AUTH_FAILED: the authorization server or the protected resource refused
  // (detail: oauthError, the RFC 6749 error code; reason, what step failed).
  AUTH_REQUIRED: 'AUTH_REQUIRED',
  AUTH_FAILED: 'AUTH_FAILED',
  // optional dependencies (RuntimeError). DEPENDENCY_MISSING: a feature that needs a package the
  // application did not install (better-sqlite3 for a SQLite journal, pg for a fleet store) was
  // used, or the package is installed but would not load (detail: package, feature, install).
  DEPENDENCY_MISSING: 'DEPENDENCY_MISSING',
  // UNSUPPORTED_NODE (RuntimeError): the CLI or McpRuntime.open runs on a Node version outside
  // the supported range (detail: running, required).
  UNSUPPORTED_NODE: 'UNSUPPORTED_NODE',
  // resources and prompts (CallError, CatalogError; DESIGN §20.3). UNKNOWN_RESOURCE: a step was
  // asked to read a uri it was not shown and no tool of it returned (detail: uri, stepId).
  // UNKNOWN_PROMPT: a prompt name the step was not shown (detail: name, matches). CONTENT_TOO_LARGE:
  // resource contents or a prompt over the size bound (detail: limit, bytes). FEATURE_UNSUPPORTED:
  // the server does not declare the capability, or the protocol era cannot do it (detail:
  // capability). ITEM_LIMIT: a resources/prompts listing went over its item budget (detail: limit).
  UNKNOWN_RESOURCE: 'UNKNOWN_RESOURCE',
  UNKNOWN_PROMPT: 'UNKNOWN_PROMPT',
  CONTENT_TOO_LARGE: 'CONTENT_TOO_LARGE',
  FEATURE_UNSUPPORTED: 'FEATURE_UNSUPPORTED',
  ITEM_LIMIT: 'ITEM_LIMIT',
} as const;

/** One of the stable error codes in {@link ErrorCode}. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Fields every error detail may carry. */
export interface BaseErrorDetail {
  /** Configured name of the server involved, when there is one. */
  readonly server?: string;
  /** Raw MCP tool name involved, when there is one. */
  readonly tool?: string;
  /** JSON-RPC error number received from or sent to the wire, when there is one. */
  readonly rpcCode?: number;
  /** Any further facts, specific to the code (cursor, page index, limit, paths...). */
  readonly [key: string]: unknown;
}

/** Detail of every call failure (`CallError`): where it happened and whether it was sent. */
export interface CallErrorDetail extends BaseErrorDetail {
  readonly modelName?: string;
  readonly stepId?: string;
  /** Whether the `tools/call` request was written to the server (DESIGN §13). */
  readonly delivery?: Delivery;
  /** The run's idempotency key, when it had one. */
  readonly key?: string;
  /** True when the outcome came from the journal (nothing was sent again). */
  readonly replayed?: boolean;
}

/**
 * Detail of a refusal the execution journal decided from a key's record (DESIGN §13). On these,
 * `delivery` is about the key: `sent` whenever the key may have run (or may run any moment), even
 * though this run sent nothing.
 */
export interface KeyRefusalDetail {
  /** The state of the key's record when it was refused. */
  readonly keyState?: 'INTENT' | 'SENT' | 'COMPLETED' | 'NOT_SENT' | 'OUTCOME_UNKNOWN';
  /** True when the key's record was written under another descriptor digest of the same tool. */
  readonly descriptorChanged?: boolean;
  /** A summary of the key's record (no stored result). */
  readonly record?: Readonly<Record<string, unknown>>;
}

/** Detail of a tool-definition failure: where in the catalog and in the definition. */
export interface ToolErrorDetail extends BaseErrorDetail {
  /** JSON pointer into the tool definition. */
  readonly path?: string;
  readonly pageIndex?: number;
  readonly toolIndex?: number;
}

/** Detail of a failure over a bound (a limit, its value, or a size met). */
export interface LimitErrorDetail extends BaseErrorDetail {
  /** The option or limit that was exceeded. */
  readonly limit?: string | number;
  readonly max?: number;
}

/** One problem of an options bag, as `INVALID_OPTIONS` `detail.problems` lists it. */
export interface OptionProblem {
  /** Where, from the bag's root: `options.journal.pth`, `options.requiredServers[0]`. */
  readonly path: string;
  /** What is wrong, never echoing a string value (it could be a secret) unless from an enum. */
  readonly problem: string;
  /** For an unknown key: the keys the object at that place accepts. */
  readonly allowed?: readonly string[];
  /** For an unknown key: the allowed key within edit distance 2, if any. */
  readonly didYouMean?: string;
}

/**
 * What `detail` carries for each code, beyond {@link BaseErrorDetail}. Codes not listed carry
 * the base fields (and code-specific extras under the index signature).
 */
export interface ErrorDetailMap {
  INVALID_OPTIONS: BaseErrorDetail & {
    /** The option at fault (its path below the bag: `journal.path`). */
    readonly option?: string;
    readonly value?: unknown;
    readonly key?: string;
    /** The function whose options were refused (`McpRuntime.open`). */
    readonly function?: string;
    /** The first problem's full path (`options.journal.pth`). */
    readonly path?: string;
    /** What is wrong at `path`. */
    readonly problem?: string;
    /** For an unknown key: the keys accepted there. */
    readonly allowed?: readonly string[];
    /** For an unknown key: the nearest accepted key. */
    readonly didYouMean?: string;
    /** Every problem of the bag, the first one first. */
    readonly problems?: readonly OptionProblem[];
  };
  DUPLICATE_TOOL_NAME: ToolErrorDetail & {
    readonly firstIndex?: number;
    readonly index?: number;
  };
  CURSOR_REPEATED: BaseErrorDetail & { readonly cursor?: string; readonly page?: number };
  PAGE_LIMIT: LimitErrorDetail & { readonly page?: number };
  TOOL_LIMIT: LimitErrorDetail & { readonly page?: number };
  CURSOR_TOO_LARGE: LimitErrorDetail & { readonly page?: number; readonly bytes?: number };
  INVALID_TOOL: ToolErrorDetail;
  INVALID_PAGE: BaseErrorDetail & { readonly page?: number };
  INVALID_TOOL_NAME: ToolErrorDetail;
  INVALID_INPUT_SCHEMA: ToolErrorDetail;
  INVALID_OUTPUT_SCHEMA: ToolErrorDetail;
  UNKNOWN_SCHEMA_DIALECT: ToolErrorDetail & { readonly dialect?: unknown };
  REMOTE_REF: ToolErrorDetail & { readonly ref?: string };
  UNRESOLVED_REF: ToolErrorDetail & { readonly ref?: string };
  SCHEMA_TOO_LARGE: ToolErrorDetail &
    LimitErrorDetail & { readonly bytes?: number; readonly depth?: number };
  SCHEMA_INVALID: ToolErrorDetail & { readonly ref?: string };
  STALE_CATALOG: CallErrorDetail & {
    readonly capturedRevision?: number;
    readonly currentRevision?: number;
  };
  UNKNOWN_TOOL: CallErrorDetail & {
    /**
     * The step's model names whose tool part equals, or is within edit distance 2 of, the name
     * asked for (`read_text_file` → `["files__read_text_file"]`), nearest first: for the developer.
     */
    readonly matches?: readonly string[];
  };
  INVALID_ARGUMENTS: CallErrorDetail &
    LimitErrorDetail & {
      /** The validation errors, `<instance path> <message>`. */
      readonly errors?: string;
      /** Where a value that is not plain JSON sits. */
      readonly path?: string;
    };
  INVALID_TOOL_OUTPUT: CallErrorDetail &
    LimitErrorDetail & { readonly errors?: string; readonly path?: string };
  TOOL_DENIED: CallErrorDetail & {
    /** `policy-epoch`, `revoked`, `prepare` or `admission`. */
    readonly reason?: string;
    readonly capturedEpoch?: number;
    readonly currentEpoch?: number;
  };
  APPROVAL_REQUIRED: CallErrorDetail & {
    readonly reason?: 'approval-required';
    readonly approval?: string;
    readonly catalogState?: string;
    readonly effectClass?: string;
  };
  BINDING_RELEASED: CallErrorDetail;
  TIMEOUT: CallErrorDetail & {
    /** `request` (one request) or `total` (a whole discovery). */
    readonly scope?: string;
    readonly timeoutMs?: number;
    readonly page?: number;
  };
  ABORTED: CallErrorDetail;
  CONNECTION_CLOSED: CallErrorDetail;
  SERVER_ERROR: CallErrorDetail & { readonly page?: number };
  OUTCOME_UNKNOWN: CallErrorDetail & KeyRefusalDetail;
  IDEMPOTENCY_CONFLICT: CallErrorDetail &
    KeyRefusalDetail & {
      /** `payload` (another call), `unknown-key` or `not-outcome-unknown` (from `resolve`). */
      readonly reason?: string;
      /** What differs from the key's record (`different arguments`, `tool "a" → "b"`...). */
      readonly differences?: readonly string[];
    };
  IDEMPOTENCY_IN_PROGRESS: CallErrorDetail &
    KeyRefusalDetail & {
      /** `in-progress`, `claim-lost` or `contended`. */
      readonly reason?: string;
    };
  INVALID_CONFIG: BaseErrorDetail & {
    /** JSON path of the configuration value at fault (the first, when there are several). */
    readonly path?: string;
    readonly configPath?: string;
    /** Every problem of the configuration, in the order found (`parseConfig` reports them at once). */
    readonly errors?: readonly { readonly path: string; readonly message: string }[];
  };
  MESSAGE_TOO_LARGE: LimitErrorDetail & { readonly method?: string; readonly configKey?: string };
  MALFORMED_MESSAGE: BaseErrorDetail & { readonly reason?: string; readonly method?: string };
  JOURNAL_CORRUPT: BaseErrorDetail & { readonly path?: string; readonly reason?: string };
  JOURNAL_VERSION: BaseErrorDetail & { readonly path?: string; readonly reason?: string };
  JOURNAL_UNAVAILABLE: BaseErrorDetail & { readonly path?: string; readonly reason?: string };
  JOURNAL_BUSY: CallErrorDetail & {
    /** The journal file whose lock was held. */
    readonly location: string;
    /** Milliseconds the operation waited for the lock, by the runtime's clock. */
    readonly waitedMs: number;
    /** The store operation that waited (`insert`, `update`, `get`...). */
    readonly operation: string;
  };
  // fleet store
  POLICY_STALE: BaseErrorDetail & {
    /** Milliseconds since the worker's policy view was last proven current. */
    readonly ageMs?: number;
    /** The bound it exceeded (`maxStalenessMs`). */
    readonly maxStalenessMs?: number;
  };
  AUTH_REQUIRED: BaseErrorDetail & {
    /** The protected resource (the server's URL, without query). */
    readonly resource?: string;
    /** The authorization server's issuer, once discovered. */
    readonly issuer?: string;
    /** The scopes the login must ask for, when known. */
    readonly scopes?: readonly string[];
    /** The command that fixes it, such as `stepbind login NAME --config FILE`. */
    readonly command?: string;
  };
  AUTH_FAILED: BaseErrorDetail & {
    /** The RFC 6749 `error` code the authorization server or resource answered, when one. */
    readonly oauthError?: string;
    /**
     * The step that failed: `metadata`, `registration`, `authorization`, `token`, `refresh`,
     * `insufficient-scope`, `unreachable`, `issuer-mismatch`, `resource-mismatch`, `pkce`, `config`.
     */
    readonly reason?: string;
    /** HTTP status of the refusing answer, when one. */
    readonly httpStatus?: number;
    readonly resource?: string;
    readonly issuer?: string;
  };
  STORE_UNAVAILABLE: BaseErrorDetail & {
    /** The store, URL redacted, with its schema. */
    readonly store?: string;
    /**
     * `unreachable`, `commit-unknown`, `closed`, `query`, `newer-schema`, `corrupt` or `timeout`
     * (the database did not answer within the call's deadline or the store's timeout).
     */
    readonly reason?: string;
  };
  DEPENDENCY_MISSING: BaseErrorDetail & {
    /** The npm package that is missing or would not load, such as `better-sqlite3`. */
    readonly package: string;
    /** What needed it, such as `the SQLite journal`. */
    readonly feature: string;
    /** The command that installs it, such as `npm install better-sqlite3@^12`. */
    readonly install: string;
    /**
     * `not-installed`, `not-loadable` (installed, but it failed to load: a native build for another
     * Node), or `not-available` (a built-in module, `node:sqlite`, this Node does not have).
     */
    readonly reason: 'not-installed' | 'not-loadable' | 'not-available';
  };
  UNSUPPORTED_NODE: BaseErrorDetail & {
    /** The running Node version, such as `20.18.1`. */
    readonly running: string;
    /** The supported range (`engines.node`), such as `^20.19.0 || ^22.12.0 || >=24.0.0`. */
    readonly required: string;
  };
}

/** The `detail` of an error with code `C`: {@link ErrorDetailMap}`[C]`, or the base fields. */
export type ErrorDetail<C extends ErrorCode = ErrorCode> = C extends keyof ErrorDetailMap
  ? ErrorDetailMap[C]
  : BaseErrorDetail;

/** Options accepted by every stepbind error constructor. */
export interface StepbindErrorOptions {
  /** Structured facts about the failure (see {@link ErrorDetailMap} for what each code carries). */
  readonly detail?: BaseErrorDetail;
  /** The original error, kept for debugging. */
  readonly cause?: unknown;
}

/**
 * The brand every stepbind error carries, registered globally (`Symbol.for`), so errors from two
 * installed copies of the package (an app and a plugin each bundling one) still recognise each
 * other where `instanceof` cannot.
 */
const STEPBIND_ERROR = Symbol.for('io.stepbind.error');

/**
 * A stepbind error whose `code` is `C`, with `detail` typed for that code ({@link ErrorDetailMap}):
 * what {@link isStepbindError} and {@link StepbindError.isInstance} narrow to when given a code,
 * so `isStepbindError(e, ErrorCode.UNKNOWN_TOOL) && e.detail.modelName` is typed.
 */
export type StepbindErrorOf<C extends ErrorCode> = StepbindError & {
  readonly code: C;
  readonly detail: ErrorDetail<C>;
};

/** The base class of every error stepbind raises. `code` is stable; match on it, not on messages. */
export class StepbindError extends Error {
  /** Stable machine-readable code. */
  readonly code: ErrorCode;
  /**
   * Structured facts: server, tool, JSON-RPC code and code-specific fields ({@link ErrorDetailMap};
   * narrow by code with {@link isStepbindError} to type them).
   */
  readonly detail: ErrorDetail;

  constructor(code: ErrorCode, message: string, options: StepbindErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.detail = Object.freeze({ ...(options.detail ?? {}) });
    Object.defineProperty(this, STEPBIND_ERROR, { value: true });
  }

  /**
   * True for any stepbind error, also one created by another installed copy of
   * `@stepbind/binding` (checked by a global brand, not by `instanceof`).
   */
  static isInstance(value: unknown): value is StepbindError;
  static isInstance<C extends ErrorCode>(value: unknown, code: C): value is StepbindErrorOf<C>;
  static isInstance(value: unknown, code?: ErrorCode): boolean {
    return (
      typeof value === 'object' &&
      value !== null &&
      (value as Record<symbol, unknown>)[STEPBIND_ERROR] === true &&
      typeof (value as { code?: unknown }).code === 'string' &&
      (code === undefined || (value as { code?: unknown }).code === code)
    );
  }

  override get name(): string {
    return 'StepbindError';
  }

  /** The configured server name in the detail, if any. */
  get server(): string | undefined {
    return this.detail.server;
  }

  /** The raw tool name in the detail, if any. */
  get tool(): string | undefined {
    return this.detail.tool;
  }

  /** A JSON-serialisable view: `{ code, message, detail }`. */
  toJSON(): { code: ErrorCode; message: string; detail: ErrorDetail } {
    return { code: this.code, message: this.message, detail: this.detail };
  }
}

/** Discovery, validation and publication failures: nothing partial was returned or published. */
export class CatalogError extends StepbindError {
  override get name(): string {
    return 'CatalogError';
  }
}

/**
 * Whether a call's `tools/call` request was written to the server: `not-sent` means it cannot have
 * run; `sent` means it may have run, even when no answer came back.
 */
export type Delivery = 'not-sent' | 'sent';

/**
 * A prepared tool call that was refused or failed. `detail.delivery` says whether the request was
 * written to the server (`not-sent`: it did not run; `sent`: it may have run).
 */
export class CallError extends StepbindError {
  override get name(): string {
    return 'CallError';
  }

  /** `detail.delivery`; `sent` when a foreign error left it out (it may have run). */
  get delivery(): Delivery {
    return this.detail['delivery'] === 'not-sent' ? 'not-sent' : 'sent';
  }
}

/**
 * An execution journal that cannot be used: corrupt or foreign (`JOURNAL_CORRUPT`), written by a
 * newer schema (`JOURNAL_VERSION`), not writable (`JOURNAL_UNAVAILABLE`: read-only path, full
 * disk) or locked by another process for longer than its bound (`JOURNAL_BUSY`). `detail.path`
 * names the file and `detail.reason` the problem.
 */
export class JournalError extends StepbindError {
  override get name(): string {
    return 'JournalError';
  }
}

/** A configuration file or option bag that is malformed. `detail.path` is the JSON path. */
export class ConfigError extends StepbindError {
  override get name(): string {
    return 'ConfigError';
  }
}

/** Runtime lifecycle failures: servers that did not start, are not ready, or a closed runtime. */
export class RuntimeError extends StepbindError {
  override get name(): string {
    return 'RuntimeError';
  }
}

/**
 * True when `value` is any stepbind error (optionally with the given code, which then types
 * `detail`), also one from another installed copy of the package.
 */
export function isStepbindError(value: unknown): value is StepbindError;
export function isStepbindError<C extends ErrorCode>(
  value: unknown,
  code: C | undefined,
): value is StepbindErrorOf<C>;
export function isStepbindError(value: unknown, code?: ErrorCode): boolean {
  return StepbindError.isInstance(value) && (code === undefined || value.code === code);
}

/**
 * @internal The one `ABORTED` error: `message` says what was cancelled and what was left undone;
 * the abort `reason` is the cause, and a reason that is already a stepbind error is returned as
 * is. `as` is the error family of the operation (`CatalogError` for discovery, `RuntimeError`
 * for a refresh), which callers match with `instanceof`.
 */
export function abortedError(
  message: string,
  reason: unknown,
  options: {
    readonly detail?: ErrorDetail<typeof ErrorCode.ABORTED>;
    readonly as?: typeof StepbindError;
    readonly keepStepbindReason?: boolean;
  } = {},
): StepbindError {
  if (options.keepStepbindReason === true && StepbindError.isInstance(reason)) return reason;
  const Class = options.as ?? StepbindError;
  return new Class(ErrorCode.ABORTED, message, {
    ...(options.detail === undefined ? {} : { detail: options.detail }),
    cause: reason,
  });
}
