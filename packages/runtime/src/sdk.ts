/**
 * The only module that imports `@modelcontextprotocol/sdk`. It turns an SDK `Client` into the small
 * interfaces `@stepbind/binding` understands and maps every SDK failure to a typed stepbind error.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolResultSchema,
  ErrorCode as RpcErrorCode,
  McpError,
  ResultSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  ErrorCode,
  RuntimeError,
  StepbindError,
  type Delivery,
  type ListPageRequest,
  type ToolListSource,
} from '@stepbind/binding';
import type { ServerConfig } from './config.js';

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
  readonly content?: readonly unknown[];
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
  /** For a request whose delivery is tracked (`tools/call`): whether it was written. */
  readonly delivery?: Delivery;
}

/**
 * Maps an SDK or transport failure to a typed stepbind error, keeping the original as `cause`:
 * our own abort → `ABORTED`; SDK request timeout (-32001) → `TIMEOUT`; connection closed (-32000)
 * or a transport that is gone → `CONNECTION_CLOSED`, or `OUTCOME_UNKNOWN` when `ctx.delivery` says
 * the request was already written; any other JSON-RPC error → `SERVER_ERROR` with `detail.rpcCode`.
 * With `ctx.delivery`, every error carries it as `detail.delivery`.
 */
export function mapSdkError(error: unknown, ctx: MapContext): StepbindError {
  if (error instanceof StepbindError) return error;
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
      return sent ? outcomeUnknown(where, detail, error) : connectionClosed(where, detail, error);
    }
    return new RuntimeError(
      ErrorCode.SERVER_ERROR,
      `${where} failed with JSON-RPC error ${error.code}: ${stripPrefix(error.message)}`,
      { detail: { ...detail, rpcCode: error.code }, cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  if (/not connected|closed|EPIPE|ECONNRESET/i.test(message)) {
    return sent ? outcomeUnknown(where, detail, error) : connectionClosed(where, detail, error);
  }
  return new RuntimeError(ErrorCode.SERVER_ERROR, `${where} failed: ${message}`, {
    detail,
    cause: error,
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

/**
 * One live MCP session with one server: the SDK client, its transport, a `list_changed` counter and
 * close tracking. `close()` is idempotent and waits for a stdio child to exit.
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
  #stderrTail: string[];
  #source: ToolListSource;
  /** Delivery of each `tools/call` in flight, keyed by the identity of its `params` object. */
  readonly #outgoing = new WeakMap<object, { sent: boolean }>();

  /** @internal use {@link connectServer}. */
  constructor(
    name: string,
    client: Client,
    pid: number | undefined,
    stderrTail: string[],
    protocolVersion: string | undefined,
  ) {
    this.name = name;
    this.client = client;
    this.pid = pid;
    this.#stderrTail = stderrTail;
    this.#source = clientListSource(client, name);
    const version = client.getServerVersion();
    this.hello = Object.freeze({
      serverInfo:
        version === undefined
          ? undefined
          : Object.freeze({ name: version.name, version: version.version }),
      protocolVersion,
      listChanged: client.getServerCapabilities()?.tools?.listChanged === true,
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
      for (const listener of this.#errorListeners) listener(error);
    };
    this.#trackDelivery();
  }

  /**
   * Marks a `tools/call` as sent the moment the transport is asked to write it. The SDK's
   * `request()` spreads our request into the JSON-RPC message, so `params` is our object (we pass
   * no progress handler or task options, which would copy it); a transport that throws before
   * writing leaves it unsent. Anything after that counts as sent: the bytes may be on the wire.
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

  /** True once the transport closed, by us or because the server went away. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Number of `notifications/tools/list_changed` received so far (a {@link ChangeFeed}). */
  get version(): number {
    return this.#listChangedVersion;
  }

  /** The last lines the server wrote to stderr (stdio only), for error messages. */
  get stderrTail(): string {
    return this.#stderrTail.join('\n');
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
    if (this.#closed) {
      const where = `tools/list on server "${this.name}"`;
      return Promise.reject(connectionClosed(where, { server: this.name }, undefined));
    }
    return this.#source.listTools(request);
  }

  /**
   * Sends one `tools/call` on this exact connection. A timeout or abort makes the SDK send
   * `notifications/cancelled`. The result's `structuredContent` is not validated here. Every
   * failure says in `detail.delivery` whether the request was written to the transport; a
   * connection lost after writing is `OUTCOME_UNKNOWN` (`CONNECTION_CLOSED` only when nothing was
   * written).
   */
  async callTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: CallRequestOptions,
  ): Promise<RawCallResult> {
    if (this.#closed) {
      throw connectionClosed(
        `tools/call on server "${this.name}" (tool "${tool}")`,
        { server: this.name, tool, delivery: 'not-sent' },
        undefined,
      );
    }
    // The SDK never removes its abort listener: give it a per-call signal linked to the caller's,
    // so a long-lived signal neither leaks listeners nor cancels requests that already finished.
    const link = linkSignal(options.signal);
    const params = { name: tool, arguments: args as Record<string, unknown> };
    const delivery = { sent: false };
    this.#outgoing.set(params, delivery);
    try {
      return await this.client.request({ method: 'tools/call', params }, CallToolResultSchema, {
        timeout: options.timeoutMs,
        ...(link === undefined ? {} : { signal: link.signal }),
      });
    } catch (error) {
      throw mapSdkError(error, {
        server: this.name,
        tool,
        operation: 'tools/call',
        timeoutMs: options.timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        delivery: delivery.sent ? 'sent' : 'not-sent',
      });
    } finally {
      link?.dispose();
    }
  }

  /** Closes the session; for stdio, waits until the child process has exited. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#doClose();
    return this.#closing;
  }

  async #doClose(): Promise<void> {
    this.#listChangedListeners.clear();
    try {
      await this.client.close();
    } catch {
      // Closing a transport that already failed can throw; the process check below still runs.
    }
    this.#closed = true;
    if (this.pid !== undefined) await ensureExited(this.pid);
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

async function waitForExit(pid: number, ms: number): Promise<boolean> {
  for (let waited = 0; isAlive(pid); waited += 20) {
    if (waited >= ms) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

/**
 * Makes sure a child process is gone: it normally exits once its stdin closes; otherwise SIGTERM,
 * then SIGKILL. (The SDK escalates too, but it drops its handle without waiting when `initialize`
 * fails, and never waits for the SIGKILL to land.)
 */
async function ensureExited(pid: number): Promise<void> {
  if (await waitForExit(pid, 1_000)) return;
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    if (await waitForExit(pid, 1_000)) return;
  }
}

/** A per-request signal that follows `outer`; `dispose()` detaches it. */
function linkSignal(
  outer: AbortSignal | undefined,
): { readonly signal: AbortSignal; dispose(): void } | undefined {
  if (outer === undefined) return undefined;
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(outer.reason);
  if (outer.aborted) onAbort();
  else outer.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => outer.removeEventListener('abort', onAbort),
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Options for {@link connectServer}. */
export interface ConnectOptions {
  readonly signal?: AbortSignal;
  /** Overrides the config's `startupTimeoutMs`. */
  readonly timeoutMs?: number;
  /** Where a stdio child's stderr goes: kept as a tail for error messages, or inherited. @default "tail" */
  readonly stderr?: 'tail' | 'inherit';
}

const STDERR_TAIL_LINES = 20;

/**
 * Starts (stdio) or opens (HTTP) a connection to one configured server and completes `initialize`.
 *
 * @throws RuntimeError `SERVER_START_FAILED` (with the server's last stderr lines), `TIMEOUT` or
 *   `ABORTED`; a child that was spawned is closed on every failure path.
 */
export async function connectServer(
  name: string,
  config: ServerConfig,
  options: ConnectOptions = {},
): Promise<SdkConnection> {
  const timeoutMs = options.timeoutMs ?? config.startupTimeoutMs;
  const stderrTail: string[] = [];
  let transport: Transport;
  let childPid: number | undefined;
  let stdio: StdioClientTransport | undefined;
  if (config.transport === 'stdio') {
    const env: Record<string, string> = {};
    for (const key of config.envPassthrough) {
      const value = process.env[key];
      if (value !== undefined) env[key] = value;
    }
    Object.assign(env, config.env);
    const spawned = new StdioClientTransport({
      command: config.command,
      args: [...config.args],
      env,
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
      stderr: options.stderr === 'inherit' ? 'inherit' : 'pipe',
    });
    // Record the pid as soon as the child exists: a failed initialize makes the SDK forget it.
    const start = spawned.start.bind(spawned);
    spawned.start = async () => {
      try {
        await start();
      } finally {
        childPid = spawned.pid ?? undefined;
      }
    };
    stdio = spawned;
    const stream = stdio.stderr;
    if (stream !== null) {
      let partial = '';
      stream.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          stderrTail.push(line);
          if (stderrTail.length > STDERR_TAIL_LINES) stderrTail.shift();
        }
      });
    }
    transport = stdio;
  } else {
    transport = new StreamableHTTPClientTransport(new URL(config.url), {
      requestInit: { headers: { ...config.headers } },
    });
  }
  try {
    return await openSession(name, transport, {
      timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      pid: () => childPid,
      stderrTail,
    });
  } catch (error) {
    if (!(error instanceof StepbindError) || error.code !== ErrorCode.SERVER_START_FAILED)
      throw error;
    const tail = stderrTail.join('\n').trim();
    const what = config.transport === 'stdio' ? `command "${config.command}"` : `URL ${config.url}`;
    throw new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      `Server "${name}" could not be started (${what}): ${error.message}${tail === '' ? '' : `\nLast stderr lines:\n${tail}`}\nCheck the command, its arguments and environment in the configuration.`,
      { detail: { server: name, stderr: tail }, cause: error.cause },
    );
  }
}

/** Options of {@link connectTransport}. */
export interface ConnectTransportOptions {
  readonly signal?: AbortSignal;
  /** Budget for `initialize`. @default 30000 */
  readonly timeoutMs?: number;
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
    stderrTail: [],
  });
}

