import type {
  CallJournal,
  ChainVerification,
  JournalRecord,
  JournalState,
  ReadReceiptsOptions,
  ResolveInput,
  StoredReceipt,
} from '@stepbind/binding/internal';

/**
 * What `McpRuntime.journal` hands out: the execution journal, read-only apart from the repairs an
 * operator makes (resolve an `OUTCOME_UNKNOWN` key, recover keys of dead holders, prune expired
 * records). Claiming keys and marking them sent stay with the runtime's calls, so this view cannot
 * break the journal's protocol. Frozen. Once the runtime closed, `resolve`, `recover` and `prune`
 * fail with `JournalError` `JOURNAL_UNAVAILABLE` (`detail.reason: "closed"`).
 */
export interface JournalView {
  /** Where the journal lives: the SQLite file path, the fleet database, or `memory`. */
  readonly location: string;
  /** True once the runtime closed the journal. */
  readonly closed: boolean;
  /** The record of idempotency key `key`, if any. @throws JournalError when the store fails. */
  get(key: string): Promise<JournalRecord | undefined>;
  /**
   * Every kept record, optionally only those in `filter.states`.
   * @throws JournalError when the store fails.
   */
  records(filter?: {
    readonly states?: readonly JournalState[];
  }): Promise<readonly JournalRecord[]>;
  /**
   * The kept receipts in chain order (`afterSeq`, `limit`, `key` narrow them).
   * @throws JournalError when the store fails.
   */
  receipts(options?: ReadReceiptsOptions): Promise<readonly StoredReceipt[]>;
  /** Checks the whole kept receipts chain: `{ ok: true, count, anchor, head }` or where it broke. */
  verify(): Promise<ChainVerification>;
  /**
   * Records a human or application decision about an `OUTCOME_UNKNOWN` key (same as
   * `McpRuntime.resolve`): `ran` makes a repeat return the given result, `not-run` lets it run.
   * @throws CallError `IDEMPOTENCY_IN_PROGRESS`, `IDEMPOTENCY_CONFLICT`; JournalError.
   */
  resolve(key: string, input: ResolveInput): Promise<JournalRecord>;
  /**
   * Moves keys left `INTENT`/`SENT` by dead holders to `NOT_SENT`/`OUTCOME_UNKNOWN` (the runtime
   * does this at `open`); returns the records as recovered. @throws JournalError.
   */
  recover(): Promise<readonly JournalRecord[]>;
  /**
   * Deletes expired `COMPLETED`/`NOT_SENT` records and receipts older than the retention (also done
   * by itself after writes). @throws JournalError.
   */
  prune(): Promise<{ readonly records: number; readonly receipts: number }>;
}

/** A frozen {@link JournalView} of `journal` (its methods are the journal's, bound). */
export function journalView(journal: CallJournal): JournalView {
  const store = journal.store;
  return Object.freeze({
    location: store.location,
    get closed() {
      return journal.closed;
    },
    get: (key: string) => journal.get(key),
    records: async (filter?: { readonly states?: readonly JournalState[] }) =>
      Object.freeze(await store.listRecords(filter)),
    receipts: async (options?: ReadReceiptsOptions) =>
      Object.freeze(await store.readReceipts(options)),
    verify: () => journal.verify(),
    resolve: (key: string, input: ResolveInput) => journal.resolve(key, input),
    recover: () => journal.recover(),
    prune: () => journal.prune(),
  });
}
