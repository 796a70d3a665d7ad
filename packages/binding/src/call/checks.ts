/**
 * The value checks of a prepared call (DESIGN §7.1): its arguments (bounds, then the frozen input
 * schema) before anything is sent, and its result (bounds, then the frozen output schema) after
 * the call ran.
 *
 * @packageDocumentation
 */
import { DEFAULT_CALL_LIMITS, checkJsonValue, describeValueProblem } from '../bounds.js';
import { digestOf } from '../canonical.js';
import { CallError, ErrorCode } from '../errors.js';
import type { BoundTool } from '../tools/view.js';
import type { DetailOf } from './failure.js';
import type { ToolCallResult } from './types.js';

/** The call whose values are checked: its bound tool (limits, validators) and its error detail. */
export interface CheckedCall {
  readonly bound: BoundTool;
  readonly detail: DetailOf;
}

/**
 * The `sha256:` digest of the canonical JSON of `args`; the caller bounds them first (the digest
 * recurses over them).
 *
 * @throws CallError `INVALID_ARGUMENTS` (nothing sent) when `args` are not JSON.
 */
export function argsDigestOf(call: CheckedCall, args: unknown): string {
  try {
    return digestOf(args);
  } catch (error) {
    throw new CallError(
      ErrorCode.INVALID_ARGUMENTS,
      `Arguments for "${call.bound.modelName}" are not JSON (${error instanceof Error ? error.message : String(error)}); nothing was sent. Fix the arguments and call again.`,
      { detail: call.detail({}), cause: error },
    );
  }
}

/**
 * `args` as the call's arguments: a JSON object within the argument bounds (skipped when
 * `bounded`, because they were bounded for their digest already) that the frozen input schema
 * accepts.
 *
 * @throws CallError `INVALID_ARGUMENTS` (nothing sent).
 */
export function checkArgs(
  call: CheckedCall,
  args: unknown,
  bounded = false,
): Readonly<Record<string, unknown>> {
  const { modelName, descriptor } = call.bound;
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new CallError(
      ErrorCode.INVALID_ARGUMENTS,
      `Arguments for "${modelName}" must be a JSON object; nothing was sent. Fix the arguments and call again.`,
      { detail: call.detail({}) },
    );
  }
  // Bounded before anything recurses over them: validation, then serialisation by the transport.
  if (!bounded) checkBounds(call, args, 'Argument');
  const verdict = descriptor.inputValidator().validate(args);
  if (!verdict.ok) {
    throw new CallError(
      ErrorCode.INVALID_ARGUMENTS,
      `Arguments for "${modelName}" do not match its input schema: ${verdict.errors}. Nothing was sent; fix the arguments and call again.`,
      { detail: call.detail({ errors: verdict.errors }) },
    );
  }
  return args as Readonly<Record<string, unknown>>;
}

/**
 * Checks a result that came back from a call that ran: within the output bounds (every result,
 * with or without an output schema: the caller serialises it next), and, unless it is a tool error,
 * with `structuredContent` that the frozen output schema accepts.
 *
 * @throws CallError `INVALID_TOOL_OUTPUT` (`delivery: 'sent'`; the result is discarded).
 */
export function checkOutput(call: CheckedCall, result: ToolCallResult): void {
  checkBounds(call, result, 'Output');
  const { descriptor, server } = call.bound;
  const validator = descriptor.outputValidator();
  if (validator === undefined || result.isError === true) return;
  const structured = result.structuredContent;
  const verdict =
    structured === undefined
      ? {
          ok: false as const,
          errors: 'no structuredContent although the tool declares an outputSchema',
        }
      : validator.validate(structured);
  if (!verdict.ok) {
    throw new CallError(
      ErrorCode.INVALID_TOOL_OUTPUT,
      `Invalid structured content returned by tool ${descriptor.name} of server "${server.name}": ${verdict.errors}. The call did run; its result was discarded.`,
      { detail: call.detail({ errors: verdict.errors, delivery: 'sent' }) },
    );
  }
}

/** The `CallLimits` keys of each side, built once (not per call). */
const LIMIT_KEYS = {
  Argument: { depthKey: 'maxArgumentDepth', bytesKey: 'maxArgumentBytes' },
  Output: { depthKey: 'maxOutputDepth', bytesKey: 'maxOutputBytes' },
} as const;

/**
 * Checks `value` against the server's `CallLimits` (depth, JSON size, plain JSON).
 *
 * @throws CallError `INVALID_ARGUMENTS` (nothing sent) or `INVALID_TOOL_OUTPUT` (the call ran), with
 *   `detail.limit` and `detail.max`, or `detail.path` of a value that is not plain JSON.
 */
export function checkBounds(call: CheckedCall, value: unknown, which: 'Argument' | 'Output'): void {
  const { modelName, descriptor, server } = call.bound;
  const limits = server.callLimits;
  // Named loads, not keyed ones: this runs twice per call.
  const problem =
    which === 'Argument'
      ? checkJsonValue(
          value,
          limits?.maxArgumentDepth ?? DEFAULT_CALL_LIMITS.maxArgumentDepth,
          limits?.maxArgumentBytes ?? DEFAULT_CALL_LIMITS.maxArgumentBytes,
        )
      : checkJsonValue(
          value,
          limits?.maxOutputDepth ?? DEFAULT_CALL_LIMITS.maxOutputDepth,
          limits?.maxOutputBytes ?? DEFAULT_CALL_LIMITS.maxOutputBytes,
        );
  if (problem === undefined) return;
  const { depthKey, bytesKey } = LIMIT_KEYS[which];
  const errors = describeValueProblem(problem, depthKey, bytesKey);
  const limit =
    problem.kind === 'depth' ? depthKey : problem.kind === 'bytes' ? bytesKey : undefined;
  const detail = call.detail({
    errors,
    ...(limit === undefined
      ? { path: problem.kind === 'not-json' ? problem.path : '' }
      : { limit }),
    ...(problem.kind === 'not-json' ? {} : { max: problem.limit }),
    // A result over the bounds came back from a call that ran.
    ...(which === 'Output' ? { delivery: 'sent' } : {}),
  });
  if (which === 'Argument') {
    throw new CallError(
      ErrorCode.INVALID_ARGUMENTS,
      `Arguments for "${modelName}" are ${errors}. Nothing was sent; ${limit === undefined ? 'pass plain JSON' : `shrink the arguments or raise ${limit} in the limits of server "${server.name}"`} and call again.`,
      { detail },
    );
  }
  throw new CallError(
    ErrorCode.INVALID_TOOL_OUTPUT,
    `The result of tool ${descriptor.name} of server "${server.name}" is ${errors}. The call did run; its result was discarded.${limit === undefined ? '' : ` Raise ${limit} in the limits of server "${server.name}" if this server is trusted.`}`,
    { detail },
  );
}
