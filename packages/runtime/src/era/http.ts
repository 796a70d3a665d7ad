/**
 * The 2026-07-28 era over Streamable HTTP: every JSON-RPC message is one POST to the server's URL
 * with the configured headers plus the era's own (`MCP-Protocol-Version`, `Mcp-Method`, and
 * `Mcp-Name` for `tools/call`, `resources/read`, `prompts/get`). There is no session: no
 * `Mcp-Session-Id`, no GET stream; a response is one JSON body or a `text/event-stream` whose events
 * answer the request (the `subscriptions/listen` stream stays open until it is cancelled).
 *
 * Bounds and safety as in `transports/http.ts`: a JSON body, an SSE event and an error body are each
 * read up to `maxMessageBytes`; every message passes {@link checkMessage}; an oversized or malformed
 * answer fails the request it answers at once (`MESSAGE_TOO_LARGE`, `MALFORMED_MESSAGE`); every
 * text taken from the server or the network is passed through the configuration's redactor.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { ConnectionPool } from '../transports/pool.js';
import { ErrorCode, RuntimeError, type StepbindError } from '@stepbind/binding/internal';
import { serverConfigPath } from '../config-values.js';
import type { ServerAuthorizer } from '../auth/types.js';
import type { Redactor } from '../redact.js';
import {
  checkMessage,
  malformedMessageError,
  messageTooLargeError,
  preview,
  type LiveRequest,
} from '../transports/guard.js';
import { readBounded } from '../transports/http.js';
import { MODERN_PROTOCOL_VERSION } from './envelope.js';
import { headerValue, paramHeadersOf, paramHeaderValues } from './param-headers.js';

/** Options of {@link ModernHttpTransport}. */
export interface ModernHttpOptions {
  readonly server: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly maxMessageBytes: number;
  readonly redactor: Redactor;
  /**
   * @default globalThis.fetch through a connection pool of this transport's own, destroyed on
   *   `close()` (so no keep-alive socket outlives the connection)
   */
  readonly fetch?: typeof fetch;
  /**
   * Authorizes every POST: its `wrap` is applied over the fetch (the pooled dispatcher still
   * passes through `init`). A refusal it throws (`AUTH_REQUIRED`, `AUTH_FAILED`) fails `send`
   * with that error: the request was not processed. @default none
   */
  readonly authorizer?: Pick<ServerAuthorizer, 'wrap'>;
}

/** JSON-RPC code of the error answer this transport gives for an HTTP failure without one. */
const HTTP_FAILURE_RPC_CODE = -32000;

/** The request field `Mcp-Name` mirrors, by method. */
const NAME_FIELD: Readonly<Record<string, 'name' | 'uri'>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
};

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The headers of one modern-era POST: the configured ones, then the era's (which win). A value that
 * is not a plain visible-ASCII header value is sent Base64-encoded as `=?base64?…?=`.
 */
export function modernHeaders(
  configured: Readonly<Record<string, string>>,
  message: Readonly<Record<string, unknown>>,
): Record<string, string> {
  const headers: Record<string, string> = {
    ...configured,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
  };
  const method = message['method'];
  if (typeof method === 'string') {
    headers['mcp-method'] = method;
    const field = NAME_FIELD[method];
    const params = isRecord(message['params']) ? message['params'] : {};
    const value = field === undefined ? undefined : params[field];
    if (typeof value === 'string') headers['mcp-name'] = headerValue(value);
  }
  return headers;
}

/**
 * A stateless HTTP `Transport` for {@link ModernConnection} (and the `server/discover` probe): see
 * the module comment. `send` resolves once the server has answered the POST's headers; the body is
 * read on its own. `close()` aborts every POST in flight.
 */
