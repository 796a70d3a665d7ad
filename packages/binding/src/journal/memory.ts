import { ErrorCode, JournalError } from '../errors.js';
import { chainReceipt, GENESIS_ANCHOR, pruneReceipt, stampReceipt } from './chain.js';
import type {
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
  #closed = false;

  constructor(options: MemoryJournalStoreOptions = {}) {
    const max = options.maxReceipts ?? 10_000;
    if (!Number.isInteger(max) || max < 1) {
      throw new RangeError(`MemoryJournalStore: maxReceipts must be a positive integer (${max})`);
    }
    this.#maxReceipts = max;
  }

  async get(key: string): Promise<JournalRecord | undefined> {
    this.#open();
    const text = this.#records.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as JournalRecord);
  }

  async insert(record: JournalRecord, _options?: { readonly durable?: boolean }): Promise<boolean> {
    this.#open();
    if (this.#records.has(record.key)) return false;
    this.#records.set(record.key, JSON.stringify(record));
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
    this.#records.set(record.key, JSON.stringify(record));
    const receipt =
      options.receipt === undefined
        ? undefined
        : this.#append(stampReceipt(options.receipt, record));
    return { ok: true, receipt };
  }

  async appendReceipt(receipt: ReceiptBody): Promise<ReceiptEntry> {
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
