import { isStepbindError, type CallError } from '@stepbind/binding';
import { expect } from 'vitest';

/** The typed error `promise` rejects with; fails the test when it resolves or rejects otherwise. */
export async function failure(promise: Promise<unknown>): Promise<CallError> {
  const error: unknown = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  expect(isStepbindError(error)).toBe(true);
  return error as CallError;
}
