/**
 * Watches one Streamable HTTP session from below the SDK transport (its `fetch`), because the SDK
 * reports a session the server forgot (HTTP 404, or the 400 "No valid session ID provided" several
 * real servers send) only as a failed request and keeps the transport "connected" for ever.
 *
 * The watch decides, for every request this connection sent, how far it got: refused by the
 * server or never delivered (nothing ran), or delivered with its answer lost (the outcome is
 * unknown). It declares the session lost on a session answer or on a network failure of an
 * established session, and asks for a probe when a response stream breaks.
 */
import type { Delivery } from '@stepbind/binding/internal';
import type { Redactor } from '../redact.js';
import { isAuthRefusal } from './http-auth.js';

/** Why an HTTP session ended, as the watch saw it. Messages are redacted. */
export interface SessionLoss {
  /**
   * `session-ended`: the server answered 404 (or 400 "no valid session") to a request naming the
   * session; `unreachable`: a request of the established session failed at the network level.
   */
  readonly reason: 'session-ended' | 'unreachable';
  /** The HTTP status of a `session-ended` answer. */
  readonly httpStatus?: number;
  /** What happened, for people (no URL query values, no header values). */
  readonly message: string;
}

/**
 * How a tracked request ended, as the watch saw it: `refused` (the server answered it with a
 * session error, or the connection was refused before it left: it did not run) or `broken` (sent,
 * then the response was lost).
 */
export type TrackedEnd = 'refused' | 'broken';

/** One request a caller asked the watch to follow (see {@link HttpSessionWatch.track}). */
export interface TrackedRequest {
  /**
   * The binding's {@link Delivery}, decided here where the bytes are handed to `fetch`: `sent` from
   * then on, `not-sent` again when it was refused; `undefined` until the POST that carries it.
   */
  delivery: Delivery | undefined;
  /** How it ended, when the watch saw it end. */
  end: TrackedEnd | undefined;
  /** The JSON-RPC id, once the SDK handed the request over. */
  id?: string | number;
  /** Aborts the request in the SDK when its response is lost, so the caller learns at once. */
  readonly abort: () => void;
}

type RequestId = string | number;
type Fetch = typeof fetch;

/** Errors a connection attempt raises before a request leaves this machine. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** A 400 answer about the session (server-everything: "Bad Request: No valid session ID provided"). */
const SESSION_BODY = /session/i;
/** Bytes of a 400 body read to recognise a session answer. */
const MAX_BODY_PEEK = 4096;

/** See the module comment. One per HTTP connection; not reusable after the session is lost. */
export class HttpSessionWatch {
  readonly #base: Fetch;
  readonly #redactor: Redactor;
  readonly #tracked = new Map<RequestId, TrackedRequest>();
  #expecting: TrackedRequest | undefined;
  #established = false;
  #closing = false;
  #lost: SessionLoss | undefined;
  #onLost: ((loss: SessionLoss) => void) | undefined;
  #onBreak: (() => void) | undefined;
  /** Legacy HTTP+SSE: the session is the one GET stream (see the constructor). */
  readonly #streamBound: boolean;
  /** GET streams opened so far (stream-bound only). */
  #streams = 0;
  /** The HTTP status of the first POST's answer when it was refused without a JSON-RPC answer. */
  #firstPost: number | undefined;
  #posts = 0;

  /**
   * @param options.streamBound legacy HTTP+SSE (`transports/sse.ts`): the session lives as long as
   *   its GET stream, so the stream's end or break is the session's loss, a POST answered 404 is a
   *   session answer, and a second GET (the EventSource reconnecting, which would open a new,
   *   uninitialized session) is answered 204 so it stops for good. @default false
   */
  constructor(redactor: Redactor, base: Fetch = fetch, options: { streamBound?: boolean } = {}) {
    this.#base = base;
    this.#redactor = redactor;
    this.#streamBound = options.streamBound === true;
  }

  /**
   * The HTTP status of the connection's first POST when the server refused it without a JSON-RPC
   * answer (`undefined` before, when it was accepted, or when the refusal's body is a JSON-RPC
   * error: a server that answers JSON-RPC on POST speaks Streamable HTTP). A refused `initialize`
   * (400, 404, 405) is the specification's cue to try the legacy HTTP+SSE transport.
   */
  get firstPostRefusal(): number | undefined {
    return this.#firstPost;
  }

