import type { CallContext, JournalRecord, ReceiptBody } from '@stepbind/binding';

/** The call context of a write tool `tool` of server `s` (step `step-1`, generation 1). */
export function context(tool = 'write_doc'): CallContext {
  return {
    stepId: 'step-1',
    server: 's',
    tool,
    modelName: `s__${tool}`,
    descriptorDigest: `sha256:${tool}`,
    effectClass: 'write',
    generation: 1,
    revision: 1,
    policyEpoch: 0,
    audience: 'default',
    catalogState: 'UNVERSIONED_OBSERVATION',
  };
}

/** A journal record of `key` in state INTENT, with `overrides` applied. */
export function record(key: string, overrides: Partial<JournalRecord> = {}): JournalRecord {
  return {
    key,
    state: 'INTENT',
    version: 1,
    attempt: 1,
    owner: 'test:1:owner',
    context: context(),
    argsDigest: 'sha256:args',
    createdAt: 1_000,
    updatedAt: 1_000,
    leaseExpiresAt: 2_000,
    expiresAt: null,
    outcome: null,
    error: null,
    resolution: null,
    ...overrides,
  };
}

/** The `i`-th receipt body of a successful, sent run of `key` (`null`: a run without a key). */
export function receipt(i: number, key: string | null = `k${i}`): ReceiptBody {
  return {
    ...context(),
    at: 1_000 + i,
    source: 'run',
    key,
    attempt: key === null ? null : 1,
    outcome: 'ok',
    delivery: 'sent',
    replayed: false,
    argsDigest: `sha256:${i}`,
    resultDigest: null,
  };
}
