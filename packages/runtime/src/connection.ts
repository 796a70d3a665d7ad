/**
 * The {@link Connection} port: one live link to one server, in either protocol era, and the types
 * it shares with the runtime. Two adapters implement it: `sdk/sdk-connection.ts` (an `initialize`
 * session through the SDK client, the 2025 era) and `era/modern.ts` (the stateless 2026-07-28 era).
 * The runtime, discovery and calls use only this interface; no file outside the adapters knows the
 * concrete classes. This file imports no SDK module.
 */
import type {
  ChangeFeed,
  Delivery,
  InputRoundListener,
  ListPageRequest,
  McpContentBlock,
  ProgressListener,
  StepbindError,
  ToolListSource,
} from '@stepbind/binding/internal';
import type { SessionLoss } from './transports/http-session.js';
import type { FeatureNotification, ServerFeatures } from './resources/notifications.js';
import type { FeatureMethod, FeatureRequestOptions } from '@stepbind/binding/internal';

/**
 * The protocol era of a connection: `modern` (2026-07-28: `server/discover`, the `_meta` envelope
 * on every request) or `legacy` (an `initialize` session, 2025-11-25 or older).
 */
export type ProtocolEra = 'modern' | 'legacy';

/**
 * The era each server spoke, per connection identity key (see `identityKeyOf`), for one runtime's
 * lifetime: a restarted legacy server skips the `server/discover` probe; `sse`, a legacy server
 * reached over the HTTP+SSE transport after Streamable HTTP was refused, reconnects over it at once.
 */
export type EraMemory = Map<string, ProtocolEra | 'sse'>;

/** What the remote server said about itself (`initialize`, or `server/discover` and `_meta`). */
export interface ServerHello {
  readonly serverInfo: { readonly name: string; readonly version: string } | undefined;
  readonly protocolVersion: string | undefined;
  /** Whether the server offers `notifications/tools/list_changed`. */
  readonly listChanged: boolean;
}

/** A raw `tools/call` result as it arrived (content, structuredContent, isError, _meta). */
export interface RawCallResult {
  readonly content?: readonly McpContentBlock[];
  readonly structuredContent?: Record<string, unknown>;
  readonly isError?: boolean;
  readonly [key: string]: unknown;
}

/** Options for one `tools/call`. */
export interface CallRequestOptions {
  readonly signal?: AbortSignal;
  readonly timeoutMs: number;
  /**
   * Told of every MRTR round (`input_required`, the 2026-07-28 era) as it is answered or stopped
   * at. A 2025-era connection never calls it (its server asks with requests of its own instead).
   */
  readonly onInputRound?: InputRoundListener;
  /**
   * Told of every accepted `notifications/progress` of this call while it runs (bounded, in order:
   * DESIGN §20.1). The request carries a progress token only with this or
   * {@link resetTimeoutOnProgress}.
   */
  readonly onProgress?: ProgressListener;
  /** Each accepted progress report restarts `timeoutMs`, up to `maxTotalTimeoutMs`. @default false */
  readonly resetTimeoutOnProgress?: boolean;
  /** With `resetTimeoutOnProgress`: the absolute cap from the send, in ms. @default no cap */
  readonly maxTotalTimeoutMs?: number;
}

/**
 * Whether one `tools/call` was written, as the binding's {@link Delivery}: created `not-sent`, set
 * to `sent` by the adapter at the point the request's bytes are handed to the transport, and
 * copied into the failure's `detail.delivery` as is (nothing corrects it later). One record spans
 * every MRTR round of a call: once a round was written, the call stays `sent`.
 */
export interface DeliveryRecord {
  delivery: Delivery;
  /** Told the JSON-RPC id the request goes out with. */
  readonly onId?: (id: string | number) => void;
}

/** An MCP `notifications/message` from a server (its log), as delivered to `onLog`. */
export interface ServerLogMessage {
  /** `debug` | `info` | `notice` | `warning` | `error` | `critical` | `alert` | `emergency`. */
  readonly level: string;
  readonly logger?: string;
  readonly data: unknown;
}

