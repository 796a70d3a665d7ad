/**
 * The record transitions of `CallJournal` as pure functions: each takes the record as read and
 * returns the record to write next (version + 1) with the receipt that goes with it. The journal
 * decides *when* a transition applies and writes it by compare-and-set; these decide *what* it
 * writes, so every store (memory, SQLite, PostgreSQL) records the same thing.
 */
import type { InputRounds } from '../call/input-rounds.js';
import type { CallReceipt, ToolCallResult } from '../call/types.js';
import { ErrorCode, type CallError, type Delivery } from '../errors.js';
import type { CallIntent, ResolveInput } from './claim.js';
import { rememberJson, resultDigestOf } from './chain.js';
import { contextOf, isAnswered, resolvedReceipt, resolvedResult } from './rules.js';
import type {
  CallContext,
  JournalRecord,
  ReceiptBody,
  RecordedOutcome,
  Resolution,
} from './store.js';

/** What a transition needs to know about the journal that writes it. */
export interface Holder {
  /** The holder id recorded on the record. */
  readonly owner: string;
  /** How long a claim lasts without a write. */
  readonly inProgressTtlMs: number;
  /** How long a finished record is kept. */
  readonly retentionMs: number;
}

/** A record to write with the receipt that records the write. */
export interface Transition {
  readonly record: JournalRecord;
  readonly receipt: ReceiptBody;
}

/** The first claim of a key (`attempt` 1) or a new attempt over a finished one. */
export function intentRecord(
  holder: Holder,
  intent: CallIntent,
  attempt: number,
  version: number,
  now: number,
): JournalRecord {
  return {
    key: intent.key,
    state: 'INTENT',
    version,
    attempt,
    owner: holder.owner,
    // Frozen: every version of the claim's record shares it, and a store may keep its JSON text.
    context: Object.freeze(contextOf(intent.context)),
    argsDigest: intent.argsDigest,
    createdAt: now,
    updatedAt: now,
    leaseExpiresAt: now + holder.inProgressTtlMs,
    expiresAt: null,
    outcome: null,
    error: null,
    resolution: null,
  };
}

/** A new attempt on a key whose last attempt ended without an answer (`NOT_SENT`). */
export function reclaimRecord(holder: Holder, existing: JournalRecord, now: number): JournalRecord {
  // A new attempt sends anew: the task an earlier attempt created is not this attempt's.
  const { taskId: _earlier, ...rest } = existing;
  return {
    ...rest,
    state: 'INTENT',
    version: existing.version + 1,
    attempt: existing.attempt + 1,
    owner: holder.owner,
    updatedAt: now,
    leaseExpiresAt: now + holder.inProgressTtlMs,
    expiresAt: null,
    outcome: null,
    error: null,
    resolution: null,
  };
}

/**
 * A dead holder's in-progress key: `SENT` becomes `OUTCOME_UNKNOWN` (it may have run), `INTENT`
 * becomes `NOT_SENT` (nothing was sent), with a `recovery` receipt.
 */
export function recoveredRecord(holder: Holder, record: JournalRecord, now: number): Transition {
  const wasSent = record.state === 'SENT';
  const why =
    record.leaseExpiresAt <= now
      ? `held past its in-progress expiry by ${record.owner}`
      : `left by ${record.owner}, which is no longer running`;
  const next: JournalRecord = wasSent
    ? {
        ...record,
        state: 'OUTCOME_UNKNOWN',
        version: record.version + 1,
        updatedAt: now,
        leaseExpiresAt: 0,
        expiresAt: null,
        error: {
          code: ErrorCode.OUTCOME_UNKNOWN,
          message: `The request was recorded as sent, then ${why}; it may have run.`,
        },
      }
    : {
        ...record,
        state: 'NOT_SENT',
        version: record.version + 1,
        updatedAt: now,
        leaseExpiresAt: 0,
        expiresAt: now + holder.retentionMs,
        error: {
          code: 'RECOVERED',
          message: `The key was claimed, then ${why} before anything was sent.`,
        },
      };
  return {
    record: next,
    receipt: {
      ...contextOf(record.context),
      at: now,
      source: 'recovery',
      key: record.key,
      attempt: record.attempt,
      outcome: next.state,
      delivery: wasSent ? 'sent' : 'not-sent',
      replayed: false,
      argsDigest: record.argsDigest,
      resultDigest: null,
    },
  };
}

/**
 * An operator's decision on an `OUTCOME_UNKNOWN` key: `ran` makes it `COMPLETED` (with the given
 * or a synthesized result), `not-run` makes it `NOT_SENT`, with a `resolution` receipt.
 */
export function resolvedRecord(
  holder: Holder,
  existing: JournalRecord,
  input: ResolveInput,
  now: number,
): Transition {
  const resolution: Resolution = {
    outcome: input.outcome,
    by: input.by,
    note: input.note,
    at: now,
  };
  const finished = {
    ...existing,
    version: existing.version + 1,
    owner: holder.owner,
    updatedAt: now,
    expiresAt: now + holder.retentionMs,
    resolution,
  };
  const record: JournalRecord =
    input.outcome === 'ran'
      ? {
          ...finished,
          state: 'COMPLETED',
          outcome: {
            kind: 'result',
            result: input.result ?? resolvedResult(existing, resolution),
            receipt: resolvedReceipt(existing),
          },
        }
      : { ...finished, state: 'NOT_SENT' };
  return {
    record,
    receipt: {
      ...contextOf(existing.context),
      at: now,
      source: 'resolution',
      key: existing.key,
      attempt: existing.attempt,
      outcome: input.outcome,
      delivery: 'not-sent',
      replayed: false,
      argsDigest: existing.argsDigest,
      resultDigest:
        record.outcome?.kind === 'result' ? resultDigestOf(record.outcome.result) : null,
    },
  };
}

