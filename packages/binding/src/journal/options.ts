/**
 * The options of `CallJournal`, checked at construction.
 *
 * @packageDocumentation
 */
import * as z from 'zod/v4';
import { ConfigError, ErrorCode } from '../errors.js';
import { checkOptions, fn, sameKeys } from '../options-check.js';
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

const positiveMs = z
  .number()
  .positive()
  .describe('a number of milliseconds greater than 0 (finite)');

/** The schema of {@link CallJournalOptions} (DESIGN §17.1). */
export const callJournalOptionsSchema = z.strictObject({
  owner: z.string().min(1).describe('a non-empty string').optional(),
  retentionMs: positiveMs.optional(),
  inProgressTtlMs: positiveMs.optional(),
  isOwnerAlive: fn('(owner) => boolean | undefined').optional(),
  now: fn('() => epoch milliseconds').optional(),
  clocks: z
    .custom<JournalClocks>((v) => typeof v === 'object' && v !== null)
    .describe('an object')
    .optional(),
  pruneIntervalMs: positiveMs.optional(),
  receipts: z.enum(['all', 'keyed']).describe('"all" or "keyed"').optional(),
});
sameKeys<CallJournalOptions>()(callJournalOptionsSchema);

/** The schema of `MemoryJournalStoreOptions` (its file checks the keys match). */
export const memoryJournalStoreOptionsSchema = z.strictObject({
  maxReceipts: z.number().int().min(1).describe('an integer from 1 up').optional(),
  maxRecords: z.number().int().min(1).describe('an integer from 1 up').optional(),
  onOverCap: fn('(info) => void').optional(),
});

/**
 * @internal Checks a journal options bag against `schema` for `fn`.
 *
 * @throws ConfigError `INVALID_OPTIONS` naming every unknown or wrong option (nothing opened).
 */
export function checkJournalOptions(schema: z.ZodType, options: unknown, where: string): void {
  checkOptions(schema, options, {
    fn: where,
    as: ConfigError,
    consequence: 'Nothing was opened; fix the option and call again.',
  });
}

/**
 * @internal Checks the options of `new CallJournal`.
 *
 * @throws ConfigError `INVALID_OPTIONS` naming every unknown or wrong option.
 */
export function checkCallJournalOptions(options: unknown): void {
  checkJournalOptions(callJournalOptionsSchema, options, 'new CallJournal');
}
