/**
 * How `CallJournal` decides a key from its stored record (DESIGN §13): the key's state first, then
 * the payload, recovering a dead holder's key before deciding again. Shared by a claim decided at
 * `begin` and one decided late, at its `SENT` write or at the end of a run refused before it
 * (DESIGN §21.6).
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode } from '../errors.js';
import { checkChained } from './audit.js';
import type { BeginResult, CallIntent } from './claim.js';
import { conflictOf, contextDetail, corruptRecord, inProgressError } from './rules.js';
import type { JournalRecord, JournalState, JournalStore, StoreCallOptions } from './store.js';
import { unknownOutcome } from './task.js';
import { intentRecord, reclaimRecord, type Holder } from './transitions.js';

/** How many times a decision is read again after losing a compare-and-set. */
export const MAX_ROUNDS = 16;

/** The states of a key some holder is running. */
export const IN_PROGRESS: readonly JournalState[] = Object.freeze(['INTENT', 'SENT']);

/** What deciding a key needs of the journal that decides it. */
export interface Decider extends Holder {
  readonly store: JournalStore;
  /** Epoch milliseconds for the records written. */
  now(): number;
  /** The instant surely passed, for retention (expired records). */
  retentionNow(io: StoreCallOptions): Promise<number>;
  /** The instant for holders' expiries. */
  leaseNow(): number;
  /** Whether the holder of an in-progress record is alive at `now`. */
  holderAlive(record: JournalRecord, now: number): boolean;
  /** Moves a dead holder's record on (`NOT_SENT` or `OUTCOME_UNKNOWN`) with its receipt. */
  recover(record: JournalRecord, now: number, io: StoreCallOptions): Promise<unknown>;
}

/**
 * Claims `record` over `expected` (the stored record, if any): written now, or deferred.
 *
 * @returns the claim, or undefined when the write lost its compare-and-set (decide again).
 */
export type ClaimWriter = (
  record: JournalRecord,
  expected: JournalRecord | undefined,
) => Promise<BeginResult | undefined>;

/**
 * Decides `intent`'s key from its stored record (see `CallJournal.begin` for the rules), claiming
 * it through `claim` when it may run.
 *
 * @throws JournalError when the store fails or the record contradicts its receipts.
 */
export async function decideKey(
  j: Decider,
  intent: CallIntent,
  claim: ClaimWriter,
  io: StoreCallOptions,
): Promise<BeginResult> {
  const { key } = intent;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const now = j.now();
    const existing = await j.store.get(key, io);
    // Decisions (expired, holder dead) use the instants surely passed; records get `now`.
    const passed = await j.retentionNow(io);
    if (existing === undefined) {
      const claimed = await claim(intentRecord(j, intent, 1, 1, now), undefined);
      if (claimed !== undefined) return claimed;
      continue;
    }
    if (existing.expiresAt !== null && existing.expiresAt <= passed) {
      // Forgotten: the key starts over, whatever it was used for before.
      const record = intentRecord(j, intent, existing.attempt + 1, existing.version + 1, now);
      const claimed = await claim(record, existing);
      if (claimed !== undefined) return claimed;
      continue;
    }
    if (IN_PROGRESS.includes(existing.state) && !j.holderAlive(existing, j.leaseNow())) {
      // A dead or expired holder's key is recovered first, then decided by what it became.
      await j.recover(existing, now, io);
      continue;
    }
    // The key's state decides what a difference means: one that may have run is never refused
    // as not run, and a changed descriptor alone is left to the state (DESIGN §13).
    // A record its own receipts contradict (edited outside stepbind) decides nothing.
    await checkChained(j.store, existing);
    const conflict = conflictOf(existing, intent);
    if (conflict !== undefined) return { kind: 'refused', error: conflict };
    switch (existing.state) {
      case 'COMPLETED': {
        if (existing.outcome === null) throw corruptRecord(j.store, existing);
        return { kind: 'replay', record: existing, outcome: existing.outcome };
      }
      case 'NOT_SENT': {
        const claimed = await claim(reclaimRecord(j, existing, now), existing);
        if (claimed !== undefined) return claimed;
        continue;
      }
      case 'INTENT':
      case 'SENT':
        return { kind: 'refused', error: inProgressError(existing, intent.context) };
      case 'OUTCOME_UNKNOWN': {
        const sameDescriptor =
          existing.context.descriptorDigest === intent.context.descriptorDigest;
        if (intent.context.effectClass === 'read' && intent.retryReads && sameDescriptor) {
          const claimed = await claim(reclaimRecord(j, existing, now), existing);
          if (claimed !== undefined) return claimed;
          continue;
        }
        return unknownOutcome(existing, intent);
      }
    }
  }
  return { kind: 'refused', error: contendedError(intent) };
}

/** `IDEMPOTENCY_IN_PROGRESS` for a key that kept changing while it was being claimed. */
export function contendedError(intent: CallIntent): CallError {
  const { key, context } = intent;
  return new CallError(
    ErrorCode.IDEMPOTENCY_IN_PROGRESS,
    `Idempotency key "${key}" kept changing while "${context.modelName}" tried to claim it (${MAX_ROUNDS} attempts); it was not run. Try again shortly.`,
    { detail: { ...contextDetail(context), key, reason: 'contended' } },
  );
}
