/**
 * What a failed run of a prepared call means (DESIGN §7, §3 invariant 10): the phase it failed in
 * decides whether its request was written (`detail.delivery`), and the refusals a run raises
 * before anything is sent.
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode, StepbindError, type Delivery } from '../errors.js';
import type { InputRoundLog } from './input-rounds.js';

/**
 * Where a run is: `admission` (everything before the `prepare` hook, and after it up to the send),
 * `prepare` (the hook), `call` (`tools/call` on the captured client), `output` (the result's
 * validation). Nothing was written to the server before `call`; the call ran once in `output`.
 */
export type CallPhase = 'admission' | 'prepare' | 'call' | 'output';

/** The call's error detail (server, tool, model name, step, `delivery: 'not-sent'`) plus `extra`. */
export type DetailOf = (extra: Record<string, unknown>) => Record<string, unknown>;

/** The names a failure message of one prepared call uses, and its error detail. */
export interface FailingCall {
  /** Configured server name. */
  readonly server: string;
  /** The name the model used. */
  readonly modelName: string;
  /** The call's error detail plus `extra`. */
  readonly detail: DetailOf;
}

/**
 * The delivery correction: what a failure in `phase` says about the request. Before `call` nothing
 * was written (`not-sent`); in `call` the caller's word counts and silence means `sent`; in `output`
 * the call ran (`sent`). A caller that reports a connection lost after sending as
 * `CONNECTION_CLOSED` is corrected to `OUTCOME_UNKNOWN` (`CONNECTION_CLOSED` means nothing was
 * sent); `code` is the corrected code of a {@link StepbindError}, `undefined` for anything else.
 */
function correctDelivery(
  error: unknown,
  phase: CallPhase,
): { readonly delivery: Delivery; readonly code: ErrorCode | undefined } {
  const delivery: Delivery =
    phase === 'call'
      ? error instanceof StepbindError && error.detail['delivery'] === 'not-sent'
        ? 'not-sent'
        : 'sent'
      : phase === 'output'
        ? 'sent'
        : 'not-sent';
  if (!(error instanceof StepbindError)) return { delivery, code: undefined };
  const code =
    error.code === ErrorCode.CONNECTION_CLOSED && delivery === 'sent'
      ? ErrorCode.OUTCOME_UNKNOWN
      : error.code;
  return { delivery, code };
}

/**
 * The {@link CallError} a run that failed in `phase` with `error` ends with. A `CallError` that
 * already says its delivery is returned as it is; another {@link StepbindError} keeps its code
 * (corrected by {@link correctDelivery}) and detail with the phase's delivery; anything else
 * becomes `TOOL_DENIED` (`reason` `prepare` or `admission`, nothing sent), `SERVER_ERROR` (in
 * `call`) or `INVALID_TOOL_OUTPUT` (in `output`), with `error` as its cause.
 */
export function failureOf(error: unknown, phase: CallPhase, call: FailingCall): CallError {
  const { delivery, code } = correctDelivery(error, phase);
  if (error instanceof CallError && error.detail['delivery'] !== undefined) return error;
  if (error instanceof StepbindError) {
    return new CallError(code ?? error.code, error.message, {
      detail: { ...call.detail({}), ...error.detail, delivery },
      cause: error,
    });
  }
  const message = error instanceof Error ? error.message : String(error);
  switch (phase) {
    case 'prepare':
      return new CallError(
        ErrorCode.TOOL_DENIED,
        `The prepare hook of "${call.modelName}" refused or failed: ${message}. Nothing was sent.`,
        { detail: call.detail({ reason: 'prepare' }), cause: error },
      );
    case 'admission':
      return new CallError(
        ErrorCode.TOOL_DENIED,
        `"${call.modelName}" could not be admitted: ${message}. Nothing was sent.`,
        { detail: call.detail({ reason: 'admission' }), cause: error },
      );
    case 'call':
      return new CallError(
        ErrorCode.SERVER_ERROR,
        `tools/call of "${call.modelName}" on server "${call.server}" failed: ${message}. It may or may not have run.`,
        { detail: call.detail({ delivery }), cause: error },
      );
    case 'output':
      return new CallError(
        ErrorCode.INVALID_TOOL_OUTPUT,
        `"${call.modelName}" ran, but its output could not be validated: ${message}. The result was discarded.`,
        { detail: call.detail({ delivery }), cause: error },
      );
  }
}

