import {
  CallError,
  ErrorCode,
  type CallContext,
  type CallReceipt,
  type ReceiptBody,
} from '@stepbind/binding';

/** A call context for tool `tool` of server `s`. */
export function context(tool = 'write', overrides: Partial<CallContext> = {}): CallContext {
  return {
    stepId: 'step-1',
    server: 's',
    tool,
    modelName: `s__${tool}`,
    descriptorDigest: `sha256:${tool}`,
    effectClass: tool.startsWith('read') ? 'read' : 'write',
    generation: 1,
    revision: 1,
    policyEpoch: 0,
    audience: 'default',
    catalogState: 'UNVERSIONED_OBSERVATION',
    ...overrides,
  };
}

/** A receipt body, for chain tests. */
export function body(i: number, key: string | null = `k${i}`): ReceiptBody {
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

/** The receipt `PreparedCall.run` would build for a call of `c`. */
export function callReceipt(c: CallContext, key: string | undefined): CallReceipt {
  return {
    stepId: c.stepId,
    server: c.server,
    tool: c.tool,
    modelName: c.modelName,
    descriptorDigest: c.descriptorDigest,
    inputSchemaDigest: 'sha256:in',
    outputSchemaDigest: undefined,
    generation: c.generation,
    revision: c.revision,
    policyEpoch: c.policyEpoch,
    audience: c.audience,
    catalogState: c.catalogState,
    effectClass: c.effectClass,
    outcome: 'ok',
    idempotencyKey: key,
    argsDigest: 'sha256:args',
    startedAt: 0,
    timings: { lockWaitMs: 0, prepareMs: 0, callMs: 0, totalMs: 0 },
  };
}

/** A call failure with the given delivery (what a ToolCaller reports). */
export function failure(
  code: ErrorCode,
  delivery: 'sent' | 'not-sent',
  extra: Record<string, unknown> = {},
): CallError {
  return new CallError(code, `${code} (${delivery})`, {
    detail: { server: 's', delivery, ...extra },
  });
}

export { ErrorCode };