export class ModernHttpTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  /**
   * Fails one request with a typed error (an oversized or malformed answer, an HTTP failure); when
   * unset, the request gets a JSON-RPC error answer with the same message.
   */
  onrequestfault?: (id: string | number, error: StepbindError) => void;

  readonly #options: ModernHttpOptions;
  readonly #inFlight = new Map<string | number, AbortController>();
  readonly #all = new Set<AbortController>();
  /** The `x-mcp-header` annotations of each listed tool (SEP-2243), by tool name. */
  readonly #paramHeaders = new Map<string, ReadonlyMap<string, string>>();
  /** The connection pool of this transport (none with a caller's `fetch`). */
  readonly #pool: ConnectionPool | undefined;
  /** The fetch every POST goes through: the caller's or the global one, authorized. */
  readonly #fetch: typeof fetch;
  #closed = false;
  #lastHttpFailure: number | undefined;

  constructor(options: ModernHttpOptions) {
    this.#options = options;
    this.#pool = options.fetch === undefined ? new ConnectionPool() : undefined;
    const base = options.fetch ?? ((input, init) => fetch(input, init));
    this.#fetch = options.authorizer?.wrap(base) ?? base;
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * The HTTP status of the latest POST the server refused without a JSON-RPC answer (`undefined`
   * while there is none): after a `server/discover` probe, a 404 or 405 says the URL is no
   * Streamable HTTP endpoint at all (the cue to try the legacy HTTP+SSE transport).
   */
  get lastHttpFailure(): number | undefined {
    return this.#lastHttpFailure;
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) throw new Error('the HTTP connection is closed');
    const m = message as Record<string, unknown>;
    const method = typeof m['method'] === 'string' ? m['method'] : undefined;
    const id = typeof m['id'] === 'string' || typeof m['id'] === 'number' ? m['id'] : undefined;
    const request: LiveRequest | undefined =
      method !== undefined && id !== undefined
        ? { id, method, ...toolOf(method, m['params']) }
        : undefined;
    if (method === 'notifications/cancelled' && isRecord(m['params'])) {
      // Over HTTP a cancellation also ends the POST that carries the request (its SSE stream).
      const target = m['params']['requestId'];
      if (typeof target === 'string' || typeof target === 'number') {
        this.#inFlight.get(target)?.abort();
      }
    }
    const controller = new AbortController();
    this.#all.add(controller);
    if (request !== undefined) this.#inFlight.set(request.id, controller);
    const done = (): void => {
      this.#all.delete(controller);
      if (request !== undefined && this.#inFlight.get(request.id) === controller) {
        this.#inFlight.delete(request.id);
      }
    };
    let response: Response;
    try {
      response = await this.#fetch(this.#options.url, {
        method: 'POST',
        headers: { ...modernHeaders(this.#options.headers, m), ...this.#paramHeadersFor(m) },
        body: JSON.stringify(message),
        signal: controller.signal,
        // Node's fetch takes an undici dispatcher (not in the DOM RequestInit type).
        ...((this.#pool === undefined ? {} : await this.#pool.dispatcher()) as object),
      });
    } catch (error) {
      done();
      throw this.#options.redactor.error(error instanceof Error ? error : new Error(String(error)));
    }
    void this.#read(response, request, controller.signal)
      .catch((error: unknown) => {
        if (controller.signal.aborted) return;
        const text = error instanceof Error ? error.message : String(error);
        if (request !== undefined) {
          this.#fault(
            request,
            malformedMessageError(this.#options.server, request, `broke off: ${text}`, error),
          );
        } else {
          this.onerror?.(this.#options.redactor.error(new Error(text)));
        }
      })
      .finally(done);
  }

  async #read(
    response: Response,
    request: LiveRequest | undefined,
    signal: AbortSignal,
  ): Promise<void> {
    const max = this.#options.maxMessageBytes;
    const type = (response.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
    if (response.body === null || response.status === 202 || response.status === 204) {
      if (request !== undefined && !response.ok) this.#httpFailure(request, response.status, '');
      return;
    }
    if (type === 'text/event-stream' && response.ok) {
      await this.#readSse(response.body, request, signal);
      return;
    }
    const text = await readBounded(response.body, max);
    if (request === undefined) {
      if (!response.ok) {
        this.onerror?.(
          new Error(this.#options.redactor.text(`HTTP ${response.status}: ${preview(text ?? '')}`)),
        );
      }
      return;
    }
    if (text === undefined) {
      this.#fault(request, this.#tooLarge(request));
      return;
    }
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      if (!response.ok) this.#httpFailure(request, response.status, text);
      else
        this.#fault(
          request,
          malformedMessageError(
            this.#options.server,
            request,
            this.#options.redactor.text(`is not JSON: ${preview(text)}`),
            error,
          ),
        );
      return;
    }
    // An HTTP error answered with a JSON-RPC error (its id may be null) is that request's error.
    if (!response.ok && isRecord(data) && isRecord(data['error']) && !('result' in data)) {
      data = { ...data, id: request.id };
    } else if (!response.ok) {
      this.#httpFailure(request, response.status, text);
      return;
    }
    for (const raw of Array.isArray(data) ? data : [data]) this.#deliver(raw, request);
  }

  async #readSse(
    body: ReadableStream<Uint8Array>,
    request: LiveRequest | undefined,
    signal: AbortSignal,
  ): Promise<void> {
    const max = this.#options.maxMessageBytes;
    const decoder = new TextDecoder();
    const reader = body.getReader();
    let buffer = '';
    let answered = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || signal.aborted) break;
        buffer += decoder.decode(value, { stream: true });
        for (;;) {
          const end = /\r?\n\r?\n/.exec(buffer);
          if (end === null) break;
          const event = buffer.slice(0, end.index);
          buffer = buffer.slice(end.index + end[0].length);
          const data = event
            .split(/\r?\n/)
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
            .join('\n');
          if (data !== '' && this.#deliverText(data, request)) answered = true;
        }
        if (Buffer.byteLength(buffer, 'utf8') > max) {
          if (request !== undefined) this.#fault(request, this.#tooLarge(request));
          else this.onerror?.(this.#tooLarge(undefined));
          return;
        }
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
    // A stream that ends without answering its request (the server went away, or dropped it) fails
    // that request now rather than at its timeout; a listen stream is then opened again.
    if (request !== undefined && !answered && !signal.aborted) {
      this.#fault(
        request,
        malformedMessageError(this.#options.server, request, 'ended its stream without an answer'),
      );
    }
  }

  /** @returns whether `text` was the answer to `request` (or failed it). */
  #deliverText(text: string, request: LiveRequest | undefined): boolean {
    if (Buffer.byteLength(text, 'utf8') > this.#options.maxMessageBytes) {
      if (request !== undefined) this.#fault(request, this.#tooLarge(request));
      return true;
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (error) {
      const failure = malformedMessageError(
        this.#options.server,
        request,
        this.#options.redactor.text(`is not JSON: ${preview(text)}`),
        error,
      );
      if (request !== undefined) this.#fault(request, failure);
      else this.onerror?.(failure);
      return true;
    }
    return this.#deliver(raw, request);
  }

  /** @returns whether `raw` was the answer to `request` (or failed one). */
  #deliver(raw: unknown, request: LiveRequest | undefined): boolean {
    const verdict = checkMessage(raw);
    if (verdict.ok) {
      this.onmessage?.(
        request?.method === 'tools/list' ? this.#screenTools(verdict.message) : verdict.message,
      );
      const m = verdict.message as Record<string, unknown>;
      return request !== undefined && m['id'] === request.id && !('method' in m);
    }
    const target =
      verdict.id !== undefined
        ? { ...(request ?? { method: 'unknown' }), id: verdict.id }
        : request;
    const failure = malformedMessageError(
      this.#options.server,
      target,
      this.#options.redactor.text(verdict.reason),
    );
    if (target !== undefined) this.#fault(target, failure);
    else this.onerror?.(failure);
    return true;
  }

  /** `Mcp-Param-*` headers of a `tools/call` for a tool whose listing annotated its parameters. */
  #paramHeadersFor(m: Readonly<Record<string, unknown>>): Record<string, string> {
    if (m['method'] !== 'tools/call' || !isRecord(m['params'])) return {};
    const name = m['params']['name'];
    const annotated = typeof name === 'string' ? this.#paramHeaders.get(name) : undefined;
    return annotated === undefined ? {} : paramHeaderValues(annotated, m['params']['arguments']);
  }

  /**
   * A `tools/list` page without the tools whose `x-mcp-header` annotations are invalid (each one
   * reported, never called); the annotations of the others are kept for their calls.
   */
  #screenTools(message: JSONRPCMessage): JSONRPCMessage {
    const result = (message as { result?: unknown }).result;
    if (!isRecord(result) || !Array.isArray(result['tools'])) return message;
    const kept = result['tools'].filter((tool: unknown) => {
      if (!isRecord(tool) || typeof tool['name'] !== 'string') return true;
      const verdict = paramHeadersOf(tool['inputSchema']);
      if (verdict.ok) {
        if (verdict.headers.size > 0) this.#paramHeaders.set(tool['name'], verdict.headers);
        else this.#paramHeaders.delete(tool['name']);
        return true;
      }
      this.#paramHeaders.delete(tool['name']);
      const tool_ = tool['name'].slice(0, 128);
      this.onerror?.(
        new RuntimeError(
          ErrorCode.SERVER_ERROR,
          `Server "${this.#options.server}" lists tool "${tool_}" with an invalid x-mcp-header (${verdict.reason}); stepbind leaves the tool out. Report it to the server's maintainers.`,
          { detail: { server: this.#options.server, tool: tool_, reason: verdict.reason } },
        ),
      );
      return false;
    });
    if (kept.length === result['tools'].length) return message;
    return { ...message, result: { ...result, tools: kept } };
  }

  #httpFailure(request: LiveRequest, status: number, text: string): void {
    this.#lastHttpFailure = status;
    const message = this.#options.redactor.text(
      `HTTP ${status}${text === '' ? '' : `: ${preview(text)}`}`,
    );
    // A JSON-RPC error answer: the probe reads it as "not modern", a connection as SERVER_ERROR.
    this.onmessage?.({
      jsonrpc: '2.0',
      id: request.id,
      error: { code: HTTP_FAILURE_RPC_CODE, message, data: { httpStatus: status } },
    });
  }

  #fault(request: LiveRequest, error: StepbindError): void {
    const safe = this.#options.redactor.error(error);
    if (this.onrequestfault !== undefined) {
      this.onrequestfault(request.id, safe);
      return;
    }
    this.onmessage?.({
      jsonrpc: '2.0',
      id: request.id,
      error: { code: HTTP_FAILURE_RPC_CODE, message: safe.message },
    });
  }

  #tooLarge(request: LiveRequest | undefined): StepbindError {
    return messageTooLargeError(
      {
        server: this.#options.server,
        limit: this.#options.maxMessageBytes,
        configKey: serverConfigPath(this.#options.server, 'maxMessageBytes'),
        closed: false,
      },
      request,
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const controller of this.#all) controller.abort();
    this.#all.clear();
    this.#inFlight.clear();
    this.onclose?.();
    // Every socket of the pool closes now, idle keep-alive ones included.
    await this.#pool?.destroy();
  }
}

function toolOf(method: string, params: unknown): { tool?: string } {
  if (method !== 'tools/call' || !isRecord(params)) return {};
  return typeof params['name'] === 'string' ? { tool: params['name'] } : {};
}