/**
 * One live connection to one server. Every `on…` method returns an unsubscribe function; every
 * failure of a request is a typed {@link StepbindError}, and a `tools/call` failure says in
 * `detail.delivery` whether the request was written to the server (`sent`) or provably not
 * (`not-sent`), decided where the bytes are written.
 */
export interface Connection {
  /** The protocol era this connection speaks; fixed for its lifetime. */
  readonly era: ProtocolEra;
  /** The configured server name. */
  readonly name: string;
  /** What the server said about itself when the connection opened. */
  readonly hello: ServerHello;
  /** The stdio server's process id; `undefined` for HTTP and in-memory connections. */
  readonly pid: number | undefined;
  /**
   * True once nothing more can be sent: closed by us, by the server, by a transport fault, or (2025
   * era over HTTP) because the session was {@link lost}. Never goes back to false.
   */
  readonly closed: boolean;
  /**
   * Why the connection's MCP session ended, once it did: the Streamable HTTP server forgot the
   * `Mcp-Session-Id` or could not be reached (the runtime then opens a new connection and says
   * why). Only a 2025-era HTTP connection has a session to lose; it is always `undefined` for
   * stdio, in-memory and 2026-07-28 connections. A lost connection is {@link closed}.
   */
  readonly lost: SessionLoss | undefined;
  /**
   * The transport fault that closed the connection (an oversized or malformed message), as the
   * error a request gets from then on; `undefined` while open or after a normal close.
   */
  readonly fault: StepbindError | undefined;
  /** The `list_changed` counter (its `version` counts the notifications received so far). */
  readonly changes: ChangeFeed;
  /** Number of `notifications/tools/list_changed` received so far (`changes.version`). */
  readonly listChangedCount: number;
  /** This connection as the {@link ToolListSource} discovery reads its pages from. */
  readonly listSource: ToolListSource;
  /** The last lines a stdio server wrote to stderr (empty otherwise), for error messages. */
  readonly stderrTail: string;
  /**
   * Sends one `tools/list` request (one page) and resolves with the raw result; validation is
   * discovery's job.
   */
  listPage(request: ListPageRequest): Promise<unknown>;
  /**
   * Sends one `tools/call` on this exact connection (a 2026-07-28 call answers `input_required`
   * rounds itself). A timeout or abort sends `notifications/cancelled`. `structuredContent` is not
   * validated here. Every failure carries `detail.delivery`: a connection lost after the request
   * was written is `OUTCOME_UNKNOWN`, `CONNECTION_CLOSED` only when nothing was written.
   */
  callTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions,
  ): Promise<RawCallResult>;
  /** Calls `listener` on every `notifications/tools/list_changed`. */
  onListChanged(listener: () => void): () => void;
  /** Calls `listener` once when the connection closes (at once, in a microtask, if it is). */
  onClose(listener: () => void): () => void;
  /** Calls `listener` with every transport or protocol error reported outside a request. */
  onError(listener: (error: Error) => void): () => void;
  /** Calls `listener` with every line a stdio server writes to stderr from now on. */
  onStderr(listener: (line: string) => void): () => void;
  /** Calls `listener` with every `notifications/message` (server log). */
  onLog(listener: (message: ServerLogMessage) => void): () => void;
  /** Closes the connection; for stdio, waits until the server's process group is gone. Idempotent. */
  close(): Promise<void>;
  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void>;
  /** What the server offers beyond tools (resources, prompts, completions; DESIGN §20.3). */
  readonly features: ServerFeatures;
  /**
   * Sends one resources, prompts or completion request on this exact connection and resolves
   * with its raw result (the caller checks it). Failures are typed and scrubbed by the redactor;
   * a method the era cannot do is `FEATURE_UNSUPPORTED`.
   */
  featureRequest(
    method: FeatureMethod,
    params: Readonly<Record<string, unknown>>,
    options: FeatureRequestOptions,
  ): Promise<unknown>;
  /** Calls `listener` on every resources/prompts notification; returns an unsubscribe function. */
  onFeatureNotification(listener: (notification: FeatureNotification) => void): () => void;
}
