/**
 * Message-level safety shared by every transport: which requests are in flight, what a well-formed
 * incoming message looks like, and how a malformed or oversized response fails its request at once
 * instead of being dropped (the SDK drops a message its schema refuses, so the request would wait for
 * its whole timeout and the cause would be lost).
 *
 * A request is failed by delivering, in place of the bad message, a JSON-RPC error response for its
 * id whose `data` is the typed stepbind error; the SDK rejects the request with it and
 * {@link guardErrorOf} recovers the stepbind error at the boundary. Such responses never reach the
 * wire, and a server cannot forge one (it can only send JSON, never this error object).
 */
import {
  JSONRPCMessageSchema,
  McpError,
  type JSONRPCMessage,
  type MessageExtraInfo,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode, RuntimeError, type StepbindError } from '@stepbind/binding/internal';

/** A request this client sent that has not been answered or cancelled yet. */
export interface LiveRequest {
  readonly id: RequestId;
  readonly method: string;
  /** For `tools/call`: the tool's name. */
  readonly tool?: string;
}

/** Builds the error every request affected by a transport fault fails with. */
export type FaultError = (request: LiveRequest | undefined) => StepbindError;

/**
 * Where a connection of either era reads its transport's fault: the {@link FaultError} of the fault
 * that closed the transport, `undefined` while there is none (the one shape both adapters take).
 */
export type FaultSource = () => FaultError | undefined;

/** The result of checking one incoming JSON value. */
export type MessageVerdict =
  | { readonly ok: true; readonly message: JSONRPCMessage }
  | {
      readonly ok: false;
      /** The response's id when it is a valid JSON-RPC id; `undefined` when there is none. */
      readonly id: RequestId | undefined;
      /** True when the message is a response whose id is missing or not a string/integer. */
      readonly badId: boolean;
      /** What is wrong, as the end of "the server sent a message that …". */
      readonly reason: string;
    };

/** JSON-RPC code of the error responses a guard delivers in place of a bad message. */
const GUARD_RPC_CODE = -32099;
const RESPONSE_KEYS = new Set(['jsonrpc', 'id', 'result', 'error']);
const guardErrors = new WeakSet<StepbindError>();

/**
 * The stepbind error a guard delivered in place of a bad response, when `error` is the SDK's
 * rejection of the request it failed; `undefined` for any other error.
 */
export function guardErrorOf(error: unknown): StepbindError | undefined {
  if (!(error instanceof McpError) || typeof error.data !== 'object' || error.data === null) {
    return undefined;
  }
  const data = error.data as StepbindError;
  return guardErrors.has(data) ? data : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isRequestId(value: unknown): value is RequestId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value));
}

const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/**
 * Whether a result's `_meta` is one the SDK's result schema accepts as it is: absent, or an object
 * whose `progressToken` is absent, a string or a safe integer and that has no related-task member.
 */
function plainMeta(meta: unknown): boolean {
  if (meta === undefined) return true;
  if (!isRecord(meta) || meta[RELATED_TASK] !== undefined) return false;
  const token = meta['progressToken'];
  return token === undefined || isRequestId(token);
}

