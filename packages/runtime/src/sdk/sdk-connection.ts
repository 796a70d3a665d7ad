/**
 * The 2025-era adapter (with `era/` and `transports/`, the only code that imports
 * `@modelcontextprotocol/sdk`): an SDK `Client` behind the {@link Connection} interface, every SDK
 * failure mapped to a typed stepbind error.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  ErrorCode,
  RuntimeError,
  type StepbindError,
  type TaskCallRequest,
  type ChangeFeed,
  type Delivery,
  type FeatureMethod,
  type FeatureRequestOptions,
  type ListPageRequest,
  type ToolListSource,
  MAX_TIMER_MS,
} from '@stepbind/binding/internal';
import type {
  CallRequestOptions,
  Connection,
  DeliveryRecord,
  RawCallResult,
  ServerHello,
  ServerLogMessage,
} from '../connection.js';
import { ConnectionListeners } from '../connection-listeners.js';
import { ProgressRoutes, wantsProgress, type CallProgressWatch } from '../call-progress.js';
import { NO_REDACTION, type Redactor } from '../redact.js';
import { telemetryOff, traceToolCall, UNTRACED } from '../telemetry.js';
import {
  awaitTask,
  createdTaskOf,
  serverMakesTasks,
  taskParam,
  tasksUnsupportedError,
  type TaskWait,
} from './task-call.js';
import type { FaultSource } from '../transports/guard.js';
import type { Span } from '@opentelemetry/api';
import type { HttpSessionWatch, SessionLoss, TrackedRequest } from '../transports/http-session.js';
import type { StderrTail } from '../transports/stderr-tail.js';
import { connectionClosed, mapSdkError } from './sdk-errors.js';
import { listenConnection, listenFeatures, OutgoingCalls, trackDelivery } from './client-hooks.js';
import {
  clientListSource,
  debugCall,
  debugCallOutcome,
  hasKeys,
  featureRequestOn,
  ignoreRequestId,
  isPlainCall,
  linkSignal,
  PROBE_TIMEOUT_MS,
  RESPONSE_LOST,
} from './sdk-requests.js';
import {
  FeatureListeners,
  serverFeaturesOf,
  type FeatureNotification,
  type ServerFeatures,
} from '../resources/notifications.js';

export { Client };
export { mapSdkError } from './sdk-errors.js';
export { CLIENT_INFO } from '../client-capabilities.js';

type Listener = () => void;

/**
 * One live MCP session with one server: the SDK client, its transport, a `list_changed` counter and
 * close tracking. `close()` is idempotent and waits until the stdio server's whole process group is
 * gone. After a transport fault (an oversized message), every request fails with that fault's code
 * instead of `CONNECTION_CLOSED`.
 */
export class SdkConnection implements Connection {
  /** Always `legacy`: an `initialize` session (a `ModernConnection` speaks 2026-07-28). */
  readonly era = 'legacy' as const;
  readonly name: string;
  readonly client: Client;
  readonly hello: ServerHello;
  readonly pid: number | undefined;
  #closing: Promise<void> | undefined;
  readonly #listeners: ConnectionListeners;
  #source: ToolListSource;
  readonly #fault: FaultSource;
  readonly #http: HttpSessionWatch | undefined;
  readonly #redactor: Redactor;
  #lost: SessionLoss | undefined;
  #probing = false;
  /** Delivery of each `tools/call` in flight, keyed by the identity of its `params` object. */
  readonly #outgoing = new OutgoingCalls();
  /** The progress tokens of the calls in flight that asked for progress (DESIGN §20.1). */
  readonly #progress = new ProgressRoutes();
  /** The progress watch of each call in flight that has one, by request id. */
  readonly #watched = new Map<string | number, CallProgressWatch>();
  /** {@inheritDoc Connection.features} */
  readonly features: ServerFeatures;
  readonly #featureListeners = new FeatureListeners();

