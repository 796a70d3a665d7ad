/**
 * A {@link JournalStore} that keeps nothing (benchmarks only, never for real use: it forgets every
 * key). Every read finds nothing and every write succeeds at once; a receipt is still linked into
 * a chain (`chainReceipt`: its canonical JSON and sha256), as every store must. A keyed call over
 * it costs what the journal's rules and the keyed call path cost without any persistence: the
 * ceiling of a keyed call on any real store (issue 20, DESIGN §21.1).
 */
import type { JournalStore, ReceiptBody, ReceiptEntry } from '@stepbind/binding';
import { chainReceipt, GENESIS_ANCHOR, stampReceipt } from '@stepbind/binding/internal';

/** A new store that keeps nothing; see the file comment. */
export function nullJournalStore(): JournalStore {
  let head: { seq: number; digest: string } = { seq: 0, digest: GENESIS_ANCHOR.digest };
  const link = (body: ReceiptBody): ReceiptEntry => {
    const entry = chainReceipt(head, body);
    head = { seq: entry.seq, digest: entry.digest };
    return entry;
  };
  return {
    location: 'null (benchmarks)',
    get: () => Promise.resolve(undefined),
    insert: () => Promise.resolve(true),
    update: (record, _expected, options) =>
      Promise.resolve({
        ok: true,
        receipt:
          options?.receipt === undefined ? undefined : link(stampReceipt(options.receipt, record)),
      }),
    appendReceipt: (body) => Promise.resolve(link(body)),
    listRecords: () => Promise.resolve([]),
    readReceipts: () => Promise.resolve([]),
    anchor: () => Promise.resolve(GENESIS_ANCHOR),
    prune: () => Promise.resolve({ records: 0, receipts: 0 }),
    close: () => Promise.resolve(),
  };
}
