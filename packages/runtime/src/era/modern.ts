/**
 * A connection in the 2026-07-28 (stateless) era, over any SDK `Transport` that carries raw
 * JSON-RPC messages (stepbind's stdio process transport, or {@link ModernHttpTransport}). It
 * implements the {@link Connection} interface, speaks the protocol itself (no SDK client, so no
 * 64-page walk, no TTL or validation cache), and:
 *
 * - sends the `_meta` envelope on every request (the caller's `_meta` kept);
 * - reads `serverInfo` from each result's `_meta`;
 * - records `ttlMs` / `cacheScope` of every `tools/list` page on its own ({@link pageHints});
 * - opens `subscriptions/listen` for `toolsListChanged` when the server offers it and feeds its
 *   notifications to `onListChanged` (the runtime's debounced hard refresh), checking the
 *   acknowledgement against the filter it asked for, and re-opening it when it ends
 *   (`era/listen.ts`);
 * - answers `input_required` results of `tools/call` (MRTR) through the application's elicitation
 *   and sampling handlers, retrying with a new request id, for at most `MAX_INPUT_ROUNDS` (8, `era/mrtr.ts`);
 * - routes `notifications/progress` to the call that asked for it (`call-progress.ts`).
 */
import type { RuntimeClock } from '../clock.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import {
  ErrorCode,
  RuntimeError,
  StepbindError,
  onAbort,
  type ChangeFeed,
  type Delivery,
  type ListPageRequest,
  type ToolListSource,
} from '@stepbind/binding/internal';
import type { TaskCallRequest } from '@stepbind/binding/internal';
import type { ClientHandlers } from '../client-capabilities.js';
import type {
  CallRequestOptions,
  Connection,
  DeliveryRecord,
  RawCallResult,
  ServerHello,
  ServerLogMessage,
} from '../connection.js';
import type { FaultSource } from '../transports/guard.js';
import { NO_REDACTION, type Redactor } from '../redact.js';
import { isAuthRefusal, withAuthDetail } from '../transports/http-auth.js';
import {
  cacheHintsOf,
  eraError,
  MODERN_PROTOCOL_VERSION,
  serverInfoOf,
  withEnvelope,
  type DiscoverInfo,
  type RpcErrorObject,
} from './envelope.js';
import { ModernHttpTransport } from './http.js';
import { traceRequest } from '../telemetry.js';
import { tasksUnsupportedError } from '../sdk/task-call.js';
import { ListenStream } from './listen.js';
import { callWithInput } from './mrtr.js';
import { ConnectionListeners, type StderrFeed } from '../connection-listeners.js';
import { ProgressRoutes } from '../call-progress.js';
import { ModernFeatures } from './modern-features.js';
import {
  detailOf,
  isRecord,
  where,
  withMeta,
  type Ctx,
  type RequestOptions,
} from './request-context.js';

type Listener = () => void;

/** The cache hints of one `tools/list` page, in order. */
export interface PageHints {
  readonly page: number;
  readonly ttlMs?: number;
  readonly cacheScope?: 'public' | 'private';
}

interface Pending {
  readonly resolve: (result: unknown) => void;
  readonly reject: (error: RpcErrorObject | StepbindError) => void;
  /** Ignored responses (a listen stream) stay pending without a timer. */
}

/** A pending request's rejection when the connection closes: `OUTCOME_UNKNOWN` once sent. */
const CLOSED: RpcErrorObject = Object.freeze({ code: 0, message: 'connection closed' });

/** Options of {@link ModernConnection}. */
export interface ModernConnectionOptions {
  readonly name: string;
  readonly transport: Transport;
  readonly discover: DiscoverInfo;
  readonly pid?: number | undefined;
  readonly stderr: StderrFeed;
  readonly handlers?: ClientHandlers;
  /** The transport's fault, as the stdio transport reports it (the same shape the 2025 era takes). */
  readonly fault?: FaultSource;
  /** Number of the first request id (the probe used the ones before). @default 1 */
  readonly firstId?: number;
  /** The clock of the listen stream's re-listen backoff. @default the real clock */
  readonly clock?: RuntimeClock;
  /**
   * Scrubs the secrets of the server's configuration (and the tokens its authorizer learned) out
   * of every error a request fails with, server-sent text included. @default none
   */
  readonly redactor?: Redactor;
}

