/**
 * The two ends of a prepared call that the journal records besides a result (DESIGN §13): a
 * replayed key's recorded outcome, and a failed run's failure, journaled unless the journal
 * already holds this run's outcome.
 *
 * @packageDocumentation
 */
import { CallError } from '../errors.js';
import type { LateDecision } from '../journal/claim.js';
import type { CallJournal } from '../journal/journal.js';
import type { CallContext, JournalRecord, RecordedOutcome } from '../journal/store.js';
import { failureOf, withRounds, type FailingCall } from './failure.js';
import type { CheckedCall } from './checks.js';
import { callContext, type CallCapture } from './receipt.js';
import type { StoreDeadline } from '../signals.js';
import type { CallRun } from './run.js';
import type { BindingState } from './state.js';
import type { CallOutcome } from './types.js';

/**
 * The outcome a replayed key returns (its recorded result and frozen receipt, `replayed: true`),
 * after recording the replay; a journal failure there is reported to `onJournalError`.
 *
 * @throws CallError the recorded failure, its detail naming the key and `replayed: true`.
 */
export async function replayOutcome(
  journal: CallJournal,
  replay: { readonly record: JournalRecord; readonly outcome: RecordedOutcome },
  context: CallContext,
  deadline: StoreDeadline,
  call: FailingCall,
  state: Pick<BindingState, 'onJournalError'>,
): Promise<CallOutcome> {
  const { record, outcome } = replay;
  try {
    await journal.replayed(record, context, { signal: deadline.signal });
  } catch (error) {
    state.onJournalError(error);
  } finally {
    deadline.end();
  }
  if (outcome.kind === 'result') {
    return { result: outcome.result, receipt: Object.freeze(outcome.receipt), replayed: true };
  }
  throw new CallError(outcome.code, outcome.message, {
    detail: {
      ...outcome.detail,
      ...call.detail({ key: record.key, replayed: true }),
    },
  });
}

/**
 * The error a run that failed with `error` ends with (delivery from its phase, MRTR rounds
 * attached), after journaling it unless the journal already holds this run's outcome; a journal
 * failure there is reported to `onJournalError`.
 */
export async function failedRun(
  run: CallRun,
  error: unknown,
  call: CheckedCall & FailingCall,
  capture: CallCapture,
  state: Pick<BindingState, 'onJournalError'>,
  deadline: () => StoreDeadline,
): Promise<CallError> {
  const failure = withRounds(failureOf(error, run.phase, call), run.rounds);
  const { journal } = run;
  if (journal !== undefined && !run.recorded) {
    const io = deadline();
    try {
      await journal.fail(
        run.claim,
        run.context ?? callContext(capture),
        failure,
        {
          argsDigest: run.argsDigest ?? null,
          key: run.key ?? null,
          ...run.rounds?.field(),
        },
        { signal: io.signal },
      );
    } catch (journalError) {
      state.onJournalError(journalError);
    } finally {
      io.end();
    }
  }
  return failure;
}

/**
 * A keyed run whose claim read nothing (DESIGN §21.6) and that failed before its `SENT` write:
 * the key, read now (bounded by the run's store deadline), decides first, as it would have at the
 * claim.
 *
 * @returns the key's decision, or undefined (the run's own failure stands).
 */
export function decideUnsent(run: CallRun): Promise<LateDecision | undefined> | undefined {
  const { claim, journal } = run;
  if (claim?.pending?.late !== true || journal === undefined) return undefined;
  const signal = run.io?.signal;
  return journal.decideUnsent(claim, signal === undefined ? {} : { signal });
}

/**
 * What a key decided late makes of the run: its recorded outcome replayed, its refusal thrown, or
 * the task an earlier run of it created polled by `resume`, with the read lock released first
 * (polling sends nothing and may take long). Nothing is sent. `deadline` bounds the replay's
 * receipt (made only for a replay).
 *
 * @throws CallError the refusal, or a replayed failure.
 */
export async function lateOutcome(
  run: CallRun,
  late: LateDecision,
  call: FailingCall,
  state: Pick<BindingState, 'onJournalError'>,
  deadline: () => StoreDeadline,
  resume: () => Promise<CallOutcome>,
): Promise<CallOutcome> {
  if (late.kind === 'refused') throw late.error;
  if (late.kind === 'replay') {
    const { journal, context } = run;
    if (journal === undefined || context === undefined) {
      throw new Error('stepbind: unreachable: a replay without a journal');
    }
    run.recorded = true;
    return await replayOutcome(journal, late, context, deadline(), call, state);
  }
  run.release?.();
  run.release = undefined;
  return await resume();
}
