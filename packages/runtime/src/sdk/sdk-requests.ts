/**
 * Small request helpers of the 2025-era adapter: the per-request abort signal and the tool list
 * source over an already connected SDK `Client`.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  onAbort,
  type FeatureMethod,
  type FeatureRequestOptions,
  type ListPageRequest,
  type ToolListSource,
} from '@stepbind/binding/internal';
import type { Redactor } from '../redact.js';
import { StepbindError } from '@stepbind/binding/internal';
import { createDebug } from '../log.js';
import type { FaultSource } from '../transports/guard.js';
import { mapSdkError } from './sdk-errors.js';
import { wantsProgress } from '../call-progress.js';
import type { CallRequestOptions } from '../connection.js';

/** Budget of the `ping` that checks a session after one of its response streams broke. */
export const PROBE_TIMEOUT_MS = 5_000;
/** The reason a call is aborted with when the session watch saw its response stream break. */
export const RESPONSE_LOST = 'the response stream broke before the answer arrived';

/** A per-request signal that follows `outer`; `dispose()` detaches it. */
export function linkSignal(
  outer: AbortSignal | undefined,
  always = false,
): { readonly signal: AbortSignal; abort(reason: unknown): void; dispose(): void } | undefined {
  if (outer === undefined && !always) return undefined;
  const controller = new AbortController();
  const abort = (reason: unknown): void => controller.abort(reason);
  if (outer === undefined) return { signal: controller.signal, abort, dispose: () => undefined };
  if (outer.aborted) {
    controller.abort(outer.reason);
    return { signal: controller.signal, abort, dispose: () => undefined };
  }
  // One listener on the caller's signal however many calls share it (see onAbort).
  const dispose = onAbort(outer, () => controller.abort(outer.reason));
  return { signal: controller.signal, abort, dispose };
}

/**
 * Wraps an already connected SDK `Client` as a {@link ToolListSource}, for `enumerateTools`.
 */
export function clientListSource(
  client: Client,
  server: string,
  fault: FaultSource = () => undefined,
): ToolListSource {
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
          fault: fault(),
        });
      }
    },
  };
}

/** The `stepbind:call` debug channel: one line per `tools/call` with its outcome and time. */
export const debugCall = createDebug('stepbind:call');

/** `call`, logging its outcome and time on {@link debugCall} once it settles. */
export function debugCallOutcome<T extends { readonly isError?: boolean | undefined }>(
  call: Promise<T>,
  server: string,
  tool: string,
  started: number,
): Promise<T> {
  const line = (outcome: string): void =>
    debugCall(
      `server "${server}" tools/call ${tool}: ${outcome} in ${(performance.now() - started).toFixed(1)} ms`,
    );
  return call.then(
    (result) => {
      line(result.isError === true ? 'tool error' : 'ok');
      return result;
    },
    (error: unknown) => {
      line(error instanceof StepbindError ? error.code : 'error');
      throw error;
    },
  );
}

/** Whether `record` has an own enumerable key (without allocating its key list). */
export function hasKeys(record: Readonly<Record<string, string>>): boolean {
  for (const key in record) if (Object.hasOwn(record, key)) return true;
  return false;
}

/** The request-id listener of an untraced call (the id goes on a span only when one records). */
export const ignoreRequestId = (): void => undefined;

/**
 * True when a `tools/call` needs nothing but the request itself: no caller's signal to link, no
 * MCP task, no progress. (The connection adds: no span and no HTTP session.)
 */
export function isPlainCall(options: CallRequestOptions & { readonly task?: unknown }): boolean {
  return options.signal === undefined && options.task === undefined && !wantsProgress(options);
}

/** One resources, prompts or completion request on an open client (`Connection.featureRequest`). */
export async function featureRequestOn(
  client: Client,
  method: FeatureMethod,
  params: Readonly<Record<string, unknown>>,
  options: FeatureRequestOptions,
  on: { readonly server: string; readonly fault: FaultSource; readonly redactor: Redactor },
): Promise<unknown> {
  // The SDK never removes its abort listener: a per-request signal linked to the caller's.
  const link = linkSignal(options.signal);
  try {
    return await client.request({ method, params: { ...params } }, ResultSchema, {
      timeout: options.timeoutMs,
      ...(link === undefined ? {} : { signal: link.signal }),
    });
  } catch (error) {
    throw on.redactor.error(
      mapSdkError(error, {
        server: on.server,
        operation: method,
        timeoutMs: options.timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        fault: on.fault(),
      }),
    );
  } finally {
    link?.dispose();
  }
}
