/**
 * The execution journal's storage contract: idempotency records with compare-and-set transitions,
 * and a hash-chained receipts log. Pure types; {@link MemoryJournalStore} is the in-process
 * implementation and `@stepbind/runtime` ships a durable one on SQLite. The contract assumes
 * neither a single process nor a single machine, so a shared database (PostgreSQL) can implement
 * it for a fleet: keys are unique store-wide, every change is a compare-and-set on `version`, and
 * receipts are appended to one chain in the order the store commits them.
 *
 * @packageDocumentation
 */
import type { InputRounds } from '../call/input-rounds.js';
import type { CallReceipt, ToolCallResult } from '../call/types.js';
import type { Delivery, ErrorCode } from '../errors.js';
import type { EffectClass } from '../snapshot/snapshot.js';

/**
 * Where an idempotency key stands.
 *
 * - `INTENT`: claimed, durable, not sent yet (a dead holder's `INTENT` becomes `NOT_SENT`).
 * - `SENT`: recorded durably just before the request is written (a dead holder's `SENT` becomes
 *   `OUTCOME_UNKNOWN`: the request may have reached the server).
 * - `COMPLETED`: the server answered; the result (or the answered error) and receipt are stored.
 * - `NOT_SENT`: refused or failed before anything was written; the key may run again.
 * - `OUTCOME_UNKNOWN`: sent, and no answer was recorded (crash, timeout, connection lost). Never
 *   re-sent for a tool that is not `read`; a `resolve` decision moves it on. Never expires.
 */
export type JournalState = 'INTENT' | 'SENT' | 'COMPLETED' | 'NOT_SENT' | 'OUTCOME_UNKNOWN';

/** Every {@link JournalState}, in lifecycle order. */
export const JOURNAL_STATES: readonly JournalState[] = Object.freeze([
  'INTENT',
  'SENT',
  'COMPLETED',
  'NOT_SENT',
  'OUTCOME_UNKNOWN',
]);

/** The catalog, policy and step a call ran under; shared by records and receipts. */
export interface CallContext {
  readonly stepId: string;
  readonly server: string;
  readonly tool: string;
  readonly modelName: string;
  readonly descriptorDigest: string;
  readonly effectClass: EffectClass;
  readonly generation: number;
  readonly revision: number;
  readonly policyEpoch: number;
  readonly audience: string;
  readonly catalogState: string;
  /**
   * The protocol version the server's connection spoke (`2026-07-28`, `2025-11-25`, ...), when
   * known. Absent in records and receipts written before it was recorded.
   */
  readonly protocolVersion?: string;
}

/** What a key's first use recorded: what the call finally did. */
export type RecordedOutcome =
  | {
      readonly kind: 'result';
      readonly result: ToolCallResult;
      readonly receipt: CallReceipt;
    }
  | {
      /** The server answered with an error (JSON-RPC error, or output that failed validation). */
      readonly kind: 'error';
      readonly code: ErrorCode;
      readonly message: string;
      readonly detail: Readonly<Record<string, unknown>>;
    };

/** A human or application decision about an `OUTCOME_UNKNOWN` key (see `CallJournal.resolve`). */
export interface Resolution {
  /** `ran`: it took effect (the key becomes `COMPLETED`); `not-run`: it did not (`NOT_SENT`). */
  readonly outcome: 'ran' | 'not-run';
  /** Who decided (an operator, a reconciliation job). */
  readonly by: string | undefined;
  readonly note: string | undefined;
  /** Epoch milliseconds of the decision. */
  readonly at: number;
}

/** One idempotency key. Immutable: every change writes a new record with `version + 1`. */
export interface JournalRecord {
  readonly key: string;
  readonly state: JournalState;
  /** Compare-and-set token: every write increments it; a store refuses a stale expectation. */
  readonly version: number;
  /** Fencing token: incremented by every claim of the key (the first claim is 1). */
  readonly attempt: number;
  /** The journal instance holding or last moving the key (`host:pid:random`). */
  readonly owner: string;
  readonly context: CallContext;
  /** `sha256:` digest of the canonical JSON of the arguments given to `run`. */
  readonly argsDigest: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** `INTENT`/`SENT`: when the holder is presumed dead (the in-progress expiry). Else 0. */
  readonly leaseExpiresAt: number;
  /** `COMPLETED`/`NOT_SENT`: when the record may be pruned. `null`: never (all other states). */
  readonly expiresAt: number | null;
  /** `COMPLETED` only. */
  readonly outcome: RecordedOutcome | null;
  /** Why the key is `NOT_SENT` or `OUTCOME_UNKNOWN`. */
  readonly error: { readonly code: string; readonly message: string } | null;
  readonly resolution: Resolution | null;
  /**
   * The MCP task the key's call created (DESIGN §20.2), recorded as soon as the server answered
   * `tools/call` with it: a repeated run of an `OUTCOME_UNKNOWN` key with a task id resumes polling
   * that task instead of failing. Absent for calls that did not run as tasks.
   */
  readonly taskId?: string;
}

