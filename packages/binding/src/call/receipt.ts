/**
 * What a prepared call records (DESIGN §3 invariant 8, §13): the call context the journal keys its
 * records by, and the receipt of a call that ran.
 *
 * @packageDocumentation
 */
import type { CallContext } from '../journal/store.js';
import type { CatalogSnapshot } from '../snapshot/snapshot.js';
import type { BoundTool } from '../tools/view.js';
import type { InputRoundLog } from './input-rounds.js';
import type { CallReceipt, ToolCallResult } from './types.js';

/** Who captured a call: the step and the policy epoch in force at capture. */
export interface CallCapture {
  readonly bound: BoundTool;
  readonly stepId: string;
  readonly policyEpoch: number;
}

/** The `performance.now()` readings of one run, from its start to the call's answer. */
export interface RunTimings {
  readonly t0: number;
  readonly tLock: number;
  readonly tPrepared: number;
  readonly tCalled: number;
}

/** What one run adds to its receipt: its key, arguments digest, start, timings and MRTR rounds. */
export interface RunFacts {
  readonly key: string | undefined;
  readonly argsDigest: string | undefined;
  /** Epoch milliseconds when `run` was called. */
  readonly startedAt: number;
  readonly timings: RunTimings;
  readonly rounds: InputRoundLog | undefined;
  /** The MCP task the call ran as (DESIGN §20.2), if any. */
  readonly taskId?: string | undefined;
}

/** The journal's context of a call: the step, the tool, the catalog and the policy epoch. */
export function callContext({ bound, stepId, policyEpoch }: CallCapture): CallContext {
  const catalog = bound.server.catalog;
  const descriptor = bound.descriptor;
  return {
    stepId,
    server: bound.server.name,
    tool: descriptor.name,
    modelName: bound.modelName,
    descriptorDigest: descriptor.descriptorDigest,
    effectClass: descriptor.effectClass,
    generation: catalog.generation,
    revision: bound.server.revision,
    policyEpoch,
    audience: catalog.audience,
    catalogState: catalog.state,
    ...protocolOf(catalog),
  };
}

/**
 * The frozen receipt of a call that ran and returned `result` (its output already checked):
 * `totalMs` is measured now.
 */
export function receiptOf(
  { bound, stepId, policyEpoch }: CallCapture,
  run: RunFacts,
  result: ToolCallResult,
): CallReceipt {
  const catalog = bound.server.catalog;
  const descriptor = bound.descriptor;
  const { t0, tLock, tPrepared, tCalled } = run.timings;
  const timings = Object.freeze({
    lockWaitMs: tLock - t0,
    prepareMs: tPrepared - tLock,
    callMs: tCalled - tPrepared,
    totalMs: performance.now() - t0,
  });
  // One literal of a fixed shape (a spread costs a copy per call); the rare optional members are
  // put in their places after.
  const receipt = {
    stepId,
    server: bound.server.name,
    tool: descriptor.name,
    modelName: bound.modelName,
    descriptorDigest: descriptor.descriptorDigest,
    inputSchemaDigest: descriptor.inputSchemaDigest,
    outputSchemaDigest: descriptor.outputSchemaDigest,
    generation: catalog.generation,
    revision: bound.server.revision,
    policyEpoch,
    audience: catalog.audience,
    catalogState: catalog.state,
    protocolVersion: catalog.identity.protocolVersion,
    effectClass: descriptor.effectClass,
    outcome: result.isError === true ? ('tool-error' as const) : ('ok' as const),
    idempotencyKey: run.key,
    argsDigest: run.argsDigest,
    startedAt: run.startedAt,
    timings,
  };
  if (run.rounds === undefined && run.taskId === undefined && receipt.protocolVersion !== undefined)
    return Object.freeze(receipt);
  // The members in the receipt's order: no `protocolVersion` member when there is none.
  const { protocolVersion, effectClass, outcome, idempotencyKey, argsDigest, startedAt, ...rest } =
    receipt;
  const { timings: measured, ...head } = rest;
  return Object.freeze({
    ...head,
    ...(protocolVersion === undefined ? {} : { protocolVersion }),
    ...run.rounds?.field(),
    effectClass,
    ...(run.taskId === undefined ? {} : { taskId: run.taskId }),
    outcome,
    idempotencyKey,
    argsDigest,
    startedAt,
    timings: measured,
  });
}

/** The catalog's protocol version (from its server identity), as an optional field. */
function protocolOf(catalog: CatalogSnapshot): { readonly protocolVersion?: string } {
  const version = catalog.identity.protocolVersion;
  return version === undefined ? {} : { protocolVersion: version };
}