/** One modern-era connection; see the module comment. `close()` is idempotent. */
export class ModernConnection implements Connection {
  readonly name: string;
  readonly hello: ServerHello;
  readonly pid: number | undefined;
  /** Always `modern` (an {@link SdkConnection} speaks the 2025 era). */
  readonly era = 'modern' as const;
  /** What `server/discover` said. */
  readonly discover: DiscoverInfo;
  readonly #transport: Transport;
  readonly #pending = new Map<number, Pending>();
  /** The progress tokens of the calls in flight that asked for progress (one per call, all rounds). */
  readonly #progress = new ProgressRoutes();
  readonly #handlers: ClientHandlers;
  readonly #listeners: ConnectionListeners;
  readonly #fault: FaultSource;
  readonly #redactor: Redactor;
  #nextId: number;
  #closing: Promise<void> | undefined;
  #serverInfo: { readonly name: string; readonly version: string } | undefined;
  readonly #listen: ListenStream;
  #pages: PageHints[] = [];
  /** Resources, prompts and completions in this era (`era/modern-features.ts`). */
  readonly features: Connection['features'];
  readonly onFeatureNotification: Connection['onFeatureNotification'];
  readonly featureRequest: Connection['featureRequest'];
  #listingPages: PageHints[] = [];

  constructor(options: ModernConnectionOptions) {
    this.name = options.name;
    this.#transport = options.transport;
    this.discover = options.discover;
    this.pid = options.pid;
    this.#listeners = new ConnectionListeners(options.stderr);
    this.#handlers = options.handlers ?? {};
    this.#fault = options.fault ?? (() => undefined);
    this.#redactor = options.redactor ?? NO_REDACTION;
    this.#nextId = options.firstId ?? 1;
    this.#serverInfo = options.discover.serverInfo;
    const tools = options.discover.capabilities['tools'];
    this.hello = Object.freeze({
      serverInfo: this.#serverInfo,
      protocolVersion: MODERN_PROTOCOL_VERSION,
      listChanged: isRecord(tools) && tools['listChanged'] === true,
    });
    const features = new ModernFeatures(this.name, options.discover.capabilities, (m, p, o) =>
      this.#request(m, p, o),
    );
    this.features = features.support;
    this.onFeatureNotification = (listener) => features.listeners.on(listener);
    this.featureRequest = (method, params, o) => features.request(method, params, o);
    this.#transport.onmessage = (message) => this.#receive(message);
    this.#transport.onerror = (error) => this.#listeners.error(this.#redactor.error(error));
    this.#transport.onclose = () => this.#markClosed();
    this.#listen = new ListenStream({
      server: this.name,
      isClosed: () => this.#listeners.closed,
      nextId: () => this.#nextId++,
      expect: (id, handlers) => this.#pending.set(id, handlers),
      send: (message) => this.#transport.send(message),
      report: (error) => this.#report(error),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
    if (options.transport instanceof ModernHttpTransport) {
      // A typed failure of one request (oversized or malformed answer) reaches it as is.
      options.transport.onrequestfault = (id, error) => {
        if (typeof id === 'number') this.#pending.get(id)?.reject(error);
      };
    }
  }

  /**
   * Starts the `subscriptions/listen` stream when the server offers `tools.listChanged`; it is
   * re-opened whenever it ends while the connection is open (`era/listen.ts`).
   */
  listen(): void {
    if (this.hello.listChanged) this.#listen.open();
  }

  /** Always `undefined`: a 2026-07-28 connection is stateless, it has no session to lose. */
  readonly lost = undefined;

  get closed(): boolean {
    return this.#listeners.closed;
  }

  /** Number of `notifications/tools/list_changed` received so far. */
  get listChangedCount(): number {
    return this.#listeners.changes.version;
  }

  /** The `list_changed` counter as the {@link ChangeFeed} `discoverToolPages` watches. */
  get changes(): ChangeFeed {
    return this.#listeners.changes;
  }

  get fault(): StepbindError | undefined {
    return this.#fault()?.(undefined);
  }

