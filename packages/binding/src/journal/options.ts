/**
 * The options of `CallJournal`, checked at construction.
 *
 * @packageDocumentation
 */
import { ConfigError, ErrorCode } from '../errors.js';
import type { JournalClocks } from './clock.js';

/** Options of `CallJournal`. */
export interface CallJournalOptions {
  /** This journal instance's holder id, recorded on every claim. @default `memory:<uuid>` */
  readonly owner?: string;
  /** How long `COMPLETED` and `NOT_SENT` records (and receipts) are kept. @default 86400000 (24 h) */
  readonly retentionMs?: number;
  /**
   * In-progress expiry: a key claimed (`INTENT`) by a holder that wrote nothing for this long, or
   * `SENT` for longer than the call's timeout plus this, is taken as abandoned by a dead holder.
   * @default 600000 (10 min)
   */
  readonly inProgressTtlMs?: number;
  /**
   * Tells whether the holder `owner` is still running: `false` (dead: its keys are recovered at
   * once), `true` or `undefined` (cannot tell: its in-progress expiry decides).
   * @default () => undefined
   */
  readonly isOwnerAlive?: (owner: string) => boolean | undefined;
  /**
   * The clock, epoch milliseconds, trusted as is. Unused over a store with its own clock (the
   * fleet's database). @default the wall clock at open, advanced monotonically (DESIGN §13)
   */
  readonly now?: () => number;
  /** @internal the clocks behind the default `now`. */
  readonly clocks?: JournalClocks;
  /** Expired records are pruned at most this often, on the next write. @default 60000 */
  readonly pruneIntervalMs?: number;
  /**
   * Which runs append a receipt: `all` (every outcome, keyed or not: what a durable journal is
   * for) or `keyed` (only runs with an idempotency key; unkeyed runs skip the journal entirely, so
   * the default in-memory journal costs nothing on the hot path). @default "all"
   */
  readonly receipts?: 'all' | 'keyed';
}

/** @internal `value` if it is a finite number > 0, else `INVALID_OPTIONS` naming `name`. */
export function positive(value: number, name: string): number {
  if (!Number.isFinite(value) || value <= 0) {
    throw new ConfigError(
      ErrorCode.INVALID_OPTIONS,
      `CallJournal: ${name} must be > 0 (${value}).`,
      {
        detail: { path: name },
      },
    );
  }
  return value;
}
