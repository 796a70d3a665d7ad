/**
 * SDK error mapping: every failure of an SDK request or transport becomes a typed stepbind error
 * (the original kept as `cause`), saying for a `tools/call` whether it was written.
 */
import { ErrorCode as RpcErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode, RuntimeError, StepbindError, type Delivery } from '@stepbind/binding/internal';
import { guardErrorOf, type FaultError } from '../transports/guard.js';
import { isAuthRefusal, withAuthDetail } from '../transports/http-auth.js';

/** Error-mapping context: what was being done, to whom. */
export interface MapContext {
  readonly server: string;
  readonly tool?: string;
  readonly operation: string;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** The transport fault that closed the connection, if any: it replaces `CONNECTION_CLOSED`. */
  readonly fault?: FaultError | undefined;
  /** For a request whose delivery is tracked (`tools/call`): whether it was written. */
  readonly delivery?: Delivery;
}

/**
 * Maps an SDK or transport failure to a typed stepbind error, keeping the original as `cause`:
 * our own abort → `ABORTED`; SDK request timeout (-32001) → `TIMEOUT`; connection closed (-32000)
 * or a transport that is gone → `CONNECTION_CLOSED` (or the fault that closed it, such as
 * `MESSAGE_TOO_LARGE`), or `OUTCOME_UNKNOWN` when `ctx.delivery` says the request was already
 * written; an authorization refusal (`AUTH_REQUIRED`, `AUTH_FAILED`) keeps its code, not sent; a
 * response the transport guard refused → its `MALFORMED_MESSAGE` or
 * `MESSAGE_TOO_LARGE`; any other JSON-RPC error → `SERVER_ERROR` with `detail.rpcCode`. With
 * `ctx.delivery`, every error carries it as `detail.delivery`.
 */
export function mapSdkError(error: unknown, ctx: MapContext): StepbindError {
  if (isAuthRefusal(error)) {
    // The authorizer refused before the server processed it (see `transports/http-auth.ts`).
    return withAuthDetail(error, {
      server: ctx.server,
      ...(ctx.tool === undefined ? {} : { tool: ctx.tool }),
      ...(ctx.delivery === undefined ? {} : { delivery: 'not-sent' }),
    });
  }
  if (error instanceof StepbindError) return error;
  const guarded = guardErrorOf(error);
  if (guarded !== undefined) return guarded;
  const where = `${ctx.operation} on server "${ctx.server}"${ctx.tool === undefined ? '' : ` (tool "${ctx.tool}")`}`;
  const detail = {
    server: ctx.server,
    ...(ctx.tool === undefined ? {} : { tool: ctx.tool }),
    ...(ctx.delivery === undefined ? {} : { delivery: ctx.delivery }),
  };
  const sent = ctx.delivery === 'sent';
  if (ctx.signal?.aborted === true) {
    const reason: unknown = ctx.signal.reason;
    if (reason instanceof StepbindError) return reason;
    return new RuntimeError(
      ErrorCode.ABORTED,
      `${where} was cancelled by the caller${sent ? ' after it was sent (a cancellation was sent; it may have run)' : ''}.`,
      { detail, cause: error },
    );
  }
  if (error instanceof McpError) {
    if (error.code === Number(RpcErrorCode.RequestTimeout)) {
      return new RuntimeError(
        ErrorCode.TIMEOUT,
        `${where} timed out${ctx.timeoutMs === undefined ? '' : ` after ${ctx.timeoutMs} ms`}; a cancellation was sent${sent ? ', but the request may have run' : ''}. Check the server or raise the timeout.`,
        { detail: { ...detail, rpcCode: error.code, timeoutMs: ctx.timeoutMs }, cause: error },
      );
    }
    if (error.code === Number(RpcErrorCode.ConnectionClosed)) {
      return lostConnection(ctx, where, detail, error);
    }
    return new RuntimeError(
      ErrorCode.SERVER_ERROR,
      `${where} failed with JSON-RPC error ${error.code}: ${stripPrefix(error.message)}`,
      { detail: { ...detail, rpcCode: error.code }, cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  if (/not connected|closed|EPIPE|ECONNRESET/i.test(message)) {
    return lostConnection(ctx, where, detail, error);
  }
  return new RuntimeError(ErrorCode.SERVER_ERROR, `${where} failed: ${message}`, {
    detail,
    cause: error,
  });
}

/**
 * The connection is gone: the fault that closed it, if any; else `OUTCOME_UNKNOWN` when the request
 * was written (it may have run), `CONNECTION_CLOSED` when it was not.
 */
function lostConnection(
  ctx: MapContext,
  where: string,
  detail: Record<string, string>,
  error: unknown,
): StepbindError {
  const fault = faultError(ctx);
  if (fault !== undefined) return fault;
  const sent = ctx.delivery === 'sent';
  return sent ? outcomeUnknown(where, detail, error) : connectionClosed(where, detail, error);
}

function faultError(ctx: MapContext): StepbindError | undefined {
  return ctx.fault?.({
    id: -1,
    method: ctx.operation,
    ...(ctx.tool === undefined ? {} : { tool: ctx.tool }),
  });
}

export function connectionClosed(
  where: string,
  detail: Record<string, string>,
  cause: unknown,
): StepbindError {
  return new RuntimeError(
    ErrorCode.CONNECTION_CLOSED,
    `${where} failed: the connection to the server is closed. Nothing was re-routed; refresh to reconnect and call again from a new step.`,
    { detail, cause },
  );
}

function outcomeUnknown(
  where: string,
  detail: Record<string, string>,
  cause: unknown,
): StepbindError {
  return new RuntimeError(
    ErrorCode.OUTCOME_UNKNOWN,
    `${where}: the connection to the server was lost after the request was sent, so it may or may not have run. Check whether it took effect before calling it again; nothing was re-routed.`,
    { detail, cause },
  );
}

function stripPrefix(message: string): string {
  return message.replace(/^MCP error -?\d+: /, '');
}
