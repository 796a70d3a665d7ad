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
import type { SdkHttpInit } from './http.js';

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
export function sseInner(url: URL, init: SdkHttpInit): Transport {
  return new SSEClientTransport(url, { requestInit: init.requestInit, fetch: init.fetch });
}
