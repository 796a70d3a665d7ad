import {
  abortedError as abortOf,
  ErrorCode,
  RuntimeError,
  StepbindError,
} from '@stepbind/binding/internal';

/** `RUNTIME_CLOSED`: what every operation of a closed runtime throws. */
export function closedError(): RuntimeError {
  return new RuntimeError(ErrorCode.RUNTIME_CLOSED, 'The MCP runtime is closed; open a new one.');
}

/** The error of a cancelled refresh: the abort reason when it is typed, else `ABORTED`. */
export function abortedError(reason: unknown): StepbindError {
  return abortOf('The refresh was cancelled; nothing was published.', reason, {
    as: RuntimeError,
    keepStepbindReason: true,
  });
}

/** A typed error for anything a server start or listing threw (`SERVER_START_FAILED` if untyped). */
export function toStepbindError(error: unknown): StepbindError {
  if (error instanceof StepbindError) return error;
  return new RuntimeError(
    ErrorCode.SERVER_START_FAILED,
    error instanceof Error ? error.message : String(error),
    { cause: error },
  );
}

/** One signal that aborts when any of `signals` does. */
export function combineSignals(...signals: (AbortSignal | undefined)[]): AbortSignal {
  const present = signals.filter((s): s is AbortSignal => s !== undefined);
  return present.length === 1 && present[0] !== undefined ? present[0] : AbortSignal.any(present);
}
