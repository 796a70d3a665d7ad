import { ConfigError, ErrorCode, JournalError } from '../errors.js';
import { chainReceipt, GENESIS_ANCHOR, pruneReceipt, stampReceipt } from './chain.js';
import { sameKeys } from '../options-check.js';
import { checkJournalOptions, memoryJournalStoreOptionsSchema } from './options.js';
import type {
  StoreCallOptions,
  ChainAnchor,
  JournalRecord,
  JournalState,
  JournalStore,
  PruneOptions,
  ReadReceiptsOptions,
  ReceiptBody,
  ReceiptEntry,
  StoredReceipt,
  UpdateResult,
} from './store.js';

/** Options of {@link MemoryJournalStore}. */
export interface MemoryJournalStoreOptions {
  /**
   * Receipts kept; past it, the oldest tenth is dropped from the start of the chain at once (the
   * anchor moves, and a `prune` receipt names it), so a long-lived process does not grow without
   * bound. @default 10000
   */
  readonly maxReceipts?: number;
  /**
   * Idempotency records kept. Past it, the least recently written `COMPLETED` and `NOT_SENT`
   * records are dropped (down to 90% of the cap) before their retention ends, as `prune` would
   * drop them once expired: a dropped key starts over. A key in progress (`INTENT`, `SENT`) or
   * `OUTCOME_UNKNOWN` is never dropped; when only those are left the store grows past the cap and
   * calls `onOverCap`. @default 10000
   */
  readonly maxRecords?: number;
  /**
   * Called when the records are over `maxRecords` and none can be dropped (every one is in
   * progress or `OUTCOME_UNKNOWN`: `resolve` them); again after each further 10% of growth.
   * Must not throw. @default none
   */
  readonly onOverCap?: (info: MemoryJournalOverCap) => void;
}
sameKeys<MemoryJournalStoreOptions>()(memoryJournalStoreOptionsSchema);

/** What {@link MemoryJournalStoreOptions.onOverCap} reports. */
export interface MemoryJournalOverCap {
  /** Records kept now. */
  readonly records: number;
  readonly maxRecords: number;
}

/**
 * The in-process {@link JournalStore}: the same semantics as a durable store (records are kept as
 * JSON text, so what comes back is a copy of what was written), lost when the process ends.
 */
export class MemoryJournalStore implements JournalStore {
  readonly location = 'memory';
  readonly #records = new Map<string, string>();
  #receipts: StoredReceipt[] = [];
  /** The key of each kept receipt (same index), so reading one key's receipts parses nothing. */
  #receiptKeys: (string | null)[] = [];
  #anchor: ChainAnchor = GENESIS_ANCHOR;
  #head: ChainAnchor = GENESIS_ANCHOR;
  readonly #maxReceipts: number;
  readonly #maxRecords: number;
  readonly #onOverCap: ((info: MemoryJournalOverCap) => void) | undefined;
  /** Records are swept for droppable ones once there are more than this. */
  #sweepAbove: number;
  #closed = false;

  constructor(options: MemoryJournalStoreOptions = {}) {
    checkJournalOptions(memoryJournalStoreOptionsSchema, options, 'new MemoryJournalStore');
    this.#maxReceipts = positiveInteger(options.maxReceipts ?? 10_000, 'maxReceipts');
    this.#maxRecords = positiveInteger(options.maxRecords ?? 10_000, 'maxRecords');
    this.#sweepAbove = this.#maxRecords;
    this.#onOverCap = options.onOverCap;
  }

  // In memory nothing waits: the store options (a signal) are accepted and not needed.
  async get(key: string, _options?: StoreCallOptions): Promise<JournalRecord | undefined> {
    this.#open();
    const text = this.#records.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as JournalRecord);
  }