  /** @internal use `connectServer`. */
  constructor(
    name: string,
    client: Client,
    pid: number | undefined,
    stderr: StderrTail,
    protocolVersion: string | undefined,
    fault: FaultSource = () => undefined,
    http?: { readonly watch: HttpSessionWatch; readonly redactor: Redactor },
  ) {
    this.name = name;
    this.client = client;
    this.pid = pid;
    this.#listeners = new ConnectionListeners(stderr);
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
    listenConnection(client, this.#listeners, this.#redactor);
    this.#http?.established(
      (loss) => this.#loseSession(loss),
      () => this.#probe(),
    );
    trackDelivery(this.client, this.#progress, this.#watched, this.#outgoing);
    this.features = serverFeaturesOf(client.getServerCapabilities(), 'legacy');
    listenFeatures(this.client, this.#featureListeners);
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
    if (this.#listeners.closed || this.#lost !== undefined) return;
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
   * Calls `listener` with every transport or protocol error the SDK reports outside a request
   * (bad JSON from the server, a failed cancellation, a child process error). Returns an
   * unsubscribe function.
   */
  onError(listener: (error: Error) => void): () => void {
    return this.#listeners.onError(listener);
  }

  /** True once the transport closed, by us or because the server went away (or the session was lost). */
  get closed(): boolean {
    return this.#listeners.closed || this.#lost !== undefined;
  }

  /** Number of `notifications/tools/list_changed` received so far. */
  get listChangedCount(): number {
    return this.#listeners.changes.version;
  }

  /**
   * This connection's `list_changed` counter as the {@link ChangeFeed} `discoverToolPages` watches
   * (a change restarts a traversal).
   */
  get changes(): ChangeFeed {
    return this.#listeners.changes;
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
    return this.#listeners.onStderr(listener);
  }

  /** Calls `listener` with every MCP `notifications/message` (server log). Returns an unsubscribe function. */
  onLog(listener: (message: ServerLogMessage) => void): () => void {
    return this.#listeners.onLog(listener);
  }

  /** The last lines the server wrote to stderr (stdio only), for error messages. */
  get stderrTail(): string {
    return this.#listeners.stderrTail;
  }

  /** Calls `listener` on every `list_changed`; returns an unsubscribe function. */
  onListChanged(listener: Listener): () => void {
    return this.#listeners.onListChanged(listener);
  }

  /** Calls `listener` once when the connection closes; returns an unsubscribe function. */
  onClose(listener: Listener): () => void {
    return this.#listeners.onClose(listener);
  }

  /** This connection as a {@link ToolListSource} for `discoverToolPages`. */
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
    const traced = !telemetryOff()
      ? this.#tracedCallTool(tool, args, options)
      : this.#http === undefined && isPlainCall(options)
        ? this.#plainCallTool(tool, args, options)
        : this.#callTool(tool, args, options, UNTRACED.meta, ignoreRequestId);
    return debugCall.enabled ? debugCallOutcome(traced, this.name, tool, started) : traced;
  }

  /** {@link callTool} inside its CLIENT span (an OpenTelemetry SDK is installed). */
  #tracedCallTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions,
  ): Promise<RawCallResult> {
    return traceToolCall(
      {
        tool,
        server: this.name,
        sessionId: this.client.transport?.sessionId,
        protocolVersion: this.hello.protocolVersion,
        transport: this.#http !== undefined ? 'tcp' : this.pid !== undefined ? 'pipe' : undefined,
      },
      (meta, onRequestId, span) => this.#callTool(tool, args, options, meta, onRequestId, span),
    );
  }

  /**
   * {@link #callTool} of a call that needs nothing but the request (no span, task, progress, signal
   * or HTTP session): the same steps, without the closures and the context they would allocate.
   */
  async #plainCallTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions,
  ): Promise<RawCallResult> {
    const delivery: DeliveryRecord = { delivery: 'not-sent', onId: ignoreRequestId };
    const params = { name: tool, arguments: args };
    this.#outgoing.expect(params, delivery);
    const pending = this.client.request({ method: 'tools/call', params }, CallToolResultSchema, {
      timeout: options.timeoutMs,
    });
    this.#outgoing.settle(params);
    try {
      return await pending;
    } catch (error) {
      throw this.#mapCallError(error, tool, options, delivery.delivery);
    }
  }

  async #callTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions & { readonly task?: TaskCallRequest },
    meta: Readonly<Record<string, string>>,
    onRequestId: (id: string | number) => void,
    span?: Span,
  ): Promise<RawCallResult> {
    // DESIGN §20.2: a task-required tool needs a server that makes tasks; optional ones fall back.
    const asked = options.task;
    const task = asked !== undefined && serverMakesTasks(this.client) ? asked : undefined;
    if (asked?.mode === 'required' && task === undefined) {
      throw tasksUnsupportedError(
        this.name,
        tool,
        'the server does not declare tasks for tools/call',
      );
    }
    const deadline = performance.now() + options.timeoutMs;
    const wait = (): TaskWait => ({
      client: this.client,
      server: this.name,
      tool,
      signal: options.signal,
      deadline,
      timeoutMs: options.timeoutMs,
      mapError: (error) => this.#mapCallError(error, tool, options, 'sent'),
    });
    if (task?.resumeTaskId !== undefined)
      return await awaitTask(wait(), task.resumeTaskId, undefined);
    const watch = wantsProgress(options)
      ? this.#watch(tool, options, () => delivery.delivery, span)
      : undefined;
    let requestId: string | number | undefined;
    const delivery: DeliveryRecord = {
      delivery: 'not-sent',
      onId:
        watch === undefined
          ? onRequestId
          : (id) => {
              requestId = id;
              this.#watched.set(id, watch);
              onRequestId(id);
            },
    };
    // The SDK never removes its abort listener: give it a per-call signal linked to the caller's,
    // so a long-lived signal neither leaks listeners nor cancels requests that already finished.
    // Over HTTP there always is one: the session watch aborts a call whose response was lost; so
    // is there when progress owns the timeout (its timer aborts the request).
    const link = linkSignal(
      options.signal,
      this.#http !== undefined || watch?.ownsTimeout === true,
    );
    // Trace context travels in params._meta (OpenTelemetry MCP conventions); empty without an SDK.
    // Our own progress token (not the SDK's `onprogress`, which would copy `params`: see below).
    const extraMeta = watch === undefined ? meta : { ...meta, progressToken: watch.token };
    // Built field by field: a spread of `{}` per absent field is an allocation per call.
    const params: { name: string; arguments: Record<string, unknown>; [key: string]: unknown } = {
      name: tool,
      arguments: args,
    };
    if (extraMeta !== UNTRACED.meta && hasKeys(extraMeta)) params['_meta'] = { ...extraMeta };
    if (task !== undefined) params['task'] = taskParam(task);
    this.#outgoing.expect(params, delivery);
    const requestOptions: { timeout: number; signal?: AbortSignal } = {
      // A watch that owns the timeout aborts the request itself (reset by progress, capped).
      timeout: watch?.ownsTimeout === true ? MAX_TIMER_MS : options.timeoutMs,
    };
    if (link !== undefined) requestOptions.signal = link.signal;
    const send = async (): Promise<RawCallResult> => {
      const answer = await this.client.request(
        { method: 'tools/call', params },
        task === undefined ? CallToolResultSchema : ResultSchema,
        requestOptions,
      );
      if (task === undefined) return answer;
      const created = createdTaskOf(answer);
      if ('result' in created) return created.result;
      // Recorded before the first poll: a crash from here on resumes this task (DESIGN §20.2).
      await task.onCreated?.(created.task.taskId);
      return await awaitTask(wait(), created.task.taskId, created.task);
    };
    if (watch !== undefined) {
      if (watch.ownsTimeout && link !== undefined) watch.onTimeout = (error) => link.abort(error);
      watch.start();
    }
    let tracked: TrackedRequest | undefined;
    let pending: Promise<RawCallResult>;
    if (this.#http === undefined) {
      // A plain call is the SDK's request itself (no extra async frame and await around it).
      pending =
        task === undefined
          ? this.client.request(
              { method: 'tools/call', params },
              CallToolResultSchema,
              requestOptions,
            )
          : send();
    } else {
      ({ tracked, result: pending } = this.#http.track(() => link?.abort(RESPONSE_LOST), send));
    }
    this.#outgoing.settle(params);
    try {
      return await pending;
    } catch (error) {
      // The progress watch's timer ended it: TIMEOUT (after sending, `sent`), not ABORTED.
      if (watch?.timedOut !== undefined) throw watch.timedOut;
      if (tracked !== undefined && options.signal?.aborted !== true) {
        const lostError = this.#lostCallError(tool, tracked);
        if (lostError !== undefined) throw lostError;
      }
      throw this.#mapCallError(error, tool, options, delivery.delivery);
    } finally {
      if (watch !== undefined) this.#progress.close(watch);
      if (requestId !== undefined) this.#watched.delete(requestId);
      if (tracked !== undefined) this.#http?.untrack(tracked);
      link?.dispose();
    }
  }

  /** The progress watch of one call; its timeout handler is set once the request's signal exists. */
  #watch(
    tool: string,
    options: CallRequestOptions,
    delivery: () => Delivery,
    span: Span | undefined,
  ): CallProgressWatch {
    return this.#progress.open(options, { server: this.name, tool, delivery, span });
  }