/** A short, single-line rendering of a value the server sent, for messages. */
export function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * Checks one incoming JSON value. A response must be exactly `{jsonrpc: "2.0", id, result}` with an
 * object result or `{jsonrpc: "2.0", id, error: {code, message, data?}}` with a string or integer id;
 * requests and notifications must match the SDK's JSON-RPC schema. Returns the message when it is
 * well formed: a result response with a plain `_meta` (or none) as it came (these checks prove everything the
 * SDK's schema would), anything else as the SDK's schema parsed it.
 */
export function checkMessage(raw: unknown): MessageVerdict {
  if (!isRecord(raw)) {
    return { ok: false, id: undefined, badId: false, reason: 'is not a JSON object' };
  }
  const isResponse = !('method' in raw) && ('result' in raw || 'error' in raw || 'id' in raw);
  let id: RequestId | undefined;
  if (isResponse) {
    const bad = (reason: string, badId = false): MessageVerdict => ({
      ok: false,
      id,
      badId,
      reason,
    });
    if (!isRequestId(raw['id'])) {
      return bad(
        raw['id'] === undefined
          ? 'is a response without an id'
          : `is a response with the invalid id ${preview(raw['id'])}`,
        true,
      );
    }
    id = raw['id'];
    if (raw['jsonrpc'] !== '2.0') return bad('does not carry "jsonrpc": "2.0"');
    const hasResult = 'result' in raw;
    const hasError = 'error' in raw;
    if (hasResult && hasError) return bad('carries both "result" and "error"');
    if (!hasResult && !hasError) return bad('carries neither "result" nor "error"');
    for (const key of Object.keys(raw)) {
      if (!RESPONSE_KEYS.has(key)) return bad(`carries the unexpected member "${key}"`);
    }
    if (hasError) {
      const error = raw['error'];
      if (
        !isRecord(error) ||
        !Number.isInteger(error['code']) ||
        typeof error['message'] !== 'string'
      ) {
        return bad('carries an "error" that is not {code: integer, message: string}');
      }
    } else {
      const result = raw['result'];
      if (!isRecord(result)) return bad('carries a "result" that is not an object');
      // The checks above prove what the SDK's schema would: exactly {jsonrpc: "2.0", id, result}
      // with a string or safe-integer id and an object result, and `plainMeta` its `_meta`; the
      // schema's parse would merely copy the message (the SDK parses the result again with the
      // request's own result schema). A related-task member still goes through the schema (it
      // strips that object's unknown members).
      if (plainMeta(result['_meta'])) return { ok: true, message: raw as JSONRPCMessage };
    }
  }
  const parsed = JSONRPCMessageSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const at = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.join('.')}`;
    return {
      ok: false,
      id,
      badId: false,
      reason: `does not match the JSON-RPC message schema${at}${issue === undefined ? '' : ` (${issue.message})`}`,
    };
  }
  return { ok: true, message: parsed.data };
}

function where(server: string, request: LiveRequest | undefined): string {
  if (request === undefined) return `A message from server "${server}"`;
  return `${request.method} on server "${server}"${request.tool === undefined ? '' : ` (tool "${request.tool}")`}`;
}

function requestDetail(server: string, request: LiveRequest | undefined): Record<string, unknown> {
  return {
    server,
    ...(request === undefined ? {} : { method: request.method }),
    ...(request?.tool === undefined ? {} : { tool: request.tool }),
  };
}

/** `MALFORMED_MESSAGE` for `request` (or for the connection when `undefined`). */
export function malformedMessageError(
  server: string,
  request: LiveRequest | undefined,
  reason: string,
  cause?: unknown,
): StepbindError {
  const subject =
    request === undefined
      ? `${where(server, request)} was dropped: it ${reason}.`
      : `${where(server, request)} failed at once: the server sent a response that ${reason}.`;
  return new RuntimeError(
    ErrorCode.MALFORMED_MESSAGE,
    `${subject} The server does not follow JSON-RPC 2.0; report it to its maintainers.`,
    { detail: { ...requestDetail(server, request), reason }, cause },
  );
}

/** Options of {@link messageTooLargeError}. */
export interface TooLargeContext {
  readonly server: string;
  readonly limit: number;
  /** The JSON path of the setting, e.g. `$.mcpServers.files.maxMessageBytes`. */
  readonly configKey: string;
  /** Whether the connection was closed because of it (stdio: framing is lost). */
  readonly closed: boolean;
}

/** `MESSAGE_TOO_LARGE` for `request` (or for the connection when `undefined`). */
export function messageTooLargeError(
  context: TooLargeContext,
  request: LiveRequest | undefined,
): StepbindError {
  const { server, limit, configKey, closed } = context;
  const subject =
    request === undefined
      ? `Server "${server}" sent a message over the ${limit}-byte limit (maxMessageBytes)`
      : `${where(server, request)} failed: the server sent a message over the ${limit}-byte limit (maxMessageBytes)`;
  return new RuntimeError(
    ErrorCode.MESSAGE_TOO_LARGE,
    `${subject}${closed ? '; the connection was closed, because the rest of its stream cannot be trusted' : ''}. Raise ${configKey} in the configuration if such messages are expected, or ask the server for less (smaller pages or results).`,
    { detail: { ...requestDetail(server, request), limit, configKey } },
  );
}

/**
 * Tracks the requests in flight on one connection and turns every incoming JSON value into what the
 * SDK may see: a well-formed message, or an immediate typed failure of the request it answers.
 */
export class MessageGuard {
  readonly #server: string;
  readonly #deliver: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  readonly #report: (error: Error) => void;
  // Keyed like the SDK matches responses: by Number(id).
  readonly #live = new Map<number, LiveRequest>();

  /**
   * @param deliver hands a message to the SDK (the transport's `onmessage`).
   * @param report reports a problem no request can carry (the transport's `onerror`).
   */
  constructor(
    server: string,
    deliver: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void,
    report: (error: Error) => void,
  ) {
    this.#server = server;
    this.#deliver = deliver;
    this.#report = report;
  }

  /** The requests in flight, oldest first. */
  get live(): readonly LiveRequest[] {
    return [...this.#live.values()];
  }

  /** How many requests are in flight. */
  get liveCount(): number {
    return this.#live.size;
  }

  /** Records an outgoing message: a request becomes live, a cancellation ends one. */
  sent(message: JSONRPCMessage): void {
    if (!('method' in message)) return;
    if ('id' in message) {
      const params = message.params;
      const tool =
        message.method === 'tools/call' && typeof params?.['name'] === 'string'
          ? params['name']
          : undefined;
      this.#live.set(Number(message.id), {
        id: message.id,
        method: message.method,
        ...(tool === undefined ? {} : { tool }),
      });
    } else if (message.method === 'notifications/cancelled') {
      const requestId = message.params?.['requestId'];
      if (isRequestId(requestId)) this.#live.delete(Number(requestId));
    }
  }

  /** Forgets an outgoing request that could not be sent (the SDK rejects it itself). */
  unsent(message: JSONRPCMessage): void {
    if ('method' in message && 'id' in message) this.#live.delete(Number(message.id));
  }

  /** Checks one incoming JSON value and delivers it, or fails the request it answers. */
  receive(raw: unknown): void {
    const verdict = checkMessage(raw);
    if (verdict.ok) this.accept(verdict.message);
    else this.reject(verdict);
  }

  /** Delivers a message that is already known to be well formed (bookkeeping only). */
  accept(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    if (!('method' in message) && 'id' in message && message.id !== undefined) {
      this.#live.delete(Number(message.id));
    }
    this.#deliver(message, extra);
  }

  /**
   * Handles a malformed message: the live request it answers fails at once with
   * `MALFORMED_MESSAGE`. A response whose id is missing or invalid cannot be matched to its
   * request; as the server is mangling ids, every request in flight fails with it. Anything else
   * is reported and dropped.
   */
  reject(verdict: Extract<MessageVerdict, { ok: false }>, cause?: unknown): void {
    const request = verdict.id === undefined ? undefined : this.#live.get(Number(verdict.id));
    if (request !== undefined) {
      this.#fail(request, malformedMessageError(this.#server, request, verdict.reason, cause));
    } else if (verdict.badId && this.#live.size > 0) {
      const reason = `${verdict.reason}, so it cannot be matched to its request; every request in flight was failed`;
      this.failAll((r) => malformedMessageError(this.#server, r, reason, cause));
    } else {
      this.#report(malformedMessageError(this.#server, undefined, verdict.reason, cause));
    }
  }

  /** Reports a line or body that is not JSON at all (it cannot be matched to a request). */
  unparsable(text: string, cause: unknown): void {
    this.#report(
      malformedMessageError(this.#server, undefined, `is not JSON: ${preview(text)}`, cause),
    );
  }

  /** Fails the live requests among `ids` (all of them when `ids` is omitted) with `make`. */
  failAll(make: FaultError, ids?: Iterable<RequestId>): void {
    const targets =
      ids === undefined
        ? [...this.#live.values()]
        : [...ids].flatMap((id) => {
            const request = this.#live.get(Number(id));
            return request === undefined ? [] : [request];
          });
    for (const request of targets) this.#fail(request, make(request));
  }

  /** Forgets every live request (the connection is gone; the SDK fails them itself). */
  clear(): void {
    this.#live.clear();
  }

  #fail(request: LiveRequest, error: StepbindError): void {
    this.#live.delete(Number(request.id));
    guardErrors.add(error);
    this.#deliver({
      jsonrpc: '2.0',
      id: request.id,
      error: { code: GUARD_RPC_CODE, message: error.message, data: error },
    });
  }
}
