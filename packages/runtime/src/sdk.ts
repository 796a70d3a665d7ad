/**
 * The SDK adapter (with `transports/`, the only code that imports `@modelcontextprotocol/sdk`). It
 * turns an SDK `Client` into the small interfaces `@stepbind/binding` understands and maps every SDK
 * failure to a typed stepbind error.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  ErrorCode as RpcErrorCode,
  McpError,
  ResultSchema,
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  ErrorCode,
  RuntimeError,
  StepbindError,
  type Delivery,
  type ListPageRequest,
  type McpContentBlock,
  type ToolListSource,
  onAbort,
} from '@stepbind/binding';
import {
  CLIENT_CAPABILITIES,
  installClientHandlers,
  rootsOf,
  type ClientHandlers,
} from './client-capabilities.js';
import { assertNoUrlCredentials, type ServerConfig } from './config.js';
import {
  httpFailure,
  HttpSessionWatch,
  type SessionLoss,
  type TrackedRequest,
} from './http-session.js';
import { createRedactor, NO_REDACTION, redactUrl, type Redactor } from './redact.js';
import { createDebug } from './log.js';
import { traceRequest } from './telemetry.js';
import { guardErrorOf, type FaultError } from './transports/guard.js';
import { GuardedHttpTransport } from './transports/http.js';
import { StdioProcessTransport } from './transports/stdio.js';

export { Client };

/** The name and version stepbind announces in `initialize`. */
export const CLIENT_INFO = Object.freeze({ name: 'stepbind', version: '0.1.0' });

/** What the remote server said about itself during `initialize`. */
export interface ServerHello {
  readonly serverInfo: { readonly name: string; readonly version: string } | undefined;
  readonly protocolVersion: string | undefined;
  readonly listChanged: boolean;
}

/** A raw `tools/call` result as the SDK parsed it (content, structuredContent, isError, _meta). */
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
}

/** Error-mapping context: what was being done, to whom. */
interface MapContext {
  readonly server: string;
  readonly tool?: string;
  readonly operation: string;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** The transport fault that closed the connection, if any: it replaces `CONNECTION_CLOSED`. */
  readonly fault?: FaultError | undefined;
  /** For a request whose delivery is tracked (`tools/call`): whether it was written. */
  readonly delivery?: Delivery;
}

/**
 * Maps an SDK or transport failure to a typed stepbind error, keeping the original as `cause`:
 * our own abort → `ABORTED`; SDK request timeout (-32001) → `TIMEOUT`; connection closed (-32000)
 * or a transport that is gone → `CONNECTION_CLOSED` (or the fault that closed it, such as
 * `MESSAGE_TOO_LARGE`), or `OUTCOME_UNKNOWN` when `ctx.delivery` says the request was already
 * written; a response the transport guard refused → its `MALFORMED_MESSAGE` or
 * `MESSAGE_TOO_LARGE`; any other JSON-RPC error → `SERVER_ERROR` with `detail.rpcCode`. With
 * `ctx.delivery`, every error carries it as `detail.delivery`.
 */
