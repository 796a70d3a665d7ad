/**
 * The small pieces of one request of a `ModernConnection`: its options, the context its
 * errors name, and the `_meta` a call carries.
 */
import type { Delivery } from '@stepbind/binding/internal';
import type { DeliveryRecord } from '../connection.js';

/** A plain JSON object (not an array). */
export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Options of one request of a `ModernConnection`; `onSettled` is told synchronously. */
export interface RequestOptions {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal | undefined;
  readonly tool?: string;
  /** Set to `sent` when the request is handed to the transport (a `tools/call` only). */
  readonly delivery?: DeliveryRecord;
  /** Told the JSON-RPC id the request goes out with. */
  readonly onId?: (id: number) => void;
  readonly onSettled?: () => void;
}

export type Ctx = { readonly server: string; readonly method: string; readonly tool?: string };

export function where(ctx: Ctx): string {
  return `${ctx.method} on server "${ctx.server}"${ctx.tool === undefined ? '' : ` (tool "${ctx.tool}")`}`;
}

export function detailOf(
  ctx: Ctx,
  delivery: Delivery | undefined,
  more: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    server: ctx.server,
    ...(ctx.tool === undefined ? {} : { tool: ctx.tool }),
    ...(delivery === undefined ? {} : { delivery }),
    ...more,
  };
}

/** `params` with `meta` (trace context, progress token) in its `_meta`; as is without `meta`. */
export function withMeta(
  params: Record<string, unknown>,
  meta: Readonly<Record<string, string>> | undefined,
): Record<string, unknown> {
  if (meta === undefined) return params;
  const own = params['_meta'];
  return { ...params, _meta: { ...(isRecord(own) ? own : {}), ...meta } };
}
