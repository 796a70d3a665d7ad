/**
 * The rules `CallJournal` decides by, as plain functions: the payload comparison every path makes
 * first, which failures count as answered, and the refusals (with the record summary they carry).
 */
import type { CallReceipt, ToolCallResult } from '../call/types.js';
import { CallError, ErrorCode, JournalError, type StepbindError } from '../errors.js';
import { onAbort } from '../signals.js';
import type { BeginResult, CallIntent, Reservation } from './claim.js';
import type {
  CallContext,
  JournalRecord,
  JournalState,
  JournalStore,
  Resolution,
} from './store.js';

/**
 * The refusal for a key this process already holds for `held`: the key may run any moment, so the
 * refusal's delivery is `sent` (DESIGN §13).
 */
export function localRefusal(held: CallIntent, intent: CallIntent): CallError {
  const record: JournalRecord = {
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
  };
  return conflictOf(record, intent) ?? inProgressError(record, intent.context);
}

/**
 * Waits for another run of this process to decide `intent`'s key (`held`), or until `signal` fires.
 *
 * @returns undefined once it decided (decide again); when the signal fired first, the refusal:
 *   the held run's (in progress, or a conflict with it) for a timeout, `ABORTED` (not sent) for
 *   the caller's own abort.
 */
export function decidedOrAborted(
  held: Reservation,
  intent: CallIntent,
  signal: AbortSignal | undefined,
): Promise<BeginResult | undefined> {
  if (signal === undefined) return held.decided.then(() => undefined);
  return new Promise((resolve) => {
    const stop = onAbort(signal, () => {
      const reason: unknown = signal.reason;
      if (reason instanceof DOMException && reason.name === 'TimeoutError') {
        resolve({ kind: 'refused', error: localRefusal(held.intent, intent) });
        return;
      }
      const { context, key } = intent;
      const error = new CallError(
        ErrorCode.ABORTED,
        `"${context.modelName}" (server "${context.server}", tool "${context.tool}", idempotency key "${key}") was not sent: the caller cancelled while another run of this process held the key.`,
        { detail: { ...contextDetail(context), key, delivery: 'not-sent' } },
      );
      resolve({ kind: 'refused', error });
    });
    void held.decided.then(() => {
      stop();
      resolve(undefined);
    });
  });
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

/**
 * Whether a key in `state` may have run (or may run any moment, for a key held in progress): every
 * state but `NOT_SENT`. A refusal of such a key says `delivery: 'sent'` and never advises a new key.
 */
export function keyMayHaveRun(state: JournalState): boolean {
  return state !== 'NOT_SENT';
}

/**
 * The refusal of a repeated key whose payload differs from its record, decided by the key's state
 * first (DESIGN §13, "On a repeated key"): another server, tool or arguments is
 * `IDEMPOTENCY_CONFLICT`, with `delivery: 'sent'` when the key may have run; a changed descriptor
 * alone (the same call against an edited tool) conflicts only for a `NOT_SENT` key, and is left to
 * the state's own answer otherwise (replay, in progress, outcome unknown).
 *
 * @returns undefined when the state decides.
 */
export function conflictOf(existing: JournalRecord, intent: CallIntent): CallError | undefined {
  const was = existing.context;
  const now = intent.context;
  const differences: string[] = [];
  if (was.server !== now.server) differences.push(`server "${was.server}" → "${now.server}"`);
  if (was.tool !== now.tool) differences.push(`tool "${was.tool}" → "${now.tool}"`);
  if (existing.argsDigest !== intent.argsDigest) differences.push('different arguments');
  const mayHaveRun = keyMayHaveRun(existing.state);
  if (was.descriptorDigest !== now.descriptorDigest && !mayHaveRun) {
    differences.push('tool descriptor changed');
  }
  if (differences.length === 0) return undefined;
  const detail = {
    ...contextDetail(now),
    key: intent.key,
    reason: 'payload',
    differences,
    keyState: existing.state,
    record: recordSummary(existing),
  };
  if (!mayHaveRun) {
    return new CallError(
      ErrorCode.IDEMPOTENCY_CONFLICT,
      `Idempotency key "${intent.key}" was used for another call (${differences.join(', ')}) that was not sent; "${now.modelName}" was not run. Use a new key for a new call.`,
      { detail: { ...detail, delivery: 'not-sent' } },
    );
  }
  const ran =
    existing.state === 'COMPLETED'
      ? `ran (${storedOutcomeText(existing)})`
      : existing.state === 'OUTCOME_UNKNOWN'
        ? 'may have run (it was sent and no answer was recorded)'
        : `is running or may have run (${existing.state}, held by ${existing.owner})`;
  return new CallError(
    ErrorCode.IDEMPOTENCY_CONFLICT,
    `Idempotency key "${intent.key}" belongs to another call, "${was.modelName}" on server "${was.server}" (${differences.join(', ')}), which ${ran}; "${now.modelName}" was not run under this key. If this is a retry of that call, do not run it again: check whether it took effect${existing.state === 'OUTCOME_UNKNOWN' ? ` and record the decision with resolve("${intent.key}", …)` : ''}. Only a genuinely different call takes its own key.`,
    { detail: { ...detail, delivery: 'sent' } },
  );
}

/** The stored outcome of a `COMPLETED` record, in a few words for a message. */
function storedOutcomeText(record: JournalRecord): string {
  const outcome = record.outcome;
  if (outcome === null) return 'outcome not recorded';
  if (outcome.kind === 'error') return `answered with ${outcome.code}`;
  return outcome.receipt.outcome === 'tool-error' ? 'answered with a tool error' : 'answered ok';
}

/** The refusal of a key a live holder runs (`INTENT`/`SENT`): it may run any moment. */
export function inProgressError(existing: JournalRecord, context: CallContext): CallError {
  return new CallError(
    ErrorCode.IDEMPOTENCY_IN_PROGRESS,
    `Idempotency key "${existing.key}" is already running (${existing.state}, held by ${existing.owner}) and may already have taken effect; "${context.modelName}" was not run again. Wait for the first run's result.`,
    {
      detail: {
        ...contextDetail(context),
        key: existing.key,
        reason: 'in-progress',
        keyState: existing.state,
        ...descriptorNote(existing, context),
        record: recordSummary(existing),
        delivery: 'sent',
      },
    },
  );
}

/**
 * The refusal of an `OUTCOME_UNKNOWN` key: it may have run, so `delivery: 'sent'`, and the way out
 * is to check and `resolve`, never a new key. Also when the tool's descriptor changed since.
 */
export function outcomeUnknownError(existing: JournalRecord, context: CallContext): CallError {
  const edited =
    existing.context.descriptorDigest === context.descriptorDigest
      ? ''
      : " (the tool's descriptor changed since; that does not change what the key may have done)";
  return new CallError(
    ErrorCode.OUTCOME_UNKNOWN,
    `Idempotency key "${existing.key}" was sent to server "${context.server}" and no answer was recorded (${existing.error?.message ?? 'outcome unknown'}); "${context.modelName}" may have run and is not sent again${edited}. Check whether it took effect, then record the decision with resolve("${existing.key}", …); do not retry it under a new key.`,
    {
      detail: {
        ...contextDetail(context),
        key: existing.key,
        replayed: true,
        keyState: existing.state,
        ...descriptorNote(existing, context),
        record: recordSummary(existing),
        delivery: 'sent',
      },
    },
  );
}

/** `{ descriptorChanged: true }` when the key's record was written under another descriptor. */
function descriptorNote(
  existing: JournalRecord,
  context: CallContext,
): { readonly descriptorChanged?: true } {
  return existing.context.descriptorDigest === context.descriptorDigest
    ? {}
    : { descriptorChanged: true };
}

/** The server answered (an error response, or output the frozen schema refused): it finished. */
export function isAnswered(error: StepbindError): boolean {
  return (
    error.code === ErrorCode.INVALID_TOOL_OUTPUT ||
    (error.code === ErrorCode.SERVER_ERROR && typeof error.detail.rpcCode === 'number') ||
    // A task the server reported failed or cancelled (DESIGN §20.2) is its answer.
    (error.code === ErrorCode.SERVER_ERROR &&
      (error.detail.taskStatus === 'failed' || error.detail.taskStatus === 'cancelled'))
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

/**
 * Why `CallJournal.resolve` refuses `key`: it has no record (`existing` undefined: never used, or
 * pruned; `unknown-key`), or its outcome is known (`not-outcome-unknown`).
 */
export function unresolvableError(
  store: JournalStore,
  key: string,
  existing: JournalRecord | undefined,
): CallError {
  if (existing === undefined) {
    return new CallError(
      ErrorCode.IDEMPOTENCY_CONFLICT,
      `The journal at ${store.location} has no idempotency key "${key}" to resolve (never used, or pruned).`,
      { detail: { key, reason: 'unknown-key', delivery: 'not-sent' } },
    );
  }
  return new CallError(
    ErrorCode.IDEMPOTENCY_CONFLICT,
    `Idempotency key "${key}" is ${existing.state}, not OUTCOME_UNKNOWN: its outcome is known and needs no decision.`,
    {
      detail: {
        ...contextDetail(existing.context),
        key,
        reason: 'not-outcome-unknown',
        state: existing.state,
        keyState: existing.state,
        delivery: keyMayHaveRun(existing.state) ? 'sent' : 'not-sent',
      },
    },
  );
}
