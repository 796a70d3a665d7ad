import { createBinding } from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { failure, harness } from './support.js';

describe('McpBinding.approvalRequired', () => {
  it('says what run would ask for, under the approval mode and the live policy, sending nothing', () => {
    const { binding, policy, sends } = harness({ approval: 'all-writes' });
    // A write needs one; a read of an unproven catalog too (its readOnlyHint is unverified).
    expect(binding.approvalRequired('s__send')).toBe(true);
    expect(binding.approvalRequired('s__report')).toBe(true);
    policy.approved = true;
    expect(binding.approvalRequired('s__send')).toBe(false);
    expect(sends).toEqual([]);
    expect(harness({ approval: 'none' }).binding.approvalRequired('s__send')).toBe(false);
  });

  it('throws the refusal run would give (TOOL_DENIED, UNKNOWN_TOOL) instead of an answer', async () => {
    const { binding, policy } = harness({ approval: 'all-writes' });
    policy.revoked = true;
    expect(() => binding.approvalRequired('s__send')).toThrow(/revoked/);
    await expect(
      failure(Promise.resolve().then(() => binding.approvalRequired('nope'))),
    ).resolves.toMatchObject({ code: 'UNKNOWN_TOOL' });
  });
});

describe('McpBinding.journaled', () => {
  it('is true for a step with a journal and false for a bare binding', () => {
    const { binding } = harness();
    expect(binding.journaled).toBe(true);
    const bare = createBinding(
      { tools: [], servers: [], leftOut: [], byModelName: new Map() },
      { stepId: 'bare', policy: { policyEpoch: 0, isRevoked: () => false } },
    );
    expect(bare.journaled).toBe(false);
  });
});
