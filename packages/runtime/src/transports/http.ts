/**
 * Streamable HTTP with message-level safety: the SDK's `StreamableHTTPClientTransport` speaks the
 * protocol; a `fetch` wrapper sees every response body before the SDK parses it, bounds it by
 * `maxMessageBytes` while reading (a JSON body, or one SSE event), and takes out malformed messages
 * so that the request they answer fails at once through the {@link MessageGuard} instead of waiting
 * for its timeout (the SDK drops an SSE message its schema refuses).
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ConnectionPool } from './pool.js';
import type {
  Transport,
  TransportSendOptions,
} from '@modelcontextprotocol/sdk/shared/transport.js';
import type {
  JSONRPCMessage,
  MessageExtraInfo,
  RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { computeTransportDigest } from '@stepbind/binding/internal';
import {
  assertNoUrlCredentials,
  DEFAULT_MAX_MESSAGE_BYTES,
  expectStringRecord,
  fail,
  HEADER_NAME,
  serverConfigPath,
  type CommonServerConfig,
} from '../config-values.js';
import type { ConfigText } from '../interpolate.js';
import { createRedactor, type LearningRedactor, type Redactor } from '../redact.js';
import {
  checkMessage,
  malformedMessageError,
  MessageGuard,
  messageTooLargeError,
  preview,
  type FaultError,
} from './guard.js';
import { HttpSessionWatch } from './http-session.js';
import { sseInner } from './sse.js';
import { authIdentity, authSecrets, isAuthRefusal, parseAuthConfig } from './http-auth.js';
import type { ServerAuthConfig, ServerAuthorizer } from '../auth/types.js';

/** A server reached over Streamable HTTP. */
export interface HttpServerConfig extends CommonServerConfig {
  readonly transport: 'http';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** How requests are authorized: a static bearer token or OAuth 2.1 (DESIGN §16). @default none */
  readonly auth?: ServerAuthConfig;
  /**
   * `type: "sse"` in the entry: the legacy HTTP+SSE transport (2024-11-05) only, always the 2025
   * era (`initialize`, no `server/discover` probe, no Streamable HTTP attempt; `transports/sse.ts`).
   * Without it a server is tried over Streamable HTTP first and falls back to HTTP+SSE when the
   * first POST is refused with 400, 404 or 405 (DESIGN §17.3). @default false
   */
  readonly legacySse?: boolean;
}

/** The keys of a Streamable HTTP server entry on top of the common ones. */
export const HTTP_KEYS: readonly string[] = ['url', 'headers', 'auth'];