/**
 * Where a receipt came from. `prune`: the store deleted a prefix of the chain; the receipt names
 * the new anchor (`anchor`), so a prefix deleted by anything else shows (a forged anchor has no
 * `prune` receipt naming it). Its call context fields are empty.
 */
export type ReceiptSource = 'run' | 'recovery' | 'resolution' | 'prune';

/**
 * One receipt: what a `run` (or a recovery or resolution) did, bound to the catalog and policy it
 * ran under. Its canonical JSON is what the chain digests.
 */
export interface ReceiptBody extends CallContext {
  /** Epoch milliseconds when the outcome was recorded. */
  readonly at: number;
  readonly source: ReceiptSource;
  /** Idempotency key, or `null` for a call without one. */
  readonly key: string | null;
  /** The key's attempt this receipt belongs to, or `null`. */
  readonly attempt: number | null;
  /**
   * `run`: `ok`, `tool-error` or the error code; `recovery`: the state the key was moved to
   * (`NOT_SENT`, `OUTCOME_UNKNOWN`); `resolution`: `ran` or `not-run`.
   */
  readonly outcome: string;
  /** Whether this run wrote a request to the server. */
  readonly delivery: Delivery;
  /** True when the result came from the journal (nothing was sent). */
  readonly replayed: boolean;
  readonly argsDigest: string | null;
  /** `sha256:` of the result's JSON as recorded, for `ok`/`tool-error`; else `null`. */
  readonly resultDigest: string | null;
  /**
   * The run's MRTR rounds (keys, kinds, outcomes; never answers), also on a failed run. Absent
   * when there were none, and in receipts written before it was recorded.
   */
  readonly inputRounds?: InputRounds;
  /**
   * A replay whose key ran under another descriptor digest of the same tool (an edited
   * description): the digest it ran under (`descriptorDigest` is the current one). Absent
   * otherwise.
   */
  readonly recordedDescriptorDigest?: string;
  /**
   * The state the key's record was moved to in the transaction that appended this receipt, stamped
   * by the store's `update` (see {@link stampReceipt}); absent on receipts appended alone (refusals,
   * replays, runs whose claim was never written) and in receipts written before it was recorded.
   */
  readonly state?: JournalState;
  /** `prune` receipts only: the anchor the kept chain starts from after that prune. */
  readonly anchor?: ChainAnchor;
  /** The MCP task the run's call ran as (DESIGN §20.2); absent when it ran as none. */
  readonly taskId?: string;
}

/** A receipt as a store keeps it: the exact text that was digested. */
export interface StoredReceipt {
  /** 1-based position in the chain. */
  readonly seq: number;
  /** Digest of the previous receipt (the anchor's for the first kept one). */
  readonly prevDigest: string;
  readonly digest: string;
  /** Canonical JSON of the {@link ReceiptBody}. */
  readonly text: string;
}

/** A receipt with its parsed body. */
export interface ReceiptEntry extends StoredReceipt {
  readonly body: ReceiptBody;
}

/** Where the kept chain starts: the last pruned receipt (`seq` 0 and the genesis digest if none). */
export interface ChainAnchor {
  readonly seq: number;
  readonly digest: string;
}

/** The result of {@link JournalStore.update}. */
export type UpdateResult =
  | { readonly ok: true; readonly receipt: ReceiptEntry | undefined }
  | { readonly ok: false; readonly current: JournalRecord | undefined };

/**
 * The last argument of every {@link JournalStore} operation a call waits for. A store that can
 * cancel (PostgreSQL) gives up when `signal` fires, rejecting with `JOURNAL_UNAVAILABLE`
 * (`detail.reason: 'timeout'`, when the signal's reason is a `TimeoutError`) or `ABORTED`, and
 * never leaves the abandoned work running; a synchronous local store (SQLite) may ignore it. An
 * abandoned write may still have committed: callers treat it as possibly written (DESIGN §13).
 */
