/**
 * The `SENT` write of a claim (DESIGN §13): durable, a compare-and-set over the claim's pending
 * expectation or its last write, and the refusal of a claim another holder overtook first.
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode } from '../errors.js';
import type { JournalClaim } from './claim.js';
import { conflictOf, contextDetail, keyMayHaveRun, recordSummary } from './rules.js';
import type { JournalRecord, JournalStore, StoreCallOptions } from './store.js';
import { notSentError } from './unavailable.js';

/** What the `SENT` write needs of its journal. */
export interface SentWriter {
  readonly store: JournalStore;
  readonly inProgressTtlMs: number;
  now(): number;
}

/**
 * Writes `claim` as `SENT` (durable), expiring `timeoutMs` plus the in-progress expiry from now.
 *
 * @returns false when the compare-and-set lost (another holder moved the key); the claim is
 *   unchanged then.
 * @throws CallError `JOURNAL_UNAVAILABLE` or `ABORTED` (not sent) when the store fails.
 */
export async function writeSent(
  j: SentWriter,
  claim: JournalClaim,
  timeoutMs: number,
  io: StoreCallOptions,
): Promise<boolean> {
  const now = j.now();
  const current = claim.record;
  const pending = claim.pending;
  const next: JournalRecord = {
    ...current,
    state: 'SENT',
    version: pending === undefined ? current.version + 1 : current.version,
    updatedAt: now,
    leaseExpiresAt: now + timeoutMs + j.inProgressTtlMs,
  };
  const { store } = j;
  let written: boolean;
  try {
    if (pending === undefined) {
      written = (await store.update(next, current.version, { durable: true, ...io })).ok;
    } else if (pending.expectedVersion === null) {
      written = await store.insert(next, { durable: true, ...io });
    } else {
      const expected = pending.expectedVersion;
      written = (await store.update(next, expected, { durable: true, ...io })).ok;
    }
  } catch (error) {
    throw notSentError(error, claim.intent);
  }
  if (!written) return false;
  claim.record = next;
  claim.pending = undefined;
  claim.sentRecorded = true;
  return true;
}

/**
 * The refusal of a deferred claim another holder overtook before its `SENT` write, saying what the
 * key is now (a conflict with the stored record, or `IDEMPOTENCY_IN_PROGRESS`, `claim-lost`).
 */
export async function claimLostError(
  store: JournalStore,
  claim: JournalClaim,
  io: StoreCallOptions,
): Promise<CallError> {
  const current = claim.record;
  const now = await store.get(claim.key, io);
  const conflict = now === undefined ? undefined : conflictOf(now, claim.intent);
  if (conflict !== undefined) return conflict;
  return new CallError(
    ErrorCode.IDEMPOTENCY_IN_PROGRESS,
    `Idempotency key "${claim.key}" was taken over by another holder before "${current.context.modelName}" was sent; it was not sent. Call again to get that run's outcome.`,
    {
      detail: {
        ...contextDetail(current.context),
        key: claim.key,
        reason: 'claim-lost',
        ...(now === undefined ? {} : { keyState: now.state, record: recordSummary(now) }),
        delivery: now !== undefined && keyMayHaveRun(now.state) ? 'sent' : 'not-sent',
      },
    },
  );
}
