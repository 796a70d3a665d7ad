/**
 * Admission of one prepared call (DESIGN §5, §7 step 2): the policy epoch, revocation and the
 * approval the call needs. Checked before the `prepare` hook and again at the point of use, right
 * before the key's `SENT` record and the send, so that nothing decided while the hook waited (a
 * revocation, a new epoch, a stale fleet view, a withdrawn approval) is missed.
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode } from '../errors.js';
import type { CatalogSnapshot } from '../snapshot/snapshot.js';
import type { BoundTool } from '../tools/view.js';
import type { CallPolicy } from './types.js';

/** What admission reads: the bound tool, the live policy and the epoch captured with the step. */
export interface AdmissionSubject {
  readonly bound: BoundTool;
  readonly policy: CallPolicy;
  readonly policyEpoch: number;
  /** The call's error detail (server, tool, model name, step, `delivery: 'not-sent'`) plus `extra`. */
  readonly detail: (extra: Record<string, unknown>) => Record<string, unknown>;
}

/**
 * Whether the tool may be treated as `read`: its annotations say `readOnlyHint: true` and either
 * the application vouches for the server's annotations (`trustAnnotations`) or its catalog is
 * proven. Annotations of any other server are untrusted hints (the MCP specification says so):
 * they never exempt a call from approval and never let `retryReads` send a key again.
 */
export function trustedRead(bound: BoundTool): boolean {
  return (
    bound.descriptor.effectClass === 'read' &&
    (bound.server.trustAnnotations === true || isProven(bound.server.catalog))
  );
}

/**
 * Refuses the call when the policy epoch moved since capture or the tool was revoked, and says
 * whether it needs an approval (`approval` mode, catalog state, trusted `read`, `autoApprove`, a
 * standing approval of the policy).
 *
 * @throws CallError `TOOL_DENIED` (`reason` `policy-epoch` or `revoked`), or the policy's own error
 *   (`POLICY_STALE` from a fleet view it cannot prove current).
 */
export function admissionVerdict(subject: AdmissionSubject): {
  readonly approvalRequired: boolean;
} {
  const { bound, policy, policyEpoch } = subject;
  const server = bound.server;
  const tool = bound.descriptor.name;
  if (policy.policyEpoch !== policyEpoch) {
    throw new CallError(
      ErrorCode.TOOL_DENIED,
      `The policy changed after this step was captured (epoch ${policyEpoch} → ${policy.policyEpoch}); "${bound.modelName}" was not run. Call again from the next step.`,
      {
        detail: subject.detail({
          reason: 'policy-epoch',
          capturedEpoch: policyEpoch,
          currentEpoch: policy.policyEpoch,
        }),
      },
    );
  }
  if (policy.isRevoked(server.name, tool)) {
    throw new CallError(
      ErrorCode.TOOL_DENIED,
      `Tool "${tool}" of server "${server.name}" was revoked; "${bound.modelName}" was not run.`,
      { detail: subject.detail({ reason: 'revoked' }) },
    );
  }
  const approvalRequired =
    server.autoApprove?.has(tool) !== true &&
    needsApproval(subject) &&
    policy.isApproved?.(server.name, tool) !== true;
  return { approvalRequired };
}

/** The `APPROVAL_REQUIRED` refusal, saying whether a `prepare` hook ran without approving. */
export function approvalRequiredError(subject: AdmissionSubject, hookRan: boolean): CallError {
  const { bound } = subject;
  const server = bound.server;
  const mode = server.approval;
  const state = server.catalog.state;
  const effect = bound.descriptor.effectClass;
  const why =
    mode === 'all-writes'
      ? `server "${server.name}" requires an approval for every call that may change state`
      : `the catalog of server "${server.name}" is not proven (${state}: the server sends no catalog revision token)`;
  const untrustedRead =
    effect === 'read'
      ? ` Its readOnlyHint is the server's unverified claim; set "trustAnnotations": true for server "${server.name}" only if you vouch for its annotations.`
      : '';
  return new CallError(
    ErrorCode.APPROVAL_REQUIRED,
    `"${bound.modelName}" may change state (effect ${effect}) and ${why}; it was not run and nothing was sent.${untrustedRead} ${hookRan ? 'The prepare hook returned without calling ctx.approve().' : 'No prepare hook was given.'} Approve it with run(args, { prepare: (ctx) => ctx.approve() }) after asking the user, or opt out for this server with "approval": "none" in its configuration.`,
    {
      detail: subject.detail({
        reason: 'approval-required',
        approval: mode,
        catalogState: state,
        effectClass: effect,
      }),
    },
  );
}

/** Whether a call needs an approval under its server's `approval` mode (`ApprovalMode`). */
function needsApproval({ bound }: AdmissionSubject): boolean {
  const mode = bound.server.approval;
  if (mode === 'none' || trustedRead(bound)) return false;
  if (mode === 'all-writes') return true;
  return !isProven(bound.server.catalog);
}

function isProven(catalog: CatalogSnapshot): boolean {
  return catalog.state === 'ELIGIBLE' || catalog.state === 'SNAPSHOT_PROVEN';
}