/**
 * The failure of a call that went through MRTR rounds, with `detail.inputRounds` (what was asked
 * and how it was answered, never the answers), so the application sees what the journal records.
 */
export function withRounds(failure: CallError, rounds: InputRoundLog | undefined): CallError {
  const field = rounds?.field() ?? {};
  if (field.inputRounds === undefined || failure.detail['inputRounds'] !== undefined)
    return failure;
  return new CallError(failure.code, failure.message, {
    detail: { ...failure.detail, inputRounds: field.inputRounds },
    cause: failure.cause ?? failure,
  });
}

/**
 * `ABORTED`, nothing sent: the caller's signal fired (`reason` is its reason), or the runtime
 * closed (`closing`, `detail.reason: 'closed'`) before the request was written.
 */
export function abortedBeforeSend(call: FailingCall, reason: unknown, closing: boolean): CallError {
  return new CallError(
    ErrorCode.ABORTED,
    closing
      ? `The runtime closed before "${call.modelName}" was sent; it was not run and nothing was sent. Open a new runtime to call it.`
      : `"${call.modelName}" was cancelled before it was sent.`,
    { detail: call.detail({ ...(closing ? { reason: 'closed' } : {}) }), cause: reason },
  );
}

/**
 * `STALE_CATALOG`, nothing sent: the step showed a provisional (cached) catalog and the live one
 * `changed` the tool's descriptor or no longer has it (`vanished`), DESIGN §19.2.
 */
export function provisionalStaleError(
  call: FailingCall,
  reason: 'changed' | 'vanished',
  cachedDigest: string,
  liveDigest: string | undefined,
): CallError {
  return new CallError(
    ErrorCode.STALE_CATALOG,
    `This step showed the cached tools of server "${call.server}"; its live catalog ${reason === 'changed' ? 'changed' : 'no longer has'} "${call.modelName}"${reason === 'changed' ? ' since they were cached' : ''}, so it was not run and nothing was sent. Call again with the tools of the next step.`,
    {
      detail: call.detail({
        provisional: true,
        reason,
        cachedDigest,
        ...(liveDigest === undefined ? {} : { liveDigest }),
      }),
    },
  );
}

/**
 * `TIMEOUT`, nothing sent: a provisional server did not publish its live catalog within the
 * call's timeout (DESIGN §19.2).
 */
export function provisionalTimeoutError(call: FailingCall, timeoutMs: number): CallError {
  return new CallError(
    ErrorCode.TIMEOUT,
    `Server "${call.server}" did not confirm its tools within ${timeoutMs} ms (this step showed its cached catalog); "${call.modelName}" was not run and nothing was sent. Retry, or give the call a longer timeoutMs.`,
    { detail: call.detail({ provisional: true, timeoutMs }) },
  );
}

/** `INVALID_OPTIONS`, nothing sent: an idempotency key on a binding without an open journal. */
export function noJournalError(call: FailingCall, key: string): CallError {
  return new CallError(
    ErrorCode.INVALID_OPTIONS,
    `"${call.modelName}" was given idempotency key "${key}", but this binding has no journal (or it is closed); nothing was sent. Capture the step from an open McpRuntime.`,
    { detail: call.detail({ key }) },
  );
}

/** `STALE_CATALOG`, nothing run or sent: the server's revision moved since the step's capture. */
export function staleCatalogError(
  call: FailingCall,
  capturedRevision: number,
  currentRevision: number,
): CallError {
  return new CallError(
    ErrorCode.STALE_CATALOG,
    `The tool catalog of server "${call.server}" changed after this step was captured (revision ${capturedRevision} → ${currentRevision}); "${call.modelName}" was not run and nothing was sent. Call again with the tools of the next step.`,
    { detail: call.detail({ capturedRevision, currentRevision }) },
  );
}

/** `CONNECTION_CLOSED`, nothing sent: the connection captured with the step is gone. */
export function connectionClosedError(call: FailingCall): CallError {
  return new CallError(
    ErrorCode.CONNECTION_CLOSED,
    `The connection of server "${call.server}" captured by this step is closed; "${call.modelName}" was not run and is never re-routed. Call again from the next step.`,
    { detail: call.detail({}) },
  );
}
