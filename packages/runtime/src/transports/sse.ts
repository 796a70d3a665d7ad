/**
 * The legacy HTTP+SSE transport (protocol 2024-11-05), for `type: "sse"` entries and for the
 * fallback of an HTTP server that refuses Streamable HTTP: a GET opens an event stream whose first
 * event, `endpoint`, names the URL the client POSTs its messages to; every answer comes back on
 * that one stream. The SDK's `SSEClientTransport` speaks it; this file only builds it over the
 * guarded fetch of `http.ts` (message bound, authorizer, pool, session watch) and states when a
 * Streamable HTTP refusal means "try HTTP+SSE".
 */
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';

/**
 * The HTTP statuses of a refused first POST after which a client tries HTTP+SSE (the specification's
 * backwards compatibility rule, 2025-03-26 on): 400, 404 and 405. Anything else (401 is a login,
 * a 5xx a broken server, a network error an unreachable one) is no reason to.
 */
export const SSE_FALLBACK_STATUSES: ReadonlySet<number> = new Set([400, 404, 405]);

/** Whether a first POST answered with `status` (if any) means "try the HTTP+SSE transport". */
export function isSseFallbackStatus(status: number | undefined): boolean {
  return status !== undefined && SSE_FALLBACK_STATUSES.has(status);
}

/**
 * The SDK's HTTP+SSE client transport over the guarded fetch: the GET stream and every POST go
 * through it (the EventSource takes the same fetch), with the configured headers.
 */
export function sseInner(
  url: URL,
  init: { readonly requestInit: { headers: Record<string, string> }; readonly fetch: typeof fetch },
): Transport {
  return new SSEClientTransport(url, { requestInit: init.requestInit, fetch: init.fetch });
}

/**
 * Starts an HTTP+SSE transport (opens its GET stream and waits for the `endpoint` event) within
 * `timeoutMs`, as the SDK's `start()` has no bound of its own; the transport is closed on every
 * failure.
 *
 * @throws RuntimeError `TIMEOUT`, `ABORTED`, or what `start()` threw (`AUTH_REQUIRED`,
 *   `AUTH_FAILED` as the authorizer refused; the SDK's `SseError` carrying the HTTP status).
 */
export async function startSse(
  name: string,
  transport: Transport,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new RuntimeError(
            ErrorCode.TIMEOUT,
            `Server "${name}" did not open its HTTP+SSE stream (no "endpoint" event) within ${timeoutMs} ms. Check that the URL is the server's SSE stream, or raise its startupTimeoutMs.`,
            { detail: { server: name, timeoutMs } },
          ),
        ),
      timeoutMs,
    );
    onAbort = () =>
      reject(
        new RuntimeError(ErrorCode.ABORTED, `The start of server "${name}" was cancelled.`, {
          detail: { server: name },
        }),
      );
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([transport.start(), stop]);
  } catch (error) {
    await transport.close().catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
    if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
  }
}