/** The receipt of a run (or a replay) of `receipt`'s call, under its claim if it had one. */
export function runReceipt(
  receipt: CallReceipt,
  claim: { readonly key: string; readonly attempt: number } | undefined,
  at: number,
  fields: Pick<ReceiptBody, 'outcome' | 'delivery' | 'replayed' | 'argsDigest' | 'resultDigest'>,
): ReceiptBody {
  return {
    stepId: receipt.stepId,
    server: receipt.server,
    tool: receipt.tool,
    modelName: receipt.modelName,
    descriptorDigest: receipt.descriptorDigest,
    effectClass: receipt.effectClass,
    generation: receipt.generation,
    revision: receipt.revision,
    policyEpoch: receipt.policyEpoch,
    audience: receipt.audience,
    catalogState: receipt.catalogState,
    ...(receipt.protocolVersion === undefined ? {} : { protocolVersion: receipt.protocolVersion }),
    at,
    source: 'run',
    key: claim?.key ?? receipt.idempotencyKey ?? null,
    attempt: claim?.attempt ?? null,
    ...fields,
    ...(receipt.inputRounds === undefined ? {} : { inputRounds: receipt.inputRounds }),
    ...(receipt.taskId === undefined ? {} : { taskId: receipt.taskId }),
  };
}

/** A run that got its answer: `COMPLETED` with the result, kept for the retention. */
export function completedRecord(
  holder: Holder,
  record: JournalRecord,
  outcome: { readonly result: ToolCallResult; readonly receipt: CallReceipt },
  now: number,
  resultText?: string,
): JournalRecord {
  const recorded: RecordedOutcome = {
    kind: 'result',
    result: outcome.result,
    receipt: outcome.receipt,
  };
  return {
    ...record,
    state: 'COMPLETED',
    updatedAt: now,
    leaseExpiresAt: 0,
    expiresAt: now + holder.retentionMs,
    // The result's text, made once for its digest, is the one the store writes (§21.1).
    outcome:
      resultText === undefined
        ? recorded
        : rememberJson(
            recorded,
            `{"kind":"result","result":${resultText},"receipt":${JSON.stringify(outcome.receipt)}}`,
          ),
    error: null,
  };
}

/**
 * A run that failed: `NOT_SENT` when nothing was written, `COMPLETED` with the error when the
 * server answered (an error result, or output that failed validation), else `OUTCOME_UNKNOWN`.
 */
export function failedRecord(
  holder: Holder,
  record: JournalRecord,
  error: CallError,
  delivery: Delivery,
  now: number,
): JournalRecord {
  const failure = { code: error.code, message: error.message };
  if (delivery === 'not-sent') {
    return {
      ...record,
      state: 'NOT_SENT',
      updatedAt: now,
      leaseExpiresAt: 0,
      expiresAt: now + holder.retentionMs,
      error: failure,
    };
  }
  if (isAnswered(error)) {
    return {
      ...record,
      state: 'COMPLETED',
      updatedAt: now,
      leaseExpiresAt: 0,
      expiresAt: now + holder.retentionMs,
      outcome: { kind: 'error', code: error.code, message: error.message, detail: error.detail },
      error: null,
    };
  }
  return {
    ...record,
    state: 'OUTCOME_UNKNOWN',
    updatedAt: now,
    leaseExpiresAt: 0,
    expiresAt: null,
    error: failure,
  };
}

/** What a failed run's receipt takes from the run itself. */
export interface FailureReceiptFields {
  readonly argsDigest: string | null;
  readonly key: string | null;
  /** The MRTR rounds answered before the failure, if any. */
  readonly inputRounds?: InputRounds | undefined;
}

/** The receipt of a failed or refused run (see {@link failedRecord} for the record). */
export function failureReceipt(
  context: CallContext,
  claim: { readonly key: string; readonly attempt: number } | undefined,
  error: CallError,
  receipt: FailureReceiptFields,
  at: number,
): ReceiptBody {
  return {
    ...contextOf(context),
    at,
    source: 'run',
    key: claim?.key ?? receipt.key,
    attempt: claim?.attempt ?? null,
    outcome: error.code,
    // A journal refusal's delivery is about its key (DESIGN §13); this run wrote nothing.
    delivery:
      error.delivery === 'sent' && error.detail['keyState'] === undefined ? 'sent' : 'not-sent',
    replayed: error.detail['replayed'] === true,
    argsDigest: receipt.argsDigest,
    resultDigest: null,
    ...(receipt.inputRounds === undefined ? {} : { inputRounds: receipt.inputRounds }),
  };
}

/**
 * The receipt of a replay: the recorded outcome returned again, nothing sent. When the tool's
 * descriptor changed since the key ran, `recordedDescriptorDigest` keeps the one it ran under.
 */
export function replayReceipt(
  record: JournalRecord,
  context: CallContext,
  at: number,
): ReceiptBody {
  const outcome = record.outcome;
  return {
    ...contextOf(context),
    at,
    source: 'run',
    key: record.key,
    attempt: record.attempt,
    outcome:
      outcome === null
        ? 'COMPLETED'
        : outcome.kind === 'result'
          ? outcome.receipt.outcome
          : outcome.code,
    delivery: 'not-sent',
    replayed: true,
    argsDigest: record.argsDigest,
    resultDigest: outcome?.kind === 'result' ? resultDigestOf(outcome.result) : null,
    ...(record.context.descriptorDigest === context.descriptorDigest
      ? {}
      : { recordedDescriptorDigest: record.context.descriptorDigest }),
  };
}
