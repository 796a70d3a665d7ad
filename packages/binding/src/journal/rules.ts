/**
 * The rules `CallJournal` decides by, as plain functions: the payload comparison every path makes
 * first, which failures count as answered, and the refusals (with the record summary they carry).
 */
import type { CallReceipt, ToolCallResult } from '../call/types.js';
import { CallError, ErrorCode, JournalError, type StepbindError } from '../errors.js';
import type { CallIntent } from './claim.js';
import type { CallContext, JournalRecord, JournalStore, Resolution } from './store.js';

/** The refusal for a key this process already holds for `held`. */
export function localRefusal(held: CallIntent, intent: CallIntent): CallError {
  const conflict = conflictOf(
    {
      key: held.key,
      state: 'INTENT',
      version: 0,
      attempt: 0,
      owner: 'this process',
      context: held.context,
      argsDigest: held.argsDigest,
      createdAt: 0,
      updatedAt: 0,
      leaseExpiresAt: 0,
      expiresAt: null,
      outcome: null,
      error: null,
      resolution: null,
    },
    intent,
  );
  if (conflict !== undefined) return conflict;
  return new CallError(
    ErrorCode.IDEMPOTENCY_IN_PROGRESS,
    `Idempotency key "${intent.key}" is already running in this process; "${intent.context.modelName}" was not run again. Wait for the first run's result.`,
    {
      detail: {
        ...contextDetail(intent.context),
        key: intent.key,
        reason: 'in-progress',
        delivery: 'not-sent',
      },
    },
  );
}

/** The fields of a {@link CallContext} only (drops anything else a receipt carries). */
export function contextOf(c: CallContext): CallContext {
  return {
    stepId: c.stepId,
    server: c.server,
    tool: c.tool,
    modelName: c.modelName,
    descriptorDigest: c.descriptorDigest,
    effectClass: c.effectClass,
    generation: c.generation,
    revision: c.revision,
    policyEpoch: c.policyEpoch,
    audience: c.audience,
    catalogState: c.catalogState,
    ...(c.protocolVersion === undefined ? {} : { protocolVersion: c.protocolVersion }),
  };
}

export function contextDetail(c: CallContext): Record<string, unknown> {
  return { server: c.server, tool: c.tool, modelName: c.modelName, stepId: c.stepId };
}

/** A public summary of a record for error details (no stored result). */
export function recordSummary(record: JournalRecord): Record<string, unknown> {
  return {
    key: record.key,
    state: record.state,
    attempt: record.attempt,
    owner: record.owner,
    server: record.context.server,
    tool: record.context.tool,
    stepId: record.context.stepId,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    leaseExpiresAt: record.leaseExpiresAt,
    error: record.error,
  };
}

export function conflictOf(existing: JournalRecord, intent: CallIntent): CallError | undefined {
  const was = existing.context;
  const now = intent.context;
  const differences: string[] = [];
  if (was.server !== now.server) differences.push(`server "${was.server}" → "${now.server}"`);
  if (was.tool !== now.tool) differences.push(`tool "${was.tool}" → "${now.tool}"`);
  if (was.descriptorDigest !== now.descriptorDigest) differences.push('tool descriptor changed');
  if (existing.argsDigest !== intent.argsDigest) differences.push('different arguments');
  if (differences.length === 0) return undefined;
  return new CallError(
    ErrorCode.IDEMPOTENCY_CONFLICT,
    `Idempotency key "${intent.key}" was used for another call (${differences.join(', ')}); "${now.modelName}" was not run. Use a new key for a new call.`,
    {
      detail: {
        ...contextDetail(now),
        key: intent.key,
        reason: 'payload',
        differences,
        record: recordSummary(existing),
        delivery: 'not-sent',
      },
    },
  );
}

export function inProgressError(existing: JournalRecord, context: CallContext): CallError {
  return new CallError(
    ErrorCode.IDEMPOTENCY_IN_PROGRESS,
    `Idempotency key "${existing.key}" is already running (${existing.state}, held by ${existing.owner}); "${context.modelName}" was not run again. Wait for the first run's result.`,
    {
      detail: {
        ...contextDetail(context),
        key: existing.key,
        reason: 'in-progress',
        record: recordSummary(existing),
        delivery: 'not-sent',
      },
    },
  );
}

export function outcomeUnknownError(existing: JournalRecord, context: CallContext): CallError {
  return new CallError(
    ErrorCode.OUTCOME_UNKNOWN,
    `Idempotency key "${existing.key}" was sent to server "${context.server}" and no answer was recorded (${existing.error?.message ?? 'outcome unknown'}); "${context.modelName}" may have run and is not sent again. Check whether it took effect, then record the decision with resolve("${existing.key}", …).`,
    {
      detail: {
        ...contextDetail(context),
        key: existing.key,
        replayed: true,
        record: recordSummary(existing),
        delivery: 'not-sent',
      },
    },
  );
}

/** The server answered (an error response, or output the frozen schema refused): it finished. */
export function isAnswered(error: StepbindError): boolean {
  return (
    error.code === ErrorCode.INVALID_TOOL_OUTPUT ||
    (error.code === ErrorCode.SERVER_ERROR && typeof error.detail.rpcCode === 'number')
  );
}

export function corruptRecord(store: JournalStore, record: JournalRecord): JournalError {
  return new JournalError(
    ErrorCode.JOURNAL_CORRUPT,
    `The journal at ${store.location} has a COMPLETED record without an outcome for key "${record.key}".`,
    { detail: { path: store.location, reason: 'malformed', key: record.key } },
  );
}

export function resolvedResult(record: JournalRecord, resolution: Resolution): ToolCallResult {
  const who = resolution.by === undefined ? '' : ` by ${resolution.by}`;
  const note = resolution.note === undefined ? '' : `: ${resolution.note}`;
  return {
    content: [
      {
        type: 'text',
        text: `This call (${record.context.modelName}) ran; its outcome was confirmed${who}${note}. Its original result was not recorded.`,
      },
    ],
  };
}

export function resolvedReceipt(record: JournalRecord): CallReceipt {
  const c = record.context;
  return {
    stepId: c.stepId,
    server: c.server,
    tool: c.tool,
    modelName: c.modelName,
    descriptorDigest: c.descriptorDigest,
    inputSchemaDigest: '',
    outputSchemaDigest: undefined,
    generation: c.generation,
    revision: c.revision,
    policyEpoch: c.policyEpoch,
    audience: c.audience,
    catalogState: c.catalogState,
    ...(c.protocolVersion === undefined ? {} : { protocolVersion: c.protocolVersion }),
    effectClass: c.effectClass,
    outcome: 'ok',
    idempotencyKey: record.key,
    argsDigest: record.argsDigest,
    startedAt: record.createdAt,
    timings: { lockWaitMs: 0, prepareMs: 0, callMs: 0, totalMs: 0 },
  };
}