  /** The `serverInfo` of the latest result that carried one. */
  get serverInfo(): { readonly name: string; readonly version: string } | undefined {
    return this.#serverInfo;
  }

  /** Cache hints of each page of the last complete (or current) listing. */
  get pageHints(): readonly PageHints[] {
    return this.#listingPages;
  }

  onError(listener: (error: Error) => void): () => void {
    return this.#listeners.onError(listener);
  }

  onStderr(listener: (line: string) => void): () => void {
    return this.#listeners.onStderr(listener);
  }

  onLog(listener: (message: ServerLogMessage) => void): () => void {
    return this.#listeners.onLog(listener);
  }

  get stderrTail(): string {
    return this.#listeners.stderrTail;
  }

  onListChanged(listener: Listener): () => void {
    return this.#listeners.onListChanged(listener);
  }

  onClose(listener: Listener): () => void {
    return this.#listeners.onClose(listener);
  }

  get listSource(): ToolListSource {
    return { listTools: (request) => this.listPage(request) };
  }

  /** One `tools/list` page with the envelope; its `ttlMs` / `cacheScope` are recorded per page. */
  async listPage(request: ListPageRequest): Promise<unknown> {
    if (request.cursor === undefined) this.#pages = [];
    const result = await this.#request(
      'tools/list',
      request.cursor === undefined ? {} : { cursor: request.cursor },
      { timeoutMs: request.timeoutMs, signal: request.signal },
    );
    this.#pages.push({ page: this.#pages.length + 1, ...cacheHintsOf(result) });
    if (isRecord(result) && result['nextCursor'] === undefined) {
      this.#listingPages = Object.freeze([...this.#pages]) as PageHints[];
    }
    return result;
  }

  /**
   * One `tools/call`, with MRTR ({@link callWithInput}): `input_required` results are answered
   * through the application's handlers, each round reported to `onInputRound`. Every failure
   * carries `detail.delivery`.
   *
   * @throws RuntimeError `INPUT_REQUIRED` when the server asks for input the application cannot
   *   give, or asks `MAX_INPUT_ROUNDS` (8) times.
   */
  callTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions,
  ): Promise<RawCallResult> {
    // DESIGN §20.2: this era has no tasks here; a task-required call (or a resume) is refused unsent.
    if ((options as { readonly task?: TaskCallRequest }).task?.mode === 'required') {
      const why = 'the 2026-07-28 protocol era has no tasks in stepbind yet';
      return Promise.reject(tasksUnsupportedError(this.name, tool, why));
    }
    // One record for the whole call: once any round was written, the call may have run, so a later
    // round that fails (even before it is written) is never reported as not sent.
    const delivery: DeliveryRecord = { delivery: 'not-sent' };
    // One CLIENT span for the whole call, every MRTR round included (as the 2025 era's).
    return traceRequest(
      {
        method: 'tools/call',
        target: tool,
        server: this.name,
        protocolVersion: MODERN_PROTOCOL_VERSION,
        ...(this.pid !== undefined
          ? { transport: 'pipe' as const }
          : this.#transport instanceof ModernHttpTransport
            ? { transport: 'tcp' as const }
            : {}),
      },
      ({ span, meta }) =>
        this.#progress.run(
          options,
          { server: this.name, tool, delivery: () => delivery.delivery, span },
          (wired) => {
            const callMeta = wired.meta(meta);
            const send = (params: Record<string, unknown>): Promise<unknown> =>
              wired.request((request) =>
                this.#request('tools/call', withMeta(params, callMeta), {
                  ...request,
                  tool,
                  delivery,
                  ...(span.isRecording()
                    ? { onId: (id: number) => span.setAttribute('jsonrpc.request.id', String(id)) }
                    : {}),
                }),
              );
            return callWithInput(
              { server: this.name, handlers: this.#handlers, send },
              tool,
              args,
              wired.options,
            );
          },
        ),
      (result) => (result.isError === true ? 'tool_error' : undefined),
    );
  }

  /** {@link #send}, its failure scrubbed by the server's redactor (a server may echo secrets). */
  #request(
    method: string,
    params: Record<string, unknown>,
    options: RequestOptions,
  ): Promise<unknown> {
    return this.#send(method, params, options).catch((error: unknown) => {
      throw error instanceof Error ? this.#redactor.error(error) : error;
    });
  }

  #send(
    method: string,
    params: Record<string, unknown>,
    options: RequestOptions,
  ): Promise<unknown> {
    const ctx = {
      server: this.name,
      method,
      ...(options.tool === undefined ? {} : { tool: options.tool }),
    };
    const deliveryOf = (): Delivery | undefined => options.delivery?.delivery;
    if (this.#listeners.closed) return Promise.reject(this.#closedError(ctx, deliveryOf()));
    let written = false;
    const id = this.#nextId++;
    options.onId?.(id);
    return new Promise<unknown>((resolve, reject) => {
      let detach: () => void = () => undefined;
      const settle = (): void => {
        options.onSettled?.();
        clearTimeout(timer);
        detach();
        this.#pending.delete(id);
      };
      const cancel = (error: StepbindError): void => {
        settle();
        if (options.delivery === undefined || written) {
          this.#transport
            .send({
              jsonrpc: '2.0',
              method: 'notifications/cancelled',
              params: { requestId: id, reason: error.message.slice(0, 200) },
            })
            .catch(() => undefined);
        }
        reject(error);
      };
      this.#pending.set(id, {
        resolve: (result) => {
          settle();
          const info = serverInfoOf(result);
          if (info !== undefined) this.#serverInfo = info;
          resolve(result);
        },
        reject: (error) => {
          settle();
          const delivery = deliveryOf();
          reject(
            error === CLOSED
              ? this.#lostError(ctx, delivery)
              : error instanceof StepbindError
                ? error
                : eraError(error, { ...ctx, ...(delivery === undefined ? {} : { delivery }) }),
          );
        },
      });
      const timer = setTimeout(() => {
        const sent = deliveryOf() === 'sent';
        cancel(
          new RuntimeError(
            ErrorCode.TIMEOUT,
            `${where(ctx)} timed out after ${options.timeoutMs} ms; a cancellation was sent${sent ? ', but the request may have run' : ''}. Check the server or raise the timeout.`,
            { detail: detailOf(ctx, deliveryOf(), { timeoutMs: options.timeoutMs }) },
          ),
        );
      }, options.timeoutMs);
      if (options.signal !== undefined) {
        const abort = (): void => {
          const reason: unknown = options.signal?.reason;
          cancel(
            reason instanceof StepbindError
              ? reason
              : new RuntimeError(ErrorCode.ABORTED, `${where(ctx)} was cancelled by the caller.`, {
                  detail: detailOf(ctx, deliveryOf()),
                }),
          );
        };
        if (options.signal.aborted) {
          abort();
          return;
        }
        detach = onAbort(options.signal, abort);
      }
      const message = {
        jsonrpc: '2.0',
        id,
        method,
        params: withEnvelope(params),
      } as JSONRPCMessage;
      // The request's bytes are handed to the transport here: from now on it may have run.
      written = true;
      const before = options.delivery?.delivery;
      if (options.delivery !== undefined) options.delivery.delivery = 'sent';
      this.#transport.send(message).catch((error: unknown) => {
        if (!this.#pending.has(id)) return;
        settle();
        if (isAuthRefusal(error)) {
          // Refused before the server processed it: this round did not run (an earlier round
          // that was sent still counts), and the caller gets the authorization error itself.
          if (options.delivery !== undefined && before !== undefined) {
            options.delivery.delivery = before;
          }
          reject(withAuthDetail(error, detailOf(ctx, deliveryOf())));
          return;
        }
        reject(this.fault ?? this.#lostError(ctx, deliveryOf(), error));
      });
    });
  }

  #receive(message: JSONRPCMessage): void {
    const m = message as Record<string, unknown>;
    if ('id' in m && ('result' in m || 'error' in m) && !('method' in m)) {
      const pending = typeof m['id'] === 'number' ? this.#pending.get(m['id']) : undefined;
      if (pending === undefined) return; // late answer to a cancelled or probe request
      if ('error' in m && isRecord(m['error'])) {
        const e = m['error'];
        pending.reject({
          code: typeof e['code'] === 'number' ? e['code'] : 0,
          message: typeof e['message'] === 'string' ? e['message'] : '',
          data: e['data'],
        });
      } else {
        pending.resolve(m['result']);
      }
      return;
    }
    const method = m['method'];
    if ('id' in m && typeof method === 'string') {
      // A modern server asks for input through input_required results, never with a request.
      this.#transport
        .send({
          jsonrpc: '2.0',
          id: m['id'],
          error: {
            code: -32601,
            message: `stepbind speaks ${MODERN_PROTOCOL_VERSION} with this server: server-to-client requests are not used (answer with input_required)`,
          },
        } as JSONRPCMessage)
        .catch(() => undefined);
      return;
    }
    const params = isRecord(m['params']) ? m['params'] : {};
    if (method === 'notifications/tools/list_changed') {
      this.#listeners.listChanged();
    } else if (method === 'notifications/subscriptions/acknowledged') {
      this.#listen.acknowledged();
      const granted = isRecord(params['notifications']) ? params['notifications'] : {};
      if (granted['toolsListChanged'] !== true) {
        this.#report(
          new RuntimeError(
            ErrorCode.SERVER_ERROR,
            `Server "${this.name}" acknowledged subscriptions/listen without toolsListChanged, which it offers in server/discover: its list changes will only be seen at the next refresh.`,
            { detail: { server: this.name } },
          ),
        );
      }
    } else if (method === 'notifications/progress') {
      this.#progress.route(params);
    } else if (method === 'notifications/message') {
      const level = params['level'];
      const logger = params['logger'];
      const log: ServerLogMessage = {
        level: typeof level === 'string' ? level : 'info',
        ...(typeof logger === 'string' ? { logger } : {}),
        data: params['data'],
      };
      this.#listeners.log(log);
    }
  }

  #report(error: Error): void {
    this.#listeners.error(error);
  }

  /**
   * The error of a request asked for on a closed connection: `CONNECTION_CLOSED` (nothing ran), or
   * `OUTCOME_UNKNOWN` when an earlier MRTR round of the same call was written (it may have run).
   */
  #closedError(ctx: Ctx, delivery: Delivery | undefined): StepbindError {
    if (delivery === 'sent') return this.fault ?? this.#lostError(ctx, 'sent');
    return (
      this.fault ??
      new RuntimeError(
        ErrorCode.CONNECTION_CLOSED,
        `${where(ctx)} was not sent: the connection to the server is closed. Nothing ran; call again from a new step.`,
        { detail: detailOf(ctx, delivery ?? 'not-sent') },
      )
    );
  }

  #lostError(ctx: Ctx, delivery: Delivery | undefined, cause?: unknown): StepbindError {
    if (delivery === 'sent') {
      return new RuntimeError(
        ErrorCode.OUTCOME_UNKNOWN,
        `${where(ctx)}: the connection closed after the request was sent. The tool may or may not have run; check its effect before calling it again.`,
        { detail: detailOf(ctx, 'sent'), cause },
      );
    }
    return new RuntimeError(
      ErrorCode.CONNECTION_CLOSED,
      `${where(ctx)} failed: the connection to the server closed.`,
      { detail: detailOf(ctx, delivery), cause },
    );
  }

  #markClosed(): void {
    this.#listeners.markClosed({
      before: () => {
        this.#listen.stop();
        for (const [id, pending] of [...this.#pending]) {
          this.#pending.delete(id);
          pending.reject(this.fault ?? CLOSED);
        }
      },
    });
  }

  /** Cancels the listen stream and closes the transport (for stdio: the whole process group). */
  close(): Promise<void> {
    this.#closing ??= this.#doClose();
    return this.#closing;
  }

  async #doClose(): Promise<void> {
    this.#listeners.stopListChanged();
    const listen = this.#listen.stop();
    if (listen !== undefined && !this.#listeners.closed) {
      this.#pending.delete(listen);
      await this.#transport
        .send({
          jsonrpc: '2.0',
          method: 'notifications/cancelled',
          params: { requestId: listen, reason: 'closing' },
        })
        .catch(() => undefined);
    }
    try {
      await this.#transport.close();
    } finally {
      this.#markClosed();
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