  /** The `fetch` to give `StreamableHTTPClientTransport`. */
  readonly fetch: Fetch = (input, init) => this.#fetch(input, init);

  /** Why the session was lost, once it was. */
  get lost(): SessionLoss | undefined {
    return this.#lost;
  }

  /**
   * Wraps `transport.send` so the JSON-RPC id of each request is noted as the SDK hands it over
   * (synchronously inside `Client.request`), which is how {@link track} learns it.
   */
  attach(transport: { send: (message: never, options?: never) => Promise<void> }): void {
    const send = transport.send.bind(transport) as (m: unknown, o?: unknown) => Promise<void>;
    (transport as { send: (m: unknown, o?: unknown) => Promise<void> }).send = (message, opts) => {
      const expecting = this.#expecting;
      if (expecting !== undefined && isRequest(message)) {
        this.#expecting = undefined;
        expecting.id = message.id;
        this.#tracked.set(message.id, expecting);
      }
      return send(message, opts);
    };
  }

  /**
   * Runs `start`, which must hand one request to the transport synchronously (as `Client.request`
   * does), and follows that request until {@link untrack}. `abort` is called when its response is
   * lost on the way.
   */
  track<T>(
    abort: () => void,
    start: () => T,
  ): { readonly tracked: TrackedRequest; readonly result: T } {
    const tracked: TrackedRequest = { delivery: undefined, end: undefined, abort };
    this.#expecting = tracked;
    try {
      return { tracked, result: start() };
    } finally {
      if (this.#expecting === tracked) this.#expecting = undefined;
    }
  }

  /** Stops following `tracked`. */
  untrack(tracked: TrackedRequest): void {
    if (tracked.id !== undefined) this.#tracked.delete(tracked.id);
  }

  /** `initialize` completed: failures from now on concern an established session. */
  established(onLost: (loss: SessionLoss) => void, onBreak: () => void): void {
    this.#established = true;
    this.#onLost = onLost;
    this.#onBreak = onBreak;
  }

  /** We are closing the transport: aborted fetches and streams are ours, not a loss. */
  closing(): void {
    this.#closing = true;
  }

  async #fetch(input: Parameters<Fetch>[0], init: Parameters<Fetch>[1]): Promise<Response> {
    const method = (init?.method ?? 'GET').toUpperCase();
    const stream = this.#streamBound && method === 'GET';
    // EventSource reconnects by itself; a 204 stops it (a new GET would be a new session).
    if (stream && this.#streams++ > 0) return new Response(null, { status: 204 });
    const hasSession = this.#streamBound
      ? method === 'POST'
      : new Headers(init?.headers).has('mcp-session-id');
    const first = method === 'POST' && this.#posts++ === 0;
    const ids = method === 'POST' && this.#tracked.size > 0 ? requestIds(init?.body) : [];
    // From here on the request may reach the server: its outcome is unknown until answered.
    this.#mark(ids, 'sent', undefined);
    let response: Response;
    try {
      response = await this.#base(input, init);
    } catch (error) {
      if (isAuthRefusal(error)) {
        // The authorizer could not authorize it, or the server refused its credentials: it did
        // not run, and the session is as it was (a login later lets the next request through).
        // Not `refused`: that reads as a session refusal; the caller maps the error itself.
        this.#mark(ids, 'not-sent', undefined);
        throw error;
      }
      if (!this.#ours(init)) {
        const notSent = NOT_SENT_CODES.has(errorCode(error));
        this.#mark(ids, notSent ? 'not-sent' : 'sent', notSent ? 'refused' : 'broken');
        if (this.#established) {
          this.#lose({
            reason: 'unreachable',
            message: `the server could not be reached (${this.#describe(error)})`,
          });
        }
      }
      throw error;
    }
    if (first && !response.ok && !(await isJsonRpcError(response))) {
      this.#firstPost = response.status;
    }
    if (hasSession && (await isSessionAnswer(response))) {
      // Some servers answer a GET they do not support with 404 instead of 405: only a POST's
      // answer ends the session; a GET's asks the probe (a POSTed ping) to find out.
      if (method !== 'POST') {
        if (this.#established && this.#lost === undefined) this.#onBreak?.();
        return response;
      }
      this.#mark(ids, 'not-sent', 'refused');
      this.#lose({
        reason: 'session-ended',
        httpStatus: response.status,
        message: `the server no longer knows this MCP session (HTTP ${response.status})`,
      });
      return response;
    }
    if (!response.ok || response.body === null || [204, 205, 304].includes(response.status)) {
      return response;
    }
    return new Response(this.#watchBody(response.body, ids, init, stream), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  }

  /** Passes the body through, noticing when it breaks before its end. */
  #watchBody(
    body: ReadableStream<Uint8Array>,
    ids: readonly RequestId[],
    init: Parameters<Fetch>[1],
    stream: boolean,
  ): ReadableStream<Uint8Array> {
    const reader = body.getReader();
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (!this.#ours(init)) {
            this.#mark(ids, 'sent', 'broken');
            if (stream && this.#established) {
              this.#lose({
                reason: 'unreachable',
                message: `the HTTP+SSE stream that carries this session broke off (${this.#describe(error)})`,
              });
            } else if (this.#established && this.#lost === undefined) this.#onBreak?.();
          }
          controller.error(error);
          return;
        }
        if (chunk.done) {
          if (stream && this.#established && !this.#ours(init)) {
            this.#lose({
              reason: 'session-ended',
              message: 'the server ended the HTTP+SSE stream that carries this session',
            });
          }
          controller.close();
        } else controller.enqueue(chunk.value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
  }

  #ours(init: Parameters<Fetch>[1]): boolean {
    return this.#closing || init?.signal?.aborted === true;
  }

  #mark(ids: readonly RequestId[], delivery: Delivery, end: TrackedEnd | undefined): void {
    for (const id of ids) {
      const tracked = this.#tracked.get(id);
      if (tracked === undefined) continue;
      tracked.delivery = delivery;
      tracked.end = end;
      if (end === 'broken') tracked.abort();
    }
  }

  #lose(loss: SessionLoss): void {
    if (this.#lost !== undefined || this.#closing) return;
    this.#lost = Object.freeze(loss);
    this.#onLost?.(this.#lost);
  }

  #describe(error: unknown): string {
    const code = errorCode(error);
    const message = error instanceof Error ? error.message : String(error);
    return this.#redactor.text(code === '' ? message : `${message}: ${code}`);
  }
}