async function openSession(
  name: string,
  transport: Transport,
  options: {
    readonly timeoutMs: number;
    readonly signal?: AbortSignal;
    readonly pid: () => number | undefined;
    readonly stderrTail: string[];
  },
): Promise<SdkConnection> {
  const client = new Client({ ...CLIENT_INFO }, { capabilities: {} });
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
      await client.close();
    } catch {
      // The start already failed; the close is best effort and the original error is reported.
    }
    // The SDK already dropped its handle on the child: make sure it is gone before reporting.
    const pid = options.pid();
    if (pid !== undefined) await ensureExited(pid);
    const mapped = mapSdkError(error, {
      server: name,
      operation: 'initialize',
      timeoutMs: options.timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    if (mapped.code === ErrorCode.TIMEOUT || mapped.code === ErrorCode.ABORTED) throw mapped;
    throw new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      error instanceof Error ? error.message : String(error),
      { detail: { server: name }, cause: error },
    );
  } finally {
    link?.dispose();
  }
  return new SdkConnection(name, client, options.pid(), options.stderrTail, protocolVersion);
}

/**
 * Wraps an already connected SDK `Client` as a {@link ToolListSource}, for `enumerateTools`.
 */
export function clientListSource(client: Client, server: string): ToolListSource {
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
        });
      }
    },
  };
}