  async insert(record: JournalRecord, _options?: { readonly durable?: boolean }): Promise<boolean> {
    this.#open();
    if (this.#records.has(record.key)) return false;
    this.#records.set(record.key, JSON.stringify(record));
    if (this.#records.size > this.#sweepAbove) this.#sweep();
    return true;
  }

  async update(
    record: JournalRecord,
    expectedVersion: number,
    options: { readonly receipt?: ReceiptBody; readonly durable?: boolean } = {},
  ): Promise<UpdateResult> {
    this.#open();
    const text = this.#records.get(record.key);
    const current = text === undefined ? undefined : (JSON.parse(text) as JournalRecord);
    if (current?.version !== expectedVersion) return { ok: false, current };
    // Re-inserted, so the map's order is the order of last writes (the sweep drops the oldest).
    this.#records.delete(record.key);
    this.#records.set(record.key, JSON.stringify(record));
    const receipt =
      options.receipt === undefined
        ? undefined
        : this.#append(stampReceipt(options.receipt, record));
    return { ok: true, receipt };
  }

  async appendReceipt(receipt: ReceiptBody, _options?: StoreCallOptions): Promise<ReceiptEntry> {
    this.#open();
    return this.#append(receipt);
  }

  async listRecords(
    filter: { readonly states?: readonly JournalState[] } = {},
  ): Promise<JournalRecord[]> {
    this.#open();
    const out: JournalRecord[] = [];
    for (const text of this.#records.values()) {
      const record = JSON.parse(text) as JournalRecord;
      if (filter.states === undefined || filter.states.includes(record.state)) out.push(record);
    }
    out.sort((a, b) => a.createdAt - b.createdAt);
    return out;
  }

  async readReceipts(options: ReadReceiptsOptions = {}): Promise<StoredReceipt[]> {
    this.#open();
    const after = options.afterSeq ?? 0;
    const out: StoredReceipt[] = [];
    for (const [i, receipt] of this.#receipts.entries()) {
      if (receipt.seq <= after) continue;
      if (options.key !== undefined && this.#receiptKeys[i] !== options.key) continue;
      out.push(receipt);
      if (options.limit !== undefined && out.length >= options.limit) break;
    }
    return out;
  }

  async anchor(): Promise<ChainAnchor> {
    this.#open();
    return this.#anchor;
  }

  async head(): Promise<ChainAnchor> {
    this.#open();
    return this.#head;
  }

  async prune(
    options: PruneOptions,
  ): Promise<{ readonly records: number; readonly receipts: number }> {
    this.#open();
    let records = 0;
    for (const [key, text] of this.#records) {
      const record = JSON.parse(text) as JournalRecord;
      if (record.expiresAt !== null && record.expiresAt <= options.now) {
        this.#records.delete(key);
        records++;
      }
    }
    let drop = 0;
    while (drop < this.#receipts.length) {
      const receipt = this.#receipts[drop] as StoredReceipt;
      if ((JSON.parse(receipt.text) as ReceiptBody).at >= options.receiptsBefore) break;
      drop++;
    }
    this.#dropReceipts(drop, options.now);
    return { records, receipts: drop };
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  #append(body: ReceiptBody): ReceiptEntry {
    const entry = this.#push(body);
    if (this.#receipts.length > this.#maxReceipts) {
      const tenth = Math.max(1, Math.floor(this.#maxReceipts / 10));
      this.#dropReceipts(this.#receipts.length - this.#maxReceipts + tenth, body.at);
    }
    return entry;
  }

  /** Drops the oldest `count` receipts and chains the `prune` receipt naming the new anchor. */
  #dropReceipts(count: number, at: number): void {
    if (count <= 0) return;
    const last = this.#receipts[count - 1] as StoredReceipt;
    this.#anchor = Object.freeze({ seq: last.seq, digest: last.digest });
    this.#receipts = this.#receipts.slice(count);
    this.#receiptKeys = this.#receiptKeys.slice(count);
    this.#push(pruneReceipt(this.#anchor, at));
  }

  /** Chains `body` after the head. */
  #push(body: ReceiptBody): ReceiptEntry {
    const entry = chainReceipt(this.#head, body);
    this.#receipts.push({
      seq: entry.seq,
      prevDigest: entry.prevDigest,
      digest: entry.digest,
      text: entry.text,
    });
    this.#receiptKeys.push(body.key);
    this.#head = { seq: entry.seq, digest: entry.digest };
    return entry;
  }

  /**
   * Drops the least recently written prunable records down to 90% of the cap (so sweeps are
   * rare); never a key that may be running or of unknown outcome.
   */
  #sweep(): void {
    const target = this.#maxRecords - Math.floor(this.#maxRecords / 10);
    for (const [key, text] of this.#records) {
      if (this.#records.size <= target) break;
      const state = (JSON.parse(text) as JournalRecord).state;
      if (state === 'COMPLETED' || state === 'NOT_SENT') this.#records.delete(key);
    }
    const size = this.#records.size;
    if (size <= this.#maxRecords) {
      this.#sweepAbove = this.#maxRecords;
      return;
    }
    // Only keys that must not be forgotten are left over the cap: grow, and say so.
    this.#sweepAbove = size + Math.max(1, Math.floor(this.#maxRecords / 10));
    this.#onOverCap?.({ records: size, maxRecords: this.#maxRecords });
  }

  #open(): void {
    if (this.#closed) {
      throw new JournalError(
        ErrorCode.JOURNAL_UNAVAILABLE,
        'The in-memory journal is closed; open a new runtime.',
        { detail: { path: 'memory', reason: 'closed' } },
      );
    }
  }
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new ConfigError(
      ErrorCode.INVALID_OPTIONS,
      `MemoryJournalStore: ${name} must be a positive integer (${value}).`,
      { detail: { option: name, value } },
    );
  }
  return value;
}
