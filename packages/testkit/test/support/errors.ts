import { isStepbindError, type StepbindError } from '@stepbind/binding';

/**
 * The typed error `promise` rejects with; throws when it resolves, and rethrows any error that is
 * not a stepbind error.
 */
export async function failure(promise: Promise<unknown>): Promise<StepbindError> {
  const error: unknown = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  if (!isStepbindError(error)) throw error instanceof Error ? error : new Error(String(error));
  return error;
}