export function mapSdkError(error: unknown, ctx: MapContext): StepbindError {
  if (error instanceof StepbindError) return error;
  const guarded = guardErrorOf(error);
  if (guarded !== undefined) return guarded;
  const where = `${ctx.operation} on server "${ctx.server}"${ctx.tool === undefined ? '' : ` (tool "${ctx.tool}")`}`;
  const detail = {
    server: ctx.server,
    ...(ctx.tool === undefined ? {} : { tool: ctx.tool }),
    ...(ctx.delivery === undefined ? {} : { delivery: ctx.delivery }),
  };
  const sent = ctx.delivery === 'sent';
  if (ctx.signal?.aborted === true) {
    const reason: unknown = ctx.signal.reason;
    if (reason instanceof StepbindError) return reason;
    return new RuntimeError(
      ErrorCode.ABORTED,
      `${where} was cancelled by the caller${sent ? ' after it was sent (a cancellation was sent; it may have run)' : ''}.`,
      { detail, cause: error },
    );
  }
  if (error instanceof McpError) {
    if (error.code === Number(RpcErrorCode.RequestTimeout)) {
      return new RuntimeError(
        ErrorCode.TIMEOUT,
        `${where} timed out${ctx.timeoutMs === undefined ? '' : ` after ${ctx.timeoutMs} ms`}; a cancellation was sent${sent ? ', but the request may have run' : ''}. Check the server or raise the timeout.`,
        { detail: { ...detail, rpcCode: error.code, timeoutMs: ctx.timeoutMs }, cause: error },
      );
    }
    if (error.code === Number(RpcErrorCode.ConnectionClosed)) {
      return lostConnection(ctx, where, detail, error);
    }
    return new RuntimeError(
      ErrorCode.SERVER_ERROR,
      `${where} failed with JSON-RPC error ${error.code}: ${stripPrefix(error.message)}`,
      { detail: { ...detail, rpcCode: error.code }, cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  if (/not connected|closed|EPIPE|ECONNRESET/i.test(message)) {
    return lostConnection(ctx, where, detail, error);
  }
  return new RuntimeError(ErrorCode.SERVER_ERROR, `${where} failed: ${message}`, {
    detail,
    cause: error,
  });
}

/**
 * The connection is gone: the fault that closed it, if any; else `OUTCOME_UNKNOWN` when the request
 * was written (it may have run), `CONNECTION_CLOSED` when it was not.
 */
function lostConnection(
  ctx: MapContext,
  where: string,
  detail: Record<string, string>,
  error: unknown,
): StepbindError {
  const fault = faultError(ctx);
  if (fault !== undefined) return fault;
  const sent = ctx.delivery === 'sent';
  return sent ? outcomeUnknown(where, detail, error) : connectionClosed(where, detail, error);
}

function faultError(ctx: MapContext): StepbindError | undefined {
  return ctx.fault?.({
    id: -1,
    method: ctx.operation,
    ...(ctx.tool === undefined ? {} : { tool: ctx.tool }),
  });
}

function connectionClosed(
  where: string,
  detail: Record<string, string>,
  cause: unknown,
): StepbindError {
  return new RuntimeError(
    ErrorCode.CONNECTION_CLOSED,
    `${where} failed: the connection to the server is closed. Nothing was re-routed; refresh to reconnect and call again from a new step.`,
    { detail, cause },
  );
}

function outcomeUnknown(
  where: string,
  detail: Record<string, string>,
  cause: unknown,
): StepbindError {
  return new RuntimeError(
    ErrorCode.OUTCOME_UNKNOWN,
    `${where}: the connection to the server was lost after the request was sent, so it may or may not have run. Check whether it took effect before calling it again; nothing was re-routed.`,
    { detail, cause },
  );
}

function stripPrefix(message: string): string {
  return message.replace(/^MCP error -?\d+: /, '');
}

type Listener = () => void;

/** Delivery of one `tools/call`: whether it was written, and its JSON-RPC id once it is. */
interface Delivered {
  sent: boolean;
  readonly onId?: (id: string | number) => void;
}

const debugCall = createDebug('stepbind:call');

/**
 * One live MCP session with one server: the SDK client, its transport, a `list_changed` counter and
 * close tracking. `close()` is idempotent and waits until the stdio server's whole process group is
 * gone. After a transport fault (an oversized message), every request fails with that fault's code
 * instead of `CONNECTION_CLOSED`.
 */
export class SdkConnection {
  readonly name: string;
  readonly client: Client;
  readonly hello: ServerHello;
  readonly pid: number | undefined;
  #closed = false;
  #closing: Promise<void> | undefined;
  #listChangedVersion = 0;
  #listChangedListeners = new Set<Listener>();
  #closeListeners = new Set<Listener>();
  #errorListeners = new Set<(error: Error) => void>();
  #stderr: StderrTail;
  #logListeners = new Set<(message: ServerLogMessage) => void>();
  #source: ToolListSource;
  readonly #fault: () => FaultError | undefined;
  readonly #http: HttpSessionWatch | undefined;
  readonly #redactor: Redactor;
  #lost: SessionLoss | undefined;
  #probing = false;
  /** Delivery of each `tools/call` in flight, keyed by the identity of its `params` object. */
  readonly #outgoing = new WeakMap<object, Delivered>();

  /** @internal use {@link connectServer}. */
  constructor(
    name: string,
    client: Client,
    pid: number | undefined,
    stderr: StderrTail,
    protocolVersion: string | undefined,
    fault: () => FaultError | undefined = () => undefined,
    http?: { readonly watch: HttpSessionWatch; readonly redactor: Redactor },
  ) {
    this.name = name;
    this.client = client;
    this.pid = pid;
    this.#stderr = stderr;
    this.#fault = fault;
    this.#source = clientListSource(client, name, fault);
    this.#http = http?.watch;
    this.#redactor = http?.redactor ?? NO_REDACTION;
    const version = client.getServerVersion();
    this.hello = Object.freeze({
      serverInfo:
        version === undefined
          ? undefined
          : Object.freeze({ name: version.name, version: version.version }),
      protocolVersion,
      listChanged: client.getServerCapabilities()?.tools?.listChanged === true,
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
      const { level, logger, data } = notification.params;
      const message: ServerLogMessage = {
        level,
        ...(logger === undefined ? {} : { logger }),
        data,
      };
      for (const listener of this.#logListeners) listener(message);
    });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.#listChangedVersion++;
      for (const listener of this.#listChangedListeners) listener();
    });
    client.onclose = () => {
      this.#closed = true;
      for (const listener of this.#closeListeners) listener();
      this.#closeListeners.clear();
    };
    client.onerror = (error) => {
      const safe = this.#redactor.error(error);
      for (const listener of this.#errorListeners) listener(safe);
    };
    this.#http?.established(
      (loss) => this.#loseSession(loss),
      () => this.#probe(),
    );
    this.#trackDelivery();
  }

  /**
   * Why the Streamable HTTP session ended, once it did (the server forgot it, or it could not be
   * reached). A lost connection is {@link closed}: nothing more is sent on it; the runtime opens a
   * new session. Always `undefined` for stdio and in-memory connections.
   */
  get lost(): SessionLoss | undefined {
    return this.#lost;
  }

  #loseSession(loss: SessionLoss): void {
    if (this.#closed || this.#lost !== undefined) return;
    this.#lost = loss;
    // Closing rejects every request still waiting; callTool tells which ones may have run.
    void this.close();
  }

  /** A response stream broke: ask the server whether the session is still there. */
  #probe(): void {
    if (this.#probing || this.closed) return;
    this.#probing = true;
    this.client
      .ping({ timeout: PROBE_TIMEOUT_MS })
      .catch(() => undefined)
      .finally(() => {
        this.#probing = false;
      });
  }

  /**
   * Marks a `tools/call` as sent the moment the transport is asked to write it. The SDK's
   * `request()` spreads our request into the JSON-RPC message, so `params` is our object (we pass
   * no progress handler or task options, which would copy it). Only a synchronous throw from
   * `send` leaves it unsent; a rejected `send` (the transports report failures that way, also a
   * pipe that was already closed) counts as sent, which errs on the safe side: `OUTCOME_UNKNOWN`
   * rather than a retry that could run the call twice.
   */
  #trackDelivery(): void {
    const transport = this.client.transport;
    if (transport === undefined) return;
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      const params =
        'method' in message && message.method === 'tools/call' && 'id' in message
          ? message.params
          : undefined;
      const delivery = params === undefined ? undefined : this.#outgoing.get(params);
      if (delivery !== undefined) delivery.sent = true;
      if (delivery !== undefined && 'id' in message && message.id !== undefined) {
        delivery.onId?.(message.id);
      }
      try {
        return send(message, options);
      } catch (error) {
        if (delivery !== undefined) delivery.sent = false;
        throw error;
      }
    };
  }

  /**
   * Calls `listener` with every transport or protocol error the SDK reports outside a request
   * (bad JSON from the server, a failed cancellation, a child process error). Returns an
   * unsubscribe function.
   */
  onError(listener: (error: Error) => void): () => void {
    this.#errorListeners.add(listener);
    return () => this.#errorListeners.delete(listener);
  }

  /** True once the transport closed, by us or because the server went away (or the session was lost). */
  get closed(): boolean {
    return this.#closed || this.#lost !== undefined;
  }

  /** Number of `notifications/tools/list_changed` received so far (a {@link ChangeFeed}). */
  get version(): number {
    return this.#listChangedVersion;
  }

  /**
   * The fault that closed the transport (`MESSAGE_TOO_LARGE`), as the error a request would get;
   * `undefined` when the connection is open or closed normally.
   */
  get fault(): StepbindError | undefined {
    return this.#fault()?.(undefined);
  }

  /**
   * Calls `listener` with every line a stdio server writes to stderr from now on (with the config's
   * `stderr: "pipe"`, the default). Returns an unsubscribe function.
   */
  onStderr(listener: (line: string) => void): () => void {
    return this.#stderr.onLine(listener);
  }

  /** Calls `listener` with every MCP `notifications/message` (server log). Returns an unsubscribe function. */
  onLog(listener: (message: ServerLogMessage) => void): () => void {
    this.#logListeners.add(listener);
    return () => this.#logListeners.delete(listener);
  }

  /** The last lines the server wrote to stderr (stdio only), for error messages. */
  get stderrTail(): string {
    return this.#stderr.text;
  }

  /** Calls `listener` on every `list_changed`; returns an unsubscribe function. */
  onListChanged(listener: Listener): () => void {
    this.#listChangedListeners.add(listener);
    return () => this.#listChangedListeners.delete(listener);
  }

  /** Calls `listener` once when the connection closes; returns an unsubscribe function. */
  onClose(listener: Listener): () => void {
    if (this.#closed) {
      queueMicrotask(listener);
      return () => undefined;
    }
    this.#closeListeners.add(listener);
    return () => this.#closeListeners.delete(listener);
  }

  /** This connection as a {@link ToolListSource} for `enumerateCatalog`. */
  get listSource(): ToolListSource {
    return { listTools: (request) => this.listPage(request) };
  }

  /** Sends one raw `tools/list` request (the SDK's own result validation and caches are bypassed). */
  listPage(request: ListPageRequest): Promise<unknown> {
    if (this.closed) {
      const where = `tools/list on server "${this.name}"`;
      return Promise.reject(
        this.#fault()?.({ id: -1, method: 'tools/list' }) ??
          this.#closedError(where, { server: this.name }),
      );
    }
    const page = this.#source.listTools(request);
    if (this.#http === undefined) return page;
    return page.catch((error: unknown) => {
      const loss = this.#lost;
      if (loss !== undefined && request.signal?.aborted !== true) {
        // A listing is never used in part, so one whose session ended is simply dropped.
        throw new RuntimeError(
          ErrorCode.CONNECTION_CLOSED,
          `tools/list on server "${this.name}" failed: ${loss.message}. Nothing from this listing is used; a new session is being opened.`,
          {
            detail: {
              server: this.name,
              reason: loss.reason,
              ...(loss.httpStatus === undefined ? {} : { httpStatus: loss.httpStatus }),
            },
          },
        );
      }
      throw this.#redactor.error(error as Error);
    });
  }

  /** `CONNECTION_CLOSED` for a request that was not sent, saying why when the session was lost. */
  #closedError(where: string, detail: Record<string, string>): StepbindError {
    const loss = this.#lost;
    if (loss === undefined) {
      return connectionClosed(where, { ...detail, delivery: 'not-sent' }, undefined);
    }
    return new RuntimeError(
      ErrorCode.CONNECTION_CLOSED,
      `${where} was not sent: ${loss.message}. Nothing ran and nothing is re-routed; a new session is being opened, so call again from a new step.`,
      {
        detail: {
          ...detail,
          delivery: 'not-sent',
          reason: loss.reason,
          ...(loss.httpStatus === undefined ? {} : { httpStatus: loss.httpStatus }),
        },
      },
    );
  }

  /**
   * Sends one `tools/call` on this exact connection. A timeout or abort makes the SDK send
   * `notifications/cancelled`. The result's `structuredContent` is not validated here. Every
   * failure says in `detail.delivery` whether the request was written to the transport; a
   * connection lost after writing is `OUTCOME_UNKNOWN` (`CONNECTION_CLOSED` only when nothing was
   * written).
   */
  callTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions,
  ): Promise<RawCallResult> {
    if (this.closed) {
      return Promise.reject(
        this.#fault()?.({ id: -1, method: 'tools/call', tool }) ??
          this.#closedError(`tools/call on server "${this.name}" (tool "${tool}")`, {
            server: this.name,
            tool,
            delivery: 'not-sent',
          }),
      );
    }
    const started = debugCall.enabled ? performance.now() : 0;
    const sessionId = this.client.transport?.sessionId;
    const protocolVersion = this.hello.protocolVersion;
    const transport =
      this.#http !== undefined ? 'tcp' : this.pid !== undefined ? 'pipe' : undefined;
    const traced = traceRequest(
      {
        method: 'tools/call',
        target: tool,
        server: this.name,
        ...(sessionId === undefined ? {} : { sessionId }),
        ...(protocolVersion === undefined ? {} : { protocolVersion }),
        ...(transport === undefined ? {} : { transport }),
      },
      ({ span, meta }) =>
        this.#callTool(tool, args, options, meta, (id) => {
          span.setAttribute('jsonrpc.request.id', String(id));
        }),
      (result) => (result.isError === true ? 'tool_error' : undefined),
    );
    if (!debugCall.enabled) return traced;
    return traced.then(
      (result) => {
        debugCall(
          `server "${this.name}" tools/call ${tool}: ${result.isError === true ? 'tool error' : 'ok'} in ${(performance.now() - started).toFixed(1)} ms`,
        );
        return result;
      },
      (error: unknown) => {
        debugCall(
          `server "${this.name}" tools/call ${tool}: ${error instanceof StepbindError ? error.code : 'error'} in ${(performance.now() - started).toFixed(1)} ms`,
        );
        throw error;
      },
    );
  }

  async #callTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions,
    meta: Readonly<Record<string, string>>,
    onRequestId: (id: string | number) => void,
  ): Promise<RawCallResult> {
    // The SDK never removes its abort listener: give it a per-call signal linked to the caller's,
    // so a long-lived signal neither leaks listeners nor cancels requests that already finished.
    // Over HTTP there always is one: the session watch aborts a call whose response was lost.
    const link = linkSignal(options.signal, this.#http !== undefined);
    // Trace context travels in params._meta (OpenTelemetry MCP conventions); empty without an SDK.
    const params = {
      name: tool,
      arguments: args as Record<string, unknown>,
      ...(Object.keys(meta).length === 0 ? {} : { _meta: { ...meta } }),
    };
    const delivery: Delivered = { sent: false, onId: onRequestId };
    this.#outgoing.set(params, delivery);
    const send = (): Promise<RawCallResult> =>
      this.client.request({ method: 'tools/call', params }, CallToolResultSchema, {
        timeout: options.timeoutMs,
        ...(link === undefined ? {} : { signal: link.signal }),
      });
    let tracked: TrackedRequest | undefined;
    let pending: Promise<RawCallResult>;
    if (this.#http === undefined) {
      pending = send();
    } else {
      ({ tracked, result: pending } = this.#http.track(() => link?.abort(RESPONSE_LOST), send));
    }
    try {
      return await pending;
    } catch (error) {
      if (tracked !== undefined && options.signal?.aborted !== true) {
        const lostError = this.#lostCallError(tool, tracked);
        if (lostError !== undefined) throw lostError;
      }
      throw this.#redactor.error(
        mapSdkError(error, {
          server: this.name,
          tool,
          operation: 'tools/call',
          timeoutMs: options.timeoutMs,
          ...(options.signal === undefined ? {} : { signal: options.signal }),
          fault: this.#fault(),
          delivery: delivery.sent ? 'sent' : 'not-sent',
        }),
      );
    } finally {
      if (tracked !== undefined) this.#http?.untrack(tracked);
      link?.dispose();
    }
  }

  /**
   * The error of an HTTP call that failed because its answer was lost or its session ended:
   * `CONNECTION_CLOSED` when it provably did not run, `OUTCOME_UNKNOWN` when it was delivered and
   * may have run. `undefined` for any other failure (timeout, server error...).
   */
  #lostCallError(tool: string, tracked: TrackedRequest): StepbindError | undefined {
    const where = `tools/call on server "${this.name}" (tool "${tool}")`;
    const detail = { server: this.name, tool };
    const delivery = tracked.delivery;
    if (delivery === 'refused' || delivery === 'not-sent') return this.#closedError(where, detail);
    if (delivery === 'pending') return this.closed ? this.#closedError(where, detail) : undefined;
    if (delivery === 'sent' && this.#lost === undefined) return undefined;
    const why = this.#lost?.message ?? 'the response stream broke before the answer arrived';
    return new RuntimeError(
      ErrorCode.OUTCOME_UNKNOWN,
      `${where}: the request was delivered but its answer was lost (${why}). The tool may or may not have run; it was not sent again. Check its effect before calling it again from a new step.`,
      {
        detail: {
          ...detail,
          delivery: 'sent',
          reason: this.#lost?.reason ?? 'response-lost',
          ...(this.#lost?.httpStatus === undefined ? {} : { httpStatus: this.#lost.httpStatus }),
        },
      },
    );
  }

  /** Closes the session; for stdio, waits until the server's process group is gone. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#doClose();
    return this.#closing;
  }

  async #doClose(): Promise<void> {
    this.#listChangedListeners.clear();
    this.#http?.closing();
    try {
      await this.client.close();
    } catch {
      // Closing a transport that already failed can throw; the stdio transport's close never does.
    }
    this.#closed = true;
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** A per-request signal that follows `outer`; `dispose()` detaches it. */
function linkSignal(
  outer: AbortSignal | undefined,
  always = false,
): { readonly signal: AbortSignal; abort(reason: unknown): void; dispose(): void } | undefined {
  if (outer === undefined && !always) return undefined;
  const controller = new AbortController();
  const abort = (reason: unknown): void => controller.abort(reason);
  if (outer === undefined) return { signal: controller.signal, abort, dispose: () => undefined };
  if (outer.aborted) {
    controller.abort(outer.reason);
    return { signal: controller.signal, abort, dispose: () => undefined };
  }
  // One listener on the caller's signal however many calls share it (see onAbort).
  const dispose = onAbort(outer, () => controller.abort(outer.reason));
  return { signal: controller.signal, abort, dispose };
}

/** Budget of the `ping` that checks a session after one of its response streams broke. */
const PROBE_TIMEOUT_MS = 5_000;
/** The reason a call is aborted with when the session watch saw its response stream break. */
const RESPONSE_LOST = 'the response stream broke before the answer arrived';

/** Options for {@link connectServer}. */
export interface ConnectOptions {
  readonly signal?: AbortSignal;
  /** Overrides the config's `startupTimeoutMs`. */
  readonly timeoutMs?: number;
  /** Where a stdio child's stderr goes: kept as a tail for error messages, or inherited. @default "tail" */
  readonly stderr?: 'tail' | 'inherit';
  /**
   * Answers to server-to-client requests (sampling, elicitation). Roots come from the config's
   * `roots` unless given here.
   */
  readonly handlers?: ClientHandlers;
  /**
   * How long closing a stdio server waits at each step for its process group to be gone: after
   * ending stdin, after SIGTERM to the group, after SIGKILL to the group. @default 2000
   */
  readonly closeGraceMs?: number;
}

const STDERR_TAIL_LINES = 20;

/** An MCP `notifications/message` from a server (its log), as delivered to `onLog`. */
export interface ServerLogMessage {
  /** `debug` | `info` | `notice` | `warning` | `error` | `critical` | `alert` | `emergency`. */
  readonly level: string;
  readonly logger?: string;
  readonly data: unknown;
}

/** The last stderr lines of a stdio server (for start errors) and a feed of every line. */
export class StderrTail {
  // era: the era connector keeps the same stderr tail
  readonly #lines: string[] = [];
  readonly #listeners = new Set<(line: string) => void>();
  readonly #mode: 'pipe' | 'inherit' | 'ignore';

  constructor(mode: 'pipe' | 'inherit' | 'ignore') {
    this.#mode = mode;
  }

  push(line: string): void {
    this.#lines.push(line);
    if (this.#lines.length > STDERR_TAIL_LINES) this.#lines.shift();
    if (this.#mode !== 'pipe') return;
    for (const listener of this.#listeners) listener(line);
  }

  /** The first listener also gets the lines written before it came (the start-up tail). */
  onLine(listener: (line: string) => void): () => void {
    if (this.#listeners.size === 0 && this.#mode === 'pipe')
      for (const line of this.#lines) listener(line);
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get text(): string {
    return this.#lines.join('\n');
  }
}
const EARLY_ERRORS = 3;

/**
 * Starts (stdio) or opens (HTTP) a connection to one configured server and completes `initialize`.
 * A stdio server runs in its own process group; a failed start ends the whole group before this
 * rejects.
 *
 * @throws RuntimeError `SERVER_START_FAILED` (with the server's last stderr lines; for a missing
 *   working directory or command, `detail.configPath` names the key at fault), `TIMEOUT`,
 *   `ABORTED`, `MESSAGE_TOO_LARGE` or `MALFORMED_MESSAGE` (the `initialize` response).
 */
export async function connectServer(
  name: string,
  config: ServerConfig,
  options: ConnectOptions = {},
): Promise<SdkConnection> {
  const timeoutMs = options.timeoutMs ?? config.startupTimeoutMs;
  const stderrTail = new StderrTail(config.transport === 'stdio' ? config.stderr : 'pipe');
  let transport: Transport;
  let pid: () => number | undefined = () => undefined;
  let fault: () => FaultError | undefined = () => undefined;
  let http: { readonly watch: HttpSessionWatch; readonly redactor: Redactor } | undefined;
  if (config.transport === 'stdio') {
    const env: Record<string, string> = {};
    for (const key of config.envPassthrough) {
      const value = process.env[key];
      if (value !== undefined) env[key] = value;
    }
    Object.assign(env, config.env);
    let partial = '';
    const stdio = new StdioProcessTransport({
      server: name,
      command: config.command,
      args: config.args,
      env,
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
      stderr:
        options.stderr === 'inherit' || config.stderr === 'inherit'
          ? 'inherit'
          : config.stderr === 'ignore'
            ? 'ignore'
            : 'pipe',
      onStderr: (chunk) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = (lines.pop() ?? '').slice(-4096);
        for (const line of lines) stderrTail.push(line.slice(0, 4096));
      },
      maxMessageBytes: config.maxMessageBytes,
      closeGraceMs: options.closeGraceMs ?? 2_000,
    });
    pid = () => stdio.pid;
    fault = () => stdio.fault;
    transport = stdio;
  } else {
    assertNoUrlCredentials(config.url, `$.mcpServers.${name}.url`);
    const redactor = createRedactor(config.url, config.headers);
    const watch = new HttpSessionWatch(redactor);
    const guarded = new GuardedHttpTransport({
      server: name,
      url: config.url,
      headers: config.headers,
      maxMessageBytes: config.maxMessageBytes,
      // The session watch sees every HTTP status below the guard, which bounds the bodies.
      fetch: watch.fetch,
    });
    watch.attach(guarded);
    http = { watch, redactor };
    transport = guarded;
  }
  const redactor = http?.redactor ?? NO_REDACTION;
  try {
    return await openSession(name, transport, {
      timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      pid,
      fault,
      stderrTail,
      handlers: { roots: rootsOf(config.roots), ...options.handlers },
      ...(http === undefined ? {} : { http }),
    });
  } catch (error) {
    if (!(error instanceof StepbindError) || error.code !== ErrorCode.SERVER_START_FAILED)
      throw redactor.error(error as Error);
    // A start error that names its config key (cwd, command) already says what to fix.
    if (error.detail['configPath'] !== undefined) throw error;
    const tail = stderrTail.text.trim();
    const what =
      config.transport === 'stdio' ? `command "${config.command}"` : `URL ${redactUrl(config.url)}`;
    const failure = config.transport === 'http' ? httpFailure(error.cause) : {};
    const advice =
      config.transport === 'stdio'
        ? 'Check the command, its arguments and environment in the configuration.'
        : failure.httpStatus === 401 || failure.httpStatus === 403
          ? 'The server refused the credentials: check the values sent in "headers".'
          : 'Check the URL, the headers and that the server is running.';
    const why = [
      failure.httpStatus === undefined ? '' : `HTTP ${failure.httpStatus}: `,
      error.message,
      failure.code === undefined ? '' : ` (${failure.code})`,
    ].join('');
    throw redactor.error(
      new RuntimeError(
        ErrorCode.SERVER_START_FAILED,
        `Server "${name}" could not be started (${what}): ${why}${tail === '' ? '' : `\nLast stderr lines:\n${tail}`}\n${advice}`,
        { detail: { server: name, stderr: tail, ...failure }, cause: error.cause },
      ),
    );
  }
}

/** Options of {@link connectTransport}. */
export interface ConnectTransportOptions {
  readonly signal?: AbortSignal;
  /** Budget for `initialize`. @default 30000 */
  readonly timeoutMs?: number;
  /** Answers to server-to-client requests (roots, sampling, elicitation). */
  readonly handlers?: ClientHandlers;
}

/**
 * Completes `initialize` over any SDK transport (for example one end of
 * `InMemoryTransport.createLinkedPair()`) and returns the session. The transport is closed on failure.
 *
 * @throws RuntimeError `SERVER_START_FAILED`, `TIMEOUT` or `ABORTED`.
 */
export function connectTransport(
  name: string,
  transport: Transport,
  options: ConnectTransportOptions = {},
): Promise<SdkConnection> {
  return openSession(name, transport, {
    timeoutMs: options.timeoutMs ?? 30_000,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    pid: () => undefined,
    fault: () => undefined,
    stderrTail: new StderrTail('pipe'),
    ...(options.handlers === undefined ? {} : { handlers: options.handlers }),
  });
}

/** Codes an `initialize` failure keeps as they are (anything else is `SERVER_START_FAILED`). */
const START_CODES: ReadonlySet<string> = new Set([
  ErrorCode.TIMEOUT,
  ErrorCode.ABORTED,
  ErrorCode.SERVER_START_FAILED,
  ErrorCode.MESSAGE_TOO_LARGE,
  ErrorCode.MALFORMED_MESSAGE,
]);

export async function openSession( // era: legacy fallback on the probed process
  name: string,
  transport: Transport,
  options: {
    readonly timeoutMs: number;
    readonly signal?: AbortSignal;
    readonly pid: () => number | undefined;
    readonly fault: () => FaultError | undefined;
    readonly stderrTail: StderrTail;
    readonly handlers?: ClientHandlers;
    readonly http?: { readonly watch: HttpSessionWatch; readonly redactor: Redactor };
  },
): Promise<SdkConnection> {
  const client = new Client({ ...CLIENT_INFO }, { capabilities: CLIENT_CAPABILITIES });
  installClientHandlers(client, name, options.handlers ?? {});
  // Transport errors are observed from spawn on: those before the session exists explain a start
  // that fails (the SdkConnection takes over the handler once it succeeds).
  const early: Error[] = [];
  client.onerror = (error) => {
    early.push(error);
    if (early.length > EARLY_ERRORS) early.shift();
  };
  // The client reports the negotiated version only through this optional transport hook.
  let protocolVersion: string | undefined;
  const forward = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (version: string) => {
    protocolVersion = version;
    forward?.(version);
  };
  const link = linkSignal(options.signal);
  try {
    await client.connect(transport, {
      timeout: options.timeoutMs,
      ...(link === undefined ? {} : { signal: link.signal }),
    });
  } catch (error) {
    try {
      // Ends a stdio server's whole process group (and waits for it) on every failure path.
      await client.close();
    } catch {
      // The start already failed; the close is best effort and the original error is reported.
    }
    const mapped = mapSdkError(error, {
      server: name,
      operation: 'initialize',
      timeoutMs: options.timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      fault: options.fault(),
    });
    if (START_CODES.has(mapped.code)) throw mapped;
    const seen = early.map((e) => `\n  transport: ${e.message}`).join('');
    throw new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      `${error instanceof Error ? error.message : String(error)}${seen}`,
      { detail: { server: name }, cause: error },
    );
  } finally {
    link?.dispose();
  }
  return new SdkConnection(
    name,
    client,
    options.pid(),
    options.stderrTail,
    protocolVersion,
    options.fault,
    options.http,
  );
}

/**
 * Wraps an already connected SDK `Client` as a {@link ToolListSource}, for `enumerateTools`.
 */
export function clientListSource(
  client: Client,
  server: string,
  fault: () => FaultError | undefined = () => undefined,
): ToolListSource {
  return {
    async listTools(request: ListPageRequest): Promise<unknown> {
      try {
        return await client.request(
          {
            method: 'tools/list',
            params: request.cursor === undefined ? {} : { cursor: request.cursor },
          },
          ResultSchema,
          { timeout: request.timeoutMs, signal: request.signal },
        );
      } catch (error) {
        throw mapSdkError(error, {
          server,
          operation: 'tools/list',
          timeoutMs: request.timeoutMs,
          signal: request.signal,
          fault: fault(),
        });
      }
    },
  };
}
