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
  // delivery and durable execution (CallError, JournalError): issue 8 item 3 and issue 10
  OUTCOME_UNKNOWN: 'OUTCOME_UNKNOWN',
  IDEMPOTENCY_CONFLICT: 'IDEMPOTENCY_CONFLICT',
  IDEMPOTENCY_IN_PROGRESS: 'IDEMPOTENCY_IN_PROGRESS',
  JOURNAL_CORRUPT: 'JOURNAL_CORRUPT',
  JOURNAL_VERSION: 'JOURNAL_VERSION',
  JOURNAL_UNAVAILABLE: 'JOURNAL_UNAVAILABLE',
  // the 2026-07-28 protocol era (RuntimeError, CallError): issue 13. UNSUPPORTED_PROTOCOL_VERSION
  // (-32022; detail: supported, requested), HEADER_MISMATCH (-32020), MISSING_CLIENT_CAPABILITY
  // (-32021; detail: capabilities), INPUT_REQUIRED: a server asked for input (MRTR) that the
  // application cannot give (no elicitation handler, or more rounds than allowed; detail: requests).
  UNSUPPORTED_PROTOCOL_VERSION: 'UNSUPPORTED_PROTOCOL_VERSION',
  HEADER_MISMATCH: 'HEADER_MISMATCH',
  MISSING_CLIENT_CAPABILITY: 'MISSING_CLIENT_CAPABILITY',
  INPUT_REQUIRED: 'INPUT_REQUIRED',
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

/** Options accepted by every stepbind error constructor. */
export interface StepbindErrorOptions {
  /** Structured facts about the failure. */
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

/** The base class of every error stepbind raises. `code` is stable; match on it, not on messages. */
export class StepbindError extends Error {
  /** Stable machine-readable code. */
  readonly code: ErrorCode;
  /** Structured facts: server, tool, JSON-RPC code and code-specific fields. */
  readonly detail: BaseErrorDetail;

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
  static isInstance(value: unknown): value is StepbindError {
    return (
      typeof value === 'object' &&
      value !== null &&
      (value as Record<symbol, unknown>)[STEPBIND_ERROR] === true &&
      typeof (value as { code?: unknown }).code === 'string'
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
  toJSON(): { code: ErrorCode; message: string; detail: BaseErrorDetail } {
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
 * newer schema (`JOURNAL_VERSION`), or not writable (`JOURNAL_UNAVAILABLE`: read-only path, full
 * disk, locked). `detail.path` names the file and `detail.reason` the problem.
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

/** True when `value` is any stepbind error (optionally with the given code). */
export function isStepbindError(value: unknown, code?: ErrorCode): value is StepbindError {
  return StepbindError.isInstance(value) && (code === undefined || value.code === code);
}