function isRequest(message: unknown): message is { id: RequestId; method: string } {
  if (typeof message !== 'object' || message === null) return false;
  const m = message as { id?: unknown; method?: unknown };
  return typeof m.method === 'string' && (typeof m.id === 'string' || typeof m.id === 'number');
}

/** The JSON-RPC request ids in a POST body (a message or a batch). */
function requestIds(body: unknown): RequestId[] {
  if (typeof body !== 'string') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [];
  }
  const messages = Array.isArray(parsed) ? (parsed as unknown[]) : [parsed];
  return messages.filter(isRequest).map((m) => m.id);
}

/** Whether the body of `response` (its first {@link MAX_BODY_PEEK} bytes) is a JSON-RPC error. */
async function isJsonRpcError(response: Response): Promise<boolean> {
  const body = response.clone().body as ReadableStream<Uint8Array> | null;
  if (body === null) return false;
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > MAX_BODY_PEEK) return false;
      chunks.push(value);
    }
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const error = (parsed as { error?: unknown } | null)?.error;
    return typeof error === 'object' && error !== null;
  } catch {
    return false;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

async function isSessionAnswer(response: Response): Promise<boolean> {
  if (response.status === 404) return true;
  if (response.status !== 400) return false;
  try {
    const text = await response.clone().text();
    return SESSION_BODY.test(text.slice(0, MAX_BODY_PEEK));
  } catch {
    return false;
  }
}

/** The system or undici error code of a fetch failure (`fetch failed` keeps it in `cause`). */
function errorCode(error: unknown): string {
  let e: unknown = error;
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 4; depth++) {
    const { code, cause } = e as { code?: unknown; cause?: unknown };
    if (typeof code === 'string') return code;
    e = cause;
  }
  return '';
}

/**
 * What an HTTP transport failure says about itself: the HTTP status of an SDK
 * `StreamableHTTPError` (its numeric `code`), or the system code of a network failure.
 */
export function httpFailure(error: unknown): { httpStatus?: number; code?: string } {
  const status = (error as { code?: unknown } | null)?.code;
  if (typeof status === 'number' && status >= 100 && status <= 599) return { httpStatus: status };
  const code = errorCode(error);
  return code === '' ? {} : { code };
}
