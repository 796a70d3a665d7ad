import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  CallError,
  CatalogError,
  ErrorCode,
  StepbindError,
  isStepbindError,
  type Delivery,
} from '@stepbind/binding';
import { abortedError } from '@stepbind/binding/internal';

describe('typed error detail', () => {
  it('types detail by code once narrowed with isStepbindError or isInstance', () => {
    const error: unknown = new CallError(ErrorCode.UNKNOWN_TOOL, 'no such tool', {
      detail: { modelName: 'files__read', stepId: 's1', delivery: 'not-sent' },
    });
    expect(isStepbindError(error, ErrorCode.UNKNOWN_TOOL)).toBe(true);
    if (!isStepbindError(error, ErrorCode.UNKNOWN_TOOL)) return;
    expectTypeOf(error.code).toEqualTypeOf<'UNKNOWN_TOOL'>();
    expectTypeOf(error.detail.modelName).toEqualTypeOf<string | undefined>();
    expectTypeOf(error.detail.delivery).toEqualTypeOf<Delivery | undefined>();
    expect(error.detail.modelName).toBe('files__read');
    const stale: unknown = new CallError(ErrorCode.STALE_CATALOG, 'stale', {
      detail: { capturedRevision: 1, currentRevision: 2 },
    });
    if (!StepbindError.isInstance(stale, ErrorCode.STALE_CATALOG)) throw new Error('not stale');
    expectTypeOf(stale.detail.currentRevision).toEqualTypeOf<number | undefined>();
    expect(stale.detail.currentRevision).toBe(2);
    expect(StepbindError.isInstance(stale, ErrorCode.TIMEOUT)).toBe(false);
  });
});

describe('abortedError', () => {
  it('is ABORTED with the reason as cause, in the family the caller names', () => {
    const reason = new Error('user pressed stop');
    const plain = abortedError('Waiting was cancelled.', reason);
    expect(plain.code).toBe(ErrorCode.ABORTED);
    expect(plain.cause).toBe(reason);
    const discovery = abortedError('Discovery was cancelled.', reason, {
      as: CatalogError,
      detail: { server: 'files' },
    });
    expect(discovery).toBeInstanceOf(CatalogError);
    expect(discovery.detail.server).toBe('files');
  });

  it('passes a stepbind reason through when asked to keep it', () => {
    const reason = new CallError(ErrorCode.TIMEOUT, 'timed out');
    expect(abortedError('cancelled', reason, { keepStepbindReason: true })).toBe(reason);
    expect(abortedError('cancelled', reason).cause).toBe(reason);
  });
});