/** Parses the HTTP keys of a server entry (`text` checks and reads a string value, `read` a string of a record, both as the file's dialect says). */
export function parseHttpConfig(
  obj: Record<string, unknown>,
  path: string,
  common: CommonServerConfig,
  text: (value: unknown, at: string) => string,
  read: ConfigText,
  legacySse = false,
): HttpServerConfig {
  const url = text(obj['url'], `${path}.url`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    fail(`${path}.url`, 'is not a valid URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    fail(`${path}.url`, 'must be an http or https URL');
  }
  assertNoUrlCredentials(parsed, `${path}.url`);
  const headers = expectStringRecord(
    obj['headers'],
    `${path}.headers`,
    HEADER_NAME,
    'an HTTP header name (RFC 9110 token)',
    read,
  );
  const auth =
    obj['auth'] === undefined ? undefined : parseAuthConfig(obj['auth'], `${path}.auth`, text);
  if (auth !== undefined && parsed.protocol === 'http:' && !LOOPBACK_HOSTS.has(parsed.hostname)) {
    fail(
      `${path}.url`,
      'must be https (or a loopback address) when auth is set: plain http would send the tokens in clear',
    );
  }
  if (legacySse && common.protocol === '2026-07-28') {
    fail(
      `${path}.protocol`,
      'cannot be "2026-07-28" with type "sse": the HTTP+SSE transport is the 2025 era only; use type "http" for a 2026-07-28 server',
    );
  }
  const authorization = Object.keys(headers).find((h) => h.toLowerCase() === 'authorization');
  if (auth !== undefined && authorization !== undefined) {
    fail(
      `${path}.headers.${authorization}`,
      'is set by the "auth" block; remove this header (or the "auth" block, to send the header as it is)',
    );
  }
  const config: HttpServerConfig = {
    ...common,
    transport: 'http',
    url,
    headers,
    ...(auth === undefined ? {} : { auth }),
    ...(legacySse ? { legacySse } : {}),
  };
  return Object.freeze(config);
}

/** The hosts an `auth` entry may reach over plain `http://` (as `auth/discovery.ts` `isLoopback`). */
const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** The identity key of an HTTP server: url, headers, auth (secrets digested), audience, roots, a non-default message limit. */
export function httpIdentityKey(config: HttpServerConfig): string {
  return computeTransportDigest({
    transport: 'http',
    url: config.url,
    headers: config.headers,
    // Secrets only as digests: a changed token or client is a new server, no key holds a secret.
    ...(config.auth === undefined ? {} : { auth: authIdentity(config.auth) }),
    audience: config.audience,
    ...(config.roots.length === 0 ? {} : { roots: config.roots }),
    // Another transport is another connection (left out for "http", so older digests stay).
    ...(config.legacySse === true ? { legacySse: true } : {}),
    // A pinned era is part of the connection (left out for "auto", so older digests stay).
    ...(config.protocol === 'auto' ? {} : { protocol: config.protocol }),
    ...(config.maxMessageBytes === DEFAULT_MAX_MESSAGE_BYTES
      ? {}
      : { maxMessageBytes: config.maxMessageBytes }),
  });
}

/** The redactor of an HTTP server entry: its URL, header values and `auth` secrets. */
export function httpRedactor(config: HttpServerConfig): LearningRedactor {
  return createRedactor(config.url, config.headers, authSecrets(config.auth));
}

/** The authorization of one HTTP connection (kept by the runtime across its reconnects). */
export interface HttpAuthOptions {
  /** Authorizes every request (its `wrap` is the session watch's base fetch). */
  readonly authorizer?: ServerAuthorizer;
  /** The server's redactor, which learns its tokens. @default {@link httpRedactor} of the entry */
  readonly redactor?: Redactor;
}

/**
 * The guarded HTTP transport of a server entry (Streamable HTTP, or the legacy HTTP+SSE one when
 * `sse` is true: `transports/sse.ts`), with the session watch under its `fetch` (and the authorizer
 * under the watch, so delivery marking sees the final answer) and the redactor of its URL, headers
 * and secrets.
 */
export function openHttpTransport(
  name: string,
  config: HttpServerConfig,
  auth: HttpAuthOptions = {},
  sse = config.legacySse === true,
): { transport: GuardedHttpTransport; watch: HttpSessionWatch; redactor: Redactor } {
  assertNoUrlCredentials(config.url, `$.mcpServers.${name}.url`);
  const redactor = auth.redactor ?? httpRedactor(config);
  const watch = new HttpSessionWatch(redactor, auth.authorizer?.wrap(fetch) ?? fetch, {
    streamBound: sse,
  });
  const transport = new GuardedHttpTransport({
    server: name,
    url: config.url,
    headers: config.headers,
    maxMessageBytes: config.maxMessageBytes,
    // The session watch sees every HTTP status below the guard, which bounds the bodies.
    fetch: watch.fetch,
    ...(sse ? { inner: sseInner, streamBound: true } : {}),
  });
  watch.attach(transport);
  return { transport, watch, redactor };
}

/** Options of {@link GuardedHttpTransport}. */
export interface HttpTransportOptions {
  /** Configured server name, for errors and config paths. */
  readonly server: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The largest JSON body or SSE event the server may send, in bytes. */
  readonly maxMessageBytes: number;
  /** The fetch to use. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
  /**
   * The SDK transport under the guard, built with the guarded fetch (`transports/sse.ts` gives the
   * legacy HTTP+SSE one). @default the SDK's `StreamableHTTPClientTransport`
   */
  readonly inner?: (url: URL, init: SdkHttpInit) => Transport;
  /**
   * Legacy HTTP+SSE: the GET stream carries every answer, so an event over `maxMessageBytes` on it
   * fails every request in flight and closes the transport (with {@link GuardedHttpTransport.fault}).
   * @default false (Streamable HTTP: only the requests of the POST whose stream it was fail)
   */
  readonly streamBound?: boolean;
}

/** What {@link HttpTransportOptions.inner} gets: the configured headers and the guarded fetch. */
export interface SdkHttpInit {
  readonly requestInit: { headers: Record<string, string> };
  readonly fetch: typeof fetch;
}

/**
 * An SDK Streamable HTTP client transport behind a {@link MessageGuard}. An oversized or unparsable
 * body fails the requests of the POST it answers (`MESSAGE_TOO_LARGE`, `MALFORMED_MESSAGE`); the
 * session stays open, as HTTP keeps each response framed on its own.
 */
export class GuardedHttpTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  readonly #options: HttpTransportOptions;
  readonly #guard: MessageGuard;
  readonly #inner: Transport;
  readonly #tooLarge: FaultError;
  readonly #tooLargeClosed: FaultError;
  /** The fault that closed a stream-bound transport (see {@link HttpTransportOptions.streamBound}). */
  #fault: FaultError | undefined;
  /** The last refusal of the authorizer: `start()` fails with it rather than the SDK's wrapper. */
  #refusal: Error | undefined;
  /** This transport's own connection pool, destroyed on close (no keep-alive socket outlives it). */
  readonly #pool = new ConnectionPool();

  constructor(options: HttpTransportOptions) {
    this.#options = options;
    this.#guard = new MessageGuard(
      options.server,
      (message, extra) => this.onmessage?.(message, extra),
      (error) => this.onerror?.(error),
    );
    const context = {
      server: options.server,
      limit: options.maxMessageBytes,
      configKey: serverConfigPath(options.server, 'maxMessageBytes'),
      closed: false,
    };
    this.#tooLarge = (request) => messageTooLargeError(context, request);
    this.#tooLargeClosed = (request) => messageTooLargeError({ ...context, closed: true }, request);
    const init: SdkHttpInit = {
      requestInit: { headers: { ...options.headers } },
      fetch: (url, requestInit) => this.#fetch(url, requestInit),
    };
    this.#inner =
      options.inner?.(new URL(options.url), init) ??
      new StreamableHTTPClientTransport(new URL(options.url), init);
    this.#inner.onmessage = (message: JSONRPCMessage, extra?: MessageExtraInfo) =>
      this.#guard.accept(message, extra);
    this.#inner.onerror = (error) => this.onerror?.(error);
    this.#inner.onclose = () => {
      this.#guard.clear();
      this.onclose?.();
    };
  }

  get sessionId(): string | undefined {
    return this.#inner.sessionId;
  }

  setProtocolVersion(version: string): void {
    this.#inner.setProtocolVersion?.(version);
  }

  /** The fault that closed this transport (an oversized event on a legacy SSE stream), if any. */
  get fault(): FaultError | undefined {
    return this.#fault;
  }

  async start(): Promise<void> {
    try {
      await this.#inner.start();
    } catch (error) {
      // The legacy SSE stream is opened here: a refused login keeps its typed error.
      throw this.#refusal ?? error;
    }
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    this.#guard.sent(message);
    try {
      await this.#inner.send(message, options);
    } catch (error) {
      this.#guard.unsent(message);
      throw error;
    }
  }

  async close(): Promise<void> {
    try {
      await this.#inner.close();
    } finally {
      await this.#pool.destroy();
    }
  }

  async #fetch(url: string | URL | Request, init?: RequestInit): Promise<Response> {
    // Node's fetch takes an undici dispatcher (not in the DOM RequestInit type).
    const pooled = { ...init, ...((await this.#pool.dispatcher()) as object) };
    let response: Response;
    try {
      response = await (this.#options.fetch ?? fetch)(url, pooled);
    } catch (error) {
      if (isAuthRefusal(error)) this.#refusal = error;
      throw error;
    }
    if (response.body === null) return response;
    // The SDK reads an error body whole into its message: keep only its first maxMessageBytes.
    if (!response.ok)
      return rebuild(response, response.body.pipeThrough(truncate(this.#options.maxMessageBytes)));
    const type = (response.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
    const ids = (): RequestId[] => requestIdsOf(init?.body);
    if (type === 'application/json') return this.#guardJson(response, ids);
    if (type === 'text/event-stream') return this.#guardSse(response, ids);
    return response;
  }

  /** Fails the live requests among `ids` with `make`, or reports the problem if none is live. */
  #failOrReport(ids: RequestId[], make: FaultError): void {
    const live = new Set(this.#guard.live.map((r) => Number(r.id)));
    if (ids.some((id) => live.has(Number(id)))) this.#guard.failAll(make, ids);
    else this.onerror?.(make(undefined));
  }

  async #guardJson(response: Response, ids: () => RequestId[]): Promise<Response> {
    const text = await readBounded(response.body!, this.#options.maxMessageBytes);
    if (text === undefined) {
      this.#failOrReport(ids(), this.#tooLarge);
      return rebuild(response, '[]');
    }
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      const reason = `is not JSON: ${preview(text)}`;
      this.#failOrReport(ids(), (r) =>
        malformedMessageError(this.#options.server, r, reason, error),
      );
      return rebuild(response, '[]');
    }
    const list: unknown[] = Array.isArray(data) ? data : [data];
    const kept = list.filter((raw) => {
      const verdict = checkMessage(raw);
      if (!verdict.ok) this.#guard.reject(verdict);
      return verdict.ok;
    });
    return rebuild(response, kept.length === list.length ? text : JSON.stringify(kept));
  }

  #guardSse(response: Response, ids: () => RequestId[]): Response {
    const guard = this.#guard;
    const stream = response.body!.pipeThrough(
      sseGuard(this.#options.maxMessageBytes, {
        event: (data) => {
          let raw: unknown;
          try {
            raw = JSON.parse(data);
          } catch (error) {
            guard.unparsable(data, error);
            return false;
          }
          const verdict = checkMessage(raw);
          if (!verdict.ok) guard.reject(verdict);
          return verdict.ok;
        },
        tooLarge: () => {
          if (this.#options.streamBound !== true || ids().length > 0) {
            this.#failOrReport(ids(), this.#tooLarge);
            return;
          }
          // The one stream of a legacy SSE session: the rest of it is lost with this event.
          this.#fault = this.#tooLargeClosed;
          this.#guard.failAll(this.#tooLargeClosed);
          void this.close().catch(() => undefined);
        },
      }),
    );
    return rebuild(response, stream);
  }
}

/** The ids of the requests in a POST body this transport sent (JSON text). */
function requestIdsOf(body: unknown): RequestId[] {
  if (typeof body !== 'string') return [];
  try {
    const parsed: unknown = JSON.parse(body);
    const list: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
    return list.flatMap((m) =>
      typeof m === 'object' && m !== null && 'method' in m && 'id' in m
        ? [(m as { id: RequestId }).id]
        : [],
    );
  } catch {
    return [];
  }
}

/** A copy of `response` with another body (the decoded one: no length or encoding headers). */
function rebuild(response: Response, body: string | ReadableStream<Uint8Array>): Response {
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  headers.delete('content-encoding');
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}

/** Reads a body as UTF-8 text, or cancels it and returns `undefined` once it passes `max` bytes. */
export async function readBounded(
  body: ReadableStream<Uint8Array>,
  max: number,
): Promise<string | undefined> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total).toString('utf8');
}

/** Passes the first `max` bytes of a stream through, then ends it (cancelling the rest). */
function truncate(max: number): TransformStream<Uint8Array, Uint8Array> {
  let left = max;
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      if (chunk.byteLength >= left) {
        controller.enqueue(chunk.subarray(0, left));
        controller.terminate();
        return;
      }
      left -= chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
}

interface SseHandlers {
  /** Called with the data of each message event; false takes the event's data out of the stream. */
  readonly event: (data: string) => boolean;
  /** Called once when an event passes the byte limit; the stream then ends. */
  readonly tooLarge: () => void;
}

/**
 * A byte stream transform over `text/event-stream` that holds at most one event (of at most `max`
 * bytes) at a time, passes events through unchanged, and drops the `data` of a message event the
 * handler refuses (keeping its `id` and `retry` fields, so resumption still works).
 */
function sseGuard(max: number, handlers: SseHandlers): TransformStream<Uint8Array, Uint8Array> {
  let partial: Buffer[] = [];
  let partialBytes = 0;
  let lines: { raw: Buffer; field: string; value: string }[] = [];
  let eventBytes = 0;
  let ended = false;
  const overLimit = (
    controller: TransformStreamDefaultController<Uint8Array>,
    more: number,
  ): boolean => {
    if (eventBytes + more <= max) return false;
    ended = true;
    partial = [];
    lines = [];
    handlers.tooLarge();
    controller.terminate();
    return true;
  };
  const dispatch = (
    blank: Buffer,
    controller: TransformStreamDefaultController<Uint8Array>,
  ): void => {
    const data = lines.filter((l) => l.field === 'data').map((l) => l.value);
    const type = lines.findLast((l) => l.field === 'event')?.value ?? '';
    const text = data.join('\n');
    // An event whose data is empty is no message: a priming event (SEP-1699: an `id` and a `retry`
    // before the server closes the stream) or a keep-alive. It passes through unchanged, as the
    // SDK needs it to resume the stream after `retry` ms with `Last-Event-ID`.
    const keep = text === '' || (type !== '' && type !== 'message') || handlers.event(text);
    for (const line of lines) if (keep || line.field !== 'data') controller.enqueue(line.raw);
    controller.enqueue(blank);
    lines = [];
    eventBytes = 0;
  };
  const onLine = (raw: Buffer, controller: TransformStreamDefaultController<Uint8Array>): void => {
    let text = raw.toString('utf8');
    text = text.endsWith('\r\n') ? text.slice(0, -2) : text.slice(0, -1);
    if (text === '') {
      dispatch(raw, controller);
      return;
    }
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    lines.push({ raw, field, value });
    eventBytes += raw.length;
  };
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      if (ended) return;
      const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      let start = 0;
      while (start < bytes.length) {
        const newline = bytes.indexOf(10, start);
        const end = newline === -1 ? bytes.length : newline + 1;
        if (overLimit(controller, partialBytes + (end - start))) return;
        if (newline === -1) {
          partial.push(Buffer.from(bytes.subarray(start)));
          partialBytes += bytes.length - start;
          return;
        }
        const piece = bytes.subarray(start, end);
        const raw = partial.length === 0 ? Buffer.from(piece) : Buffer.concat([...partial, piece]);
        partial = [];
        partialBytes = 0;
        start = end;
        onLine(raw, controller);
      }
    },
    flush(controller) {
      if (ended) return;
      // An unterminated last event is never dispatched by an SSE parser: pass it through as is.
      for (const line of lines) controller.enqueue(line.raw);
      for (const piece of partial) controller.enqueue(piece);
    },
  });
}
