/**
 * Errors rendered as `isError` tool results a model can act on.
 *
 * @packageDocumentation
 */
import { ErrorCode, StepbindError, type ErrorCode as Code } from '../errors.js';

const MODEL_MESSAGES: Partial<Record<Code, (e: StepbindError) => string>> = {
  STALE_CATALOG: (e) =>
    `The tool catalog of server "${String(e.detail.server)}" changed; this call was not run. Call again with the tools of the next step.`,
  UNKNOWN_TOOL: (e) =>
    `There is no tool named "${String(e.detail['modelName'])}" in this step. Use one of the tools you were given.`,
  INVALID_ARGUMENTS: (e) =>
    `The arguments do not match the tool's input schema (${typeof e.detail['errors'] === 'string' ? e.detail['errors'] : 'not an object'}); the call was not run. Fix the arguments and call again.`,
  INVALID_TOOL_OUTPUT: () =>
    'The tool ran but returned output that does not match its declared schema, so the result was discarded. Do not assume it failed or succeeded; check before retrying.',
  TOOL_DENIED: (e) => `This call was not allowed and was not run: ${e.message}`,
  APPROVAL_REQUIRED: () =>
    'This call may change state and needs an approval from the user before it runs; it was not run. Ask the user to approve it, then call it again.',
  BINDING_RELEASED: () =>
    'This call belongs to a finished step and was not run. Call again with the tools of the current step.',
  CONNECTION_CLOSED: (e) =>
    `The server "${String(e.detail.server)}" is disconnected; this call was not sent, so it did not run, and it was not re-routed. Try again in the next step.`,
  OUTCOME_UNKNOWN: (e) =>
    e.detail['keyState'] === 'OUTCOME_UNKNOWN'
      ? `An earlier attempt of this call was sent to server "${String(e.detail.server)}" and no answer was recorded, so it may or may not have taken effect; it was not sent again. Check whether it did; do not repeat it as a new tool call until you know it did not.`
      : `The call was sent to server "${String(e.detail.server)}" but no answer came back (the connection was lost), so it may or may not have taken effect. Check whether it did before calling it again.`,
  TIMEOUT: () =>
    'The tool did not answer in time and the request was cancelled. It may or may not have taken effect; check before retrying.',
  ABORTED: (e) =>
    isSent(e)
      ? 'The call was cancelled after it was sent. It may or may not have taken effect; check before retrying.'
      : 'The call was cancelled before it was sent; it did not run.',
  IDEMPOTENCY_IN_PROGRESS: (e) =>
    isSent(e)
      ? 'This tool call is already running, so it may already have taken effect; it was not started again. Wait for its result, or check whether it took effect, instead of calling it again.'
      : 'This tool call is already running; it was not started again. Wait for its result instead of calling it again.',
  IDEMPOTENCY_CONFLICT: (e) =>
    !isSent(e)
      ? 'This tool-call id was already used for a different call that was not run, so this call was not run either. Make it again as a new tool call.'
      : `This tool-call id was already used for a different call, which ${e.detail['keyState'] === 'COMPLETED' ? 'ran' : 'may have run'}; this call was not run. If you meant to retry that call, do not make it again: check whether it already took effect. Only a genuinely different call should be made as a new tool call.`,
  JOURNAL_BUSY: (e) =>
    isSent(e)
      ? 'The call was sent, but its outcome could not be recorded because the journal was busy. It may or may not have taken effect; check before retrying.'
      : 'The call was not run: its journal was busy (another process held its lock), so it was not sent. Try it again shortly.',
};

function isSent(e: StepbindError): boolean {
  return e.detail['delivery'] === 'sent';
}

/** True when the call may have taken effect: it was written and no answer says otherwise. */
function mayHaveRun(e: StepbindError): boolean {
  return (
    e.code === ErrorCode.OUTCOME_UNKNOWN || (isSent(e) && e.code !== ErrorCode.CONNECTION_CLOSED)
  );
}

/** An `isError` MCP tool result a model can act on. */
export interface ErrorToolResult {
  readonly isError: true;
  readonly content: readonly [{ readonly type: 'text'; readonly text: string }];
  readonly _meta: { readonly 'io.stepbind/error': { readonly code: string } };
}

/**
 * Renders any error as an `isError` tool result with a message a model can act on, so the agent
 * loop can continue with a new step. Whenever the call may have run (`OUTCOME_UNKNOWN`, a timeout,
 * any failure after the request was sent) the model is told to check before retrying; a call that
 * was not sent is said not to have run. Non-stepbind errors are rendered generically.
 */
export function toToolResult(error: unknown): ErrorToolResult {
  let code = 'INTERNAL';
  let text = `The call failed: ${error instanceof Error ? error.message : String(error)}`;
  if (StepbindError.isInstance(error)) {
    code = error.code;
    text = MODEL_MESSAGES[error.code]?.(error) ?? error.message;
    if (mayHaveRun(error) && !/check/i.test(text)) {
      text = `${text} It may have taken effect; check before retrying.`;
    }
  }
  return Object.freeze({
    isError: true,
    content: Object.freeze([Object.freeze({ type: 'text', text })] as const),
    _meta: Object.freeze({ 'io.stepbind/error': Object.freeze({ code }) }),
  });
}
