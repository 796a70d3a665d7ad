/**
 * Resources, prompts and completions of a 2026-07-28 connection (DESIGN §20.3): what
 * `server/discover` declared, and the requests, sent through the connection's own request path
 * (with the envelope). `resources/subscribe` and `resources/unsubscribe` are `FEATURE_UNSUPPORTED`
 * in this era: its updates come through `subscriptions/listen`, which stepbind opens for tools
 * only, so no resources/prompts notification is ever delivered either (lists refresh with the
 * connection).
 */
import {
  ErrorCode,
  RuntimeError,
  type FeatureMethod,
  type FeatureRequestOptions,
} from '@stepbind/binding/internal';
import {
  FeatureListeners,
  serverFeaturesOf,
  type ServerFeatures,
} from '../resources/notifications.js';
import { MODERN_PROTOCOL_VERSION } from './envelope.js';

/** Sends one request of the connection (`ModernConnection`'s own, redactor included). */
type Send = (
  method: string,
  params: Record<string, unknown>,
  options: { readonly timeoutMs: number; readonly signal?: AbortSignal },
) => Promise<unknown>;

/** See the module comment. */
export class ModernFeatures {
  readonly support: ServerFeatures;
  /** Kept for the `Connection` interface; nothing is emitted in this era. */
  readonly listeners = new FeatureListeners();
  readonly #server: string;
  readonly #send: Send;

  constructor(server: string, capabilities: Readonly<Record<string, unknown>>, send: Send) {
    this.#server = server;
    this.#send = send;
    this.support = serverFeaturesOf(capabilities, 'modern');
  }

  /** One resources/prompts/completion request; see the module comment. */
  request(method: FeatureMethod, params: object, options: FeatureRequestOptions): Promise<unknown> {
    if (method === 'resources/subscribe' || method === 'resources/unsubscribe') {
      return Promise.reject(
        new RuntimeError(
          ErrorCode.FEATURE_UNSUPPORTED,
          `${method} on server "${this.#server}" is not supported by stepbind in the ${MODERN_PROTOCOL_VERSION} era; read the resource again instead, or pin the server to "protocol": "2025-11-25".`,
          { detail: { server: this.#server, capability: 'resources.subscribe' } },
        ),
      );
    }
    return this.#send(
      method,
      { ...params },
      {
        timeoutMs: options.timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
    );
  }
}