  /** A failed `tools/call` (or task request of one) as a typed, redacted error. */
  #mapCallError(
    error: unknown,
    tool: string,
    options: CallRequestOptions,
    delivery: 'sent' | 'not-sent',
  ): StepbindError {
    return this.#redactor.error(
      mapSdkError(error, {
        server: this.name,
        tool,
        operation: 'tools/call',
        timeoutMs: options.timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        fault: this.#fault(),
        delivery,
      }),
    );
  }

  /**
   * The error of an HTTP call that failed because its answer was lost or its session ended:
   * `CONNECTION_CLOSED` when it provably did not run, `OUTCOME_UNKNOWN` when it was delivered and
   * may have run. `undefined` for any other failure (timeout, server error...).
   */
  #lostCallError(tool: string, tracked: TrackedRequest): StepbindError | undefined {
    const where = `tools/call on server "${this.name}" (tool "${tool}")`;
    const detail = { server: this.name, tool };
    if (tracked.end === 'refused') return this.#closedError(where, detail);
    if (tracked.end !== 'broken') {
      // Not handed to fetch yet: nothing ran.
      if (tracked.delivery === undefined) {
        return this.closed ? this.#closedError(where, detail) : undefined;
      }
      if (this.#lost === undefined) return undefined;
    }
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
    this.#listeners.stopListChanged();
    this.#http?.closing();
    try {
      await this.client.close();
    } catch {
      // Closing a transport that already failed can throw; the stdio transport's close never does.
    }
    // Closed by us: the transport's onclose told the listeners, or (a close that threw) nobody is told.
    this.#listeners.markClosed({ notify: false });
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** {@inheritDoc Connection.onFeatureNotification} */
  onFeatureNotification(listener: (notification: FeatureNotification) => void): () => void {
    return this.#featureListeners.on(listener);
  }

  /** {@inheritDoc Connection.featureRequest} */
  async featureRequest(
    method: FeatureMethod,
    params: Readonly<Record<string, unknown>>,
    options: FeatureRequestOptions,
  ): Promise<unknown> {
    if (this.closed) {
      throw (
        this.#fault()?.({ id: -1, method }) ??
        this.#closedError(`${method} on server "${this.name}"`, { server: this.name })
      );
    }
    return await featureRequestOn(this.client, method, params, options, {
      server: this.name,
      fault: this.#fault,
      redactor: this.#redactor,
    });
  }
}
