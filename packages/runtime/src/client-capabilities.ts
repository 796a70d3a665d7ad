/**
 * What stepbind's client declares in `initialize` and the handlers that answer the requests a server
 * may send back (installed on the SDK client by `sdk/client-handlers.ts`, asked by MRTR rounds in
 * `era/mrtr.ts`): `roots/list` from the configuration, `sampling/createMessage` and `elicitation/create` through
 * handlers the application supplies. Without a handler, sampling is refused with a JSON-RPC error
 * that says why, and elicitation is declined (`action: "decline"`), so a server's tool gets a clear
 * answer instead of hanging.
 */
import { pathToFileURL } from 'node:url';

/** The name and version stepbind announces in `initialize` and `server/discover`. */
export const CLIENT_INFO = Object.freeze({ name: 'stepbind', version: '0.1.0' });

/** One root the client exposes to a server (`roots/list`). */
export interface ClientRoot {
  /** A `file://` URI. */
  readonly uri: string;
  readonly name?: string;
}

/** Context given to a sampling or elicitation handler. */
export interface ServerRequestContext {
  /** The configured name of the server that asked. */
  readonly server: string;
  /** Aborted when the server cancels the request or the connection closes. */
  readonly signal: AbortSignal;
}

/**
 * A `sampling/createMessage` request as the server sent it (MCP `CreateMessageRequest.params`):
 * `messages`, `maxTokens`, optional `systemPrompt`, `modelPreferences`, `temperature`, ...
 */
export interface SamplingRequest {
  readonly messages: readonly unknown[];
  readonly maxTokens: number;
  readonly systemPrompt?: string;
  readonly [key: string]: unknown;
}

/** The answer to a sampling request (MCP `CreateMessageResult`). */
export interface SamplingResult {
  readonly role: 'assistant' | 'user';
  readonly content: unknown;
  readonly model: string;
  readonly stopReason?: string;
  readonly [key: string]: unknown;
}

/**
 * An `elicitation/create` request (MCP `ElicitRequest.params`): a `message` and either a
 * `requestedSchema` (form mode) or a `url` (URL mode, `mode: "url"`).
 */
export interface ElicitationRequest {
  readonly message: string;
  readonly mode?: 'form' | 'url';
  readonly requestedSchema?: unknown;
  readonly url?: string;
  readonly [key: string]: unknown;
}

/** The answer to an elicitation request (MCP `ElicitResult`). */
export interface ElicitationResult {
  readonly action: 'accept' | 'decline' | 'cancel';
  readonly content?: Readonly<Record<string, unknown>>;
  readonly [key: string]: unknown;
}

/** How the client answers server-to-client requests. */
export interface ClientHandlers {
  /** Roots for `roots/list`. @default none (an empty list) */
  readonly roots?: readonly ClientRoot[];
  /** Answers `sampling/createMessage`. @default refuse with a JSON-RPC error naming the reason */
  readonly onSampling?: (
    request: SamplingRequest,
    context: ServerRequestContext,
  ) => Promise<SamplingResult>;
  /** Answers `elicitation/create`. @default `{ action: "decline" }` */
  readonly onElicitation?: (
    request: ElicitationRequest,
    context: ServerRequestContext,
  ) => Promise<ElicitationResult>;
}

/**
 * The capabilities stepbind declares: roots, sampling and elicitation (form and URL modes). Form
 * mode declares `applyDefaults` (SEP-1034): when the handler accepts a form and leaves fields out,
 * the SDK fills them from the requested schema's `default`s before the answer is sent.
 */
export const CLIENT_CAPABILITIES = Object.freeze({
  roots: Object.freeze({ listChanged: false }),
  sampling: Object.freeze({}),
  elicitation: Object.freeze({
    form: Object.freeze({ applyDefaults: true }),
    url: Object.freeze({}),
  }),
});

/** Turns configured roots (absolute paths or `file://` URIs) into {@link ClientRoot}s. */
export function rootsOf(entries: readonly string[]): readonly ClientRoot[] {
  return Object.freeze(
    entries.map((entry) =>
      Object.freeze(
        entry.startsWith('file://') ? { uri: entry } : { uri: pathToFileURL(entry).href },
      ),
    ),
  );
}
