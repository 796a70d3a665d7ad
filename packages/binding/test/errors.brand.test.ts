import { CallError, ErrorCode, isStepbindError, StepbindError } from '@stepbind/binding';
import { describe, expect, it } from 'vitest';

describe('the StepbindError brand', () => {
  it('recognises errors across installed copies, where instanceof cannot', () => {
    // What another copy of the package makes: same global brand, another class.
    class OtherCopyError extends Error {
      readonly code = 'STALE_CATALOG';
      readonly detail = {};
      constructor() {
        super('from another copy');
        Object.defineProperty(this, Symbol.for('io.stepbind.error'), { value: true });
      }
    }
    const foreign = new OtherCopyError();
    expect(foreign instanceof StepbindError).toBe(false);
    expect(StepbindError.isInstance(foreign)).toBe(true);
    expect(isStepbindError(foreign, ErrorCode.STALE_CATALOG)).toBe(true);
    const own = new CallError(ErrorCode.TOOL_DENIED, 'no');
    expect(StepbindError.isInstance(own)).toBe(true);
    expect(isStepbindError(own, ErrorCode.TOOL_DENIED)).toBe(true);
    expect(StepbindError.isInstance(new Error('plain'))).toBe(false);
    expect(StepbindError.isInstance({ code: 'TOOL_DENIED' })).toBe(false);
    expect(Object.keys(own)).not.toContain('io.stepbind.error');
  });
});
