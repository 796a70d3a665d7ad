/**
 * The journal's side of MCP tasks (DESIGN §20.2): the task id on a key's `SENT` record, and the
 * claim that resumes polling a known task instead of sending the call again.
 *
 * @packageDocumentation
 */
import type { BeginResult, CallIntent } from './claim.js';
import { JournalClaim } from './claim.js';
import { outcomeUnknownError } from './rules.js';
import type { JournalRecord, JournalStore, StoreCallOptions } from './store.js';

/**
 * Records on the key's `SENT` record the MCP task its call created, durably (a compare-and-set on
 * the claim's version), as soon as the server answered `tools/call` with it. A claim not written
 * as `SENT`, or taken over, records nothing.
 *
 * @returns true when the task id was written.
 * @throws JournalError when the store fails.
 */
export async function recordTaskId(
  store: JournalStore,
  claim: JournalClaim,
  taskId: string,
  options: StoreCallOptions = {},
): Promise<boolean> {
  const current = claim.record;
  if (!claim.sentRecorded || claim.lost || current.state !== 'SENT') return false;
  const next: JournalRecord = { ...current, taskId, version: current.version + 1 };
  const signal = options.signal === undefined ? {} : { signal: options.signal };
  const written = await store.update(next, current.version, { durable: true, ...signal });
  if (written.ok) claim.record = next;
  return written.ok;
}

/**
 * The decision on an `OUTCOME_UNKNOWN` key no read retry claimed: when its record has the MCP task
 * its call created and the descriptor is unchanged, a claim that resumes polling that task
 * (`claim.resumeTaskId`; nothing is written now, the outcome once known completes the same
 * attempt); otherwise the `OUTCOME_UNKNOWN` refusal.
 */
export function unknownOutcome(existing: JournalRecord, intent: CallIntent): BeginResult {
  const { taskId } = existing;
  if (
    taskId === undefined ||
    existing.context.descriptorDigest !== intent.context.descriptorDigest
  ) {
    return { kind: 'refused', error: outcomeUnknownError(existing, intent.context) };
  }
  const claim = new JournalClaim(existing, intent, undefined);
  claim.sentRecorded = true;
  claim.resumeTaskId = taskId;
  return { kind: 'claimed', claim };
}
