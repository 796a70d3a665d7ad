/**
 * The state one binding shares with its prepared calls: released, calls in flight, the journal.
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode } from '../errors.js';
import type { CallJournal } from '../journal/journal.js';
import type { ToolCallResult } from './types.js';

/** @internal */
export interface BindingState {
  released: boolean;
  inFlight: number;
  onDrained: (() => void) | undefined;
  readonly journal: CallJournal | undefined;
  /** Aborts when the owner (the runtime) closes: pending `prepare` hooks stop holding their runs. */
  readonly closeSignal: AbortSignal | undefined;
  readonly onJournalError: (error: unknown) => void;
  /** Told of every result a call of the binding returned (its resource links, DESIGN §20.3). */
  onResult?: (server: string, result: ToolCallResult) => void;
}

/** @internal Calls `onDrained` once the binding is released and its last call finished. */
export function maybeDrained(state: BindingState): void {
  if (state.released && state.inFlight === 0 && state.onDrained !== undefined) {
    const done = state.onDrained;
    state.onDrained = undefined;
    done();
  }
}

/** @internal The `BINDING_RELEASED` refusal. */
export function releasedError(stepId: string, modelName: string): CallError {
  return new CallError(
    ErrorCode.BINDING_RELEASED,
    `The binding of step ${stepId} was released; "${modelName}" was not run. Call it from the current step.`,
    { detail: { stepId, modelName, delivery: 'not-sent' } },
  );
}