export interface StoreCallOptions {
  readonly signal?: AbortSignal;
  /**
   * The monotonic instant (`performance.now()`) at which `signal` fires for a timeout, when the
   * caller knows it. A store whose writes can outlive their caller (a database that stops
   * answering, then answers) may refuse there a `durable` write that would take effect after
   * it, so that a write its caller gave up on before a send does not commit later (DESIGN §21.6).
   */
  readonly deadline?: number;
}

/**
 * A clock a store can vouch for (the database's, for a store many hosts share): epoch
 * milliseconds, and how far it may be off (half the round trip it was measured over). A journal
 * over a store with a clock takes all its time from it (DESIGN §15).
 */
export interface StoreClock {
  now(): number;
  readonly uncertaintyMs: number;
}

/** Options of {@link JournalStore.prune}. */
export interface PruneOptions extends StoreCallOptions {
  /** Records whose `expiresAt` is at or before this are deleted. */
  readonly now: number;
  /** Receipts recorded (`at`) before this are deleted from the start of the chain. */
  readonly receiptsBefore: number;
  /**
   * The journal's retention: a store with a {@link StoreClock} prunes on its own clock (records
   * expired by it, receipts older than this by it) and never later than `now`/`receiptsBefore`.
   */
  readonly retentionMs?: number;
}

/** Options of {@link JournalStore.readReceipts}. */
export interface ReadReceiptsOptions {
  /** Only receipts with a larger `seq`. @default 0 */
  readonly afterSeq?: number;
  /** At most this many, in `seq` order. @default all */
  readonly limit?: number;
  /** Only receipts of this idempotency key. */
  readonly key?: string;
}

/**
 * Storage for the execution journal. Every method is atomic on its own; a store never holds a
 * half-written record or receipt. Methods reject with a `JournalError` when the storage fails.
 */
export interface JournalStore {
  /** A human-readable location (a file path, `memory`), for messages. */
  readonly location: string;
  /** The store's own clock, when it has one (a shared database's); see {@link StoreClock}. */
  readonly clock?: StoreClock;
  /**
   * The newest time this store recorded (records' `updatedAt`), or `undefined` when empty: a
   * journal does not trust a wall clock that puts its newest records past their retention at
   * open (DESIGN §13). Optional: a store without it gets no such guard.
   */
  newestWrite?(options?: StoreCallOptions): Promise<number | undefined>;
  /** The record of `key`, if any. */
  get(key: string, options?: StoreCallOptions): Promise<JournalRecord | undefined>;
  /**
   * Inserts a new record. Resolves to `false` (nothing written) when the key exists. `durable`
   * as for {@link update}.
   */
  insert(
    record: JournalRecord,
    options?: { readonly durable?: boolean } & StoreCallOptions,
  ): Promise<boolean>;
  /**
   * Replaces the record of `record.key` if its stored `version` is `expectedVersion`, and appends
   * `receipt` to the chain in the same atomic step. `durable: true` asks the store to make this
   * write survive a power loss before resolving (the write that precedes a send).
   */
  update(
    record: JournalRecord,
    expectedVersion: number,
    options?: { readonly receipt?: ReceiptBody; readonly durable?: boolean } & StoreCallOptions,
  ): Promise<UpdateResult>;
  /** Appends one receipt at the end of the chain. */
  appendReceipt(receipt: ReceiptBody, options?: StoreCallOptions): Promise<ReceiptEntry>;
  /** Records in any of `states` (every record when omitted), oldest first. */
  listRecords(filter?: { readonly states?: readonly JournalState[] }): Promise<JournalRecord[]>;
  /** Receipts in chain order. */
  readReceipts(options?: ReadReceiptsOptions): Promise<StoredReceipt[]>;
  /** Where the kept chain starts. */
  anchor(): Promise<ChainAnchor>;
  /**
   * The chain head record: seq and digest of the newest receipt ever appended, written in the
   * transaction of every append (and of every prune), so a deleted newest receipt shows. Stores
   * without one (older custom stores) omit it or resolve `undefined`; verification then cannot
   * detect truncation at the end.
   */
  head?(): Promise<ChainAnchor | undefined>;
  /**
   * Deletes expired `COMPLETED` and `NOT_SENT` records and the receipts recorded before
   * `receiptsBefore`, moving the anchor to the last receipt deleted and appending, in the same
   * transaction, a `prune` receipt ({@link pruneReceipt}) that names the new anchor.
   */
  prune(options: PruneOptions): Promise<{ readonly records: number; readonly receipts: number }>;
  /** Releases the storage. Idempotent. Later calls reject. */
  close(): Promise<void>;
}
