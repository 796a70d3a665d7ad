/**
 * The era probe of a started stdio server: one `server/discover` request with the envelope, before
 * anything else is sent. A result that proves 2026-07-28 makes the connection modern; any other
 * answer (an error of any code, a result that is garbage or lacks the version) makes it legacy at
 * once, so a 2025-era server costs one round trip; only a server that ignores the request waits
 * for the budget. Never keyed to one error code.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import { isAuthRefusal } from '../transports/http-auth.js';
import {
  MODERN_PROTOCOL_VERSION,
  parseDiscover,
  RPC,
  withEnvelope,
  type DiscoverInfo,
} from './envelope.js';

/** The probe's JSON-RPC id: a string, so it never collides with the SDK's numeric ids. */
const PROBE_ID = 'stepbind-discover';

/** What the probe found: the `server/discover` result of a modern server, or why it is legacy. */
export type ProbeOutcome =
  | { readonly era: 'modern'; readonly discover: DiscoverInfo }
  | {
      readonly era: 'legacy';
      readonly answer: 'error' | 'not-modern' | 'timeout';
      /** The JSON-RPC error code of an `error` answer. */
      readonly code?: number;
      /** The versions an `UnsupportedProtocolVersion` (-32022) error named as supported. */
      readonly supported?: readonly string[];
    };

/** Options of {@link probeEra}. */
export interface ProbeOptions {
  /** How long the server may take to answer, not counting time while `busy()` is true. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /**
   * True while the transport's authorizer is logging in (discovery, registration, the `authorize`
   * hook): the budget is for the server's answer, so a timer that ends while it is busy is armed
   * again and the probe never abandons (and so cancels) a login in progress.
   */
  readonly busy?: () => boolean;
}

/**
 * Sends `server/discover` on a started transport and waits at most `timeoutMs` for its answer
 * (time while `busy()` is true not counted).
 * The transport's `onmessage`/`onclose` are borrowed and released again on every path.
 *
 * @throws RuntimeError `SERVER_START_FAILED` when the server exits (or the write fails) before
 *   answering; `ABORTED` when `signal` aborts; `AUTH_REQUIRED` / `AUTH_FAILED` when the
 *   transport's authorizer refused to send it.
 */
export function probeEra(
  server: string,
  transport: Transport,
  options: ProbeOptions,
): Promise<ProbeOutcome> {
  return new Promise<ProbeOutcome>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const release = (): void => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', abort);
      transport.onmessage = undefined;
      transport.onclose = undefined;
    };
    const fail = (why: string, cause?: unknown): void => {
      release();
      reject(new RuntimeError(ErrorCode.SERVER_START_FAILED, why, { detail: { server }, cause }));
    };
    const abort = (): void => {
      release();
      reject(
        new RuntimeError(ErrorCode.ABORTED, `The start of server "${server}" was cancelled.`, {
          detail: { server },
        }),
      );
    };
    const arm = (): void => {
      timer = setTimeout(() => {
        // A login in progress (an authorize hook a user takes minutes with) is not the server
        // being slow: the budget starts again rather than cancelling the login.
        if (options.busy?.() === true) {
          arm();
          return;
        }
        release();
        resolve({ era: 'legacy', answer: 'timeout' });
      }, options.timeoutMs);
    };
    arm();
    if (options.signal?.aborted === true) {
      abort();
      return;
    }
    options.signal?.addEventListener('abort', abort, { once: true });
    transport.onmessage = (message: JSONRPCMessage) => {
      const m = message as Record<string, unknown>;
      if (m['id'] !== PROBE_ID || 'method' in m) return;
      release();
      const discover = 'result' in m ? parseDiscover(m['result']) : undefined;
      if (discover !== undefined) resolve({ era: 'modern', discover });
      else if ('result' in m) resolve({ era: 'legacy', answer: 'not-modern' });
      else resolve({ era: 'legacy', answer: 'error', ...errorFacts(m['error']) });
    };
    transport.onclose = () => fail('the server exited while answering server/discover');
    transport
      .send({ jsonrpc: '2.0', id: PROBE_ID, method: 'server/discover', params: withEnvelope() })
      .catch((error: unknown) => {
        if (isAuthRefusal(error)) {
          // Not authorized (no login, a refused token): the start fails with that, not as a crash.
          release();
          reject(error);
          return;
        }
        fail(
          `server/discover could not be sent: ${error instanceof Error ? error.message : String(error)}`,
          error,
        );
      });
  });
}

/** The code of a JSON-RPC error and, for -32022, the versions it names as supported. */
function errorFacts(error: unknown): { code?: number; supported?: readonly string[] } {
  if (typeof error !== 'object' || error === null) return {};
  const { code, data } = error as { code?: unknown; data?: unknown };
  if (typeof code !== 'number') return {};
  const supported = (data as { supported?: unknown } | null | undefined)?.supported;
  return Array.isArray(supported)
    ? { code, supported: supported.filter((v): v is string => typeof v === 'string').slice(0, 64) }
    : { code };
}

/**
 * {@link probeEra}, asked once more when the server refuses the first `server/discover` with
 * `UnsupportedProtocolVersion` (-32022) while naming 2026-07-28 among its supported versions (a
 * server or proxy that rejected the first attempt; the spec's client retries with a version the
 * server names). Any other answer is final.
 */
export async function probeEraWithRetry(
  server: string,
  transport: Transport,
  options: ProbeOptions,
): Promise<ProbeOutcome> {
  const first = await probeEra(server, transport, options);
  if (
    first.era === 'legacy' &&
    first.code === RPC.UNSUPPORTED_PROTOCOL_VERSION &&
    first.supported?.includes(MODERN_PROTOCOL_VERSION) === true
  ) {
    return probeEra(server, transport, options);
  }
  return first;
}

/**
 * The started transport handed to the SDK client after a legacy probe: `start()` does nothing
 * more, and a late answer to the probe (a server that was slow, not silent) never reaches the SDK.
 *
 * A late answer that proves 2026-07-28 (a modern server that booted after the probe budget) is
 * handed to `onLateModern`; from then on the wrapper is detached: closing it (the SDK client does,
 * when its `initialize` fails or is aborted) leaves `inner` running, for a modern connection to
 * take over. {@link LateProbeTransport.attach} undoes that when the 2025 session was kept.
 */
export function startedTransport(
  inner: Transport,
  onLateModern?: (discover: DiscoverInfo) => void,
): LateProbeTransport {
  let detached = false;
  const wrapper: LateProbeTransport = {
    start: () => Promise.resolve(),
    send: (message, options) => inner.send(message, options),
    // The negotiated version reaches the transport (the HTTP ones send it as a header).
    setProtocolVersion: (version) => inner.setProtocolVersion?.(version),
    close: () => (detached ? Promise.resolve() : inner.close()),
    attach: () => {
      detached = false;
    },
  };
  inner.onmessage = (message: JSONRPCMessage) => {
    const m = message as Record<string, unknown>;
    if (m['id'] !== PROBE_ID) {
      wrapper.onmessage?.(message);
      return;
    }
    if (onLateModern === undefined || detached || !('result' in m)) return;
    const discover = parseDiscover(m['result']);
    if (discover === undefined) return;
    detached = true;
    onLateModern(discover);
  };
  inner.onerror = (error) => wrapper.onerror?.(error);
  inner.onclose = () => wrapper.onclose?.();
  return wrapper;
}

/** What {@link startedTransport} returns. */
export interface LateProbeTransport extends Transport {
  /** Re-attaches the wrapper after a late modern answer when the 2025 session is kept after all. */
  attach(): void;
}
