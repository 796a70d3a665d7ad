/**
 * What a keyed run asks the journal for and what it gets back: the intent, the claim on a key,
 * the begin decision and a resolution of an unknown outcome.
 *
 * @packageDocumentation
 */
import type { ToolCallResult } from '../call/types.js';
import type { CallError } from '../errors.js';
import type { CallContext, JournalRecord, RecordedOutcome, StoreCallOptions } from './store.js';

/** What a keyed `run` asks the journal for. */
export interface CallIntent {
  readonly key: string;
  readonly context: CallContext;
  /** `sha256:` digest of the arguments given to `run` (the payload the key commits to). */
  readonly argsDigest: string;
  /** The server allows re-sending `read` tools whose outcome is unknown. */
  readonly retryReads: boolean;
}

/** Options of `CallJournal.begin`. */
export interface BeginOptions {
  /**
   * Write nothing yet: the claim is checked again and written directly as `SENT` by
   * `CallJournal.markSent` (one durable write instead of two). For runs with nothing between
   * the claim and the send that could take long or fail on its own (no `prepare` hook); a key
   * claimed this way is visible to other processes only from its `SENT` write on, and to this
   * process at once. @default false (an `INTENT` record is written now)
   */
  readonly deferWrite?: boolean;
  /**
   * Also read nothing yet (implies `deferWrite`): the claim is decided when it is written, by
   * `CallJournal.markSent` (an insert; only when it loses is the key read and decided), or, for a
   * run that ends before that write, by `CallJournal.decideUnsent`. The caller must act on what
   * either returns (a replay, a refusal, a task to resume): the key's state still decides first
   * (DESIGN §21.6). @default false
   */
  readonly decideLate?: boolean;
  /**
   * Bounds every store operation of the claim (the caller's signal, the call's deadline): the
   * store gives up when it fires (see `StoreCallOptions`). @default none
   */
  readonly signal?: AbortSignal;
}

/**
 * A claim not written yet: the version the stored record must still have when it is written
 * (`null`: there must be no record), and, when `late`, that the key was never read (DESIGN §21.6).
 */
export interface PendingClaim {
  readonly expectedVersion: number | null;
  readonly late?: true;
}

/** A key this journal instance holds for one `run`. Opaque outside the binding. */
export class JournalClaim {
  readonly key: string;
  /** @internal the record as last written, or to be written when `pending`. */
  record: JournalRecord;
  /**
   * @internal for a deferred claim: the version the stored record must still have when the claim
   * is written (`null`: there must be no record).
   */
  pending: PendingClaim | undefined;
  /** @internal */
  readonly intent: CallIntent;
  /**
   * @internal true once the `SENT` record is durable: the journal's key state, not a delivery (the
   * delivery of a failed run is its `CallError`'s, which only counts once this is true).
   */
  sentRecorded = false;
  /** @internal true when another holder took the key over (nothing more may be written). */
  lost = false;
  /**
   * The MCP task an earlier, crashed run of this key created (DESIGN §20.2): this claim resumes
   * polling it and sends nothing. Its record stays `OUTCOME_UNKNOWN` until the outcome is known.
   */
  resumeTaskId: string | undefined = undefined;

  /** @internal */
  constructor(record: JournalRecord, intent: CallIntent, pending: PendingClaim | undefined) {
    this.key = record.key;
    this.record = record;
    this.intent = intent;
    this.pending = pending;
  }

  /** The attempt (fencing token) of this claim. */
  get attempt(): number {
    return this.record.attempt;
  }
}

/** What `CallJournal.begin` decided. */
export type BeginResult =
  | { readonly kind: 'claimed'; readonly claim: JournalClaim }
  | { readonly kind: 'replay'; readonly record: JournalRecord; readonly outcome: RecordedOutcome }
  | { readonly kind: 'refused'; readonly error: CallError };

/**
 * What a claim begun with `decideLate` turned out to be once its key was read: the recorded
 * outcome to replay, a refusal, or (`resume`) a task an earlier run of the key created, which the
 * claim now polls instead of sending (`claim.resumeTaskId`).
 */
export type LateDecision =
  | { readonly kind: 'replay'; readonly record: JournalRecord; readonly outcome: RecordedOutcome }
  | { readonly kind: 'refused'; readonly error: CallError }
  | { readonly kind: 'resume' };

/** A decision about an `OUTCOME_UNKNOWN` key, for `CallJournal.resolve`. */
export type ResolveInput =
  | {
      /** It took effect: the key becomes `COMPLETED`, and a repeat returns `result`. */
      readonly outcome: 'ran';
      /**
       * What a repeated call returns. @default a text result saying the call ran and its original
       * result was lost
       */
      readonly result?: ToolCallResult;
      readonly by?: string;
      readonly note?: string;
    }
  | {
      /** It did not take effect: the key becomes `NOT_SENT` and may run again. */
      readonly outcome: 'not-run';
      readonly by?: string;
      readonly note?: string;
    };

/** A key a run of this process is claiming (`claimed: false`) or holds. */
export interface Reservation {
  readonly intent: CallIntent;
  claimed: boolean;
  /**
   * Resolves once the claiming run decided: at `begin`, or, for a claim that read nothing, at its
   * `SENT` write or the end of its run before it.
   */
  readonly decided: Promise<void>;
  /** Resolves {@link decided}. */
  readonly decide: () => void;
}

/** The store options of a journal call: its signal, if any. */
export function signalOf(options: StoreCallOptions): StoreCallOptions {
  const { signal, deadline } = options;
  if (signal === undefined) return {};
  return deadline === undefined ? { signal } : { signal, deadline };
}
