import {
  verifyChain,
  type JournalStore,
  type ReceiptBody,
  type StoredReceipt,
} from '@stepbind/binding/internal';
import { openSqliteJournal } from '../journal/sqlite.js';

/** The outcome of a `stepbind receipts` command: what to print and the exit code. */
export interface ReceiptsReport {
  readonly code: number;
  readonly stdout: string;
}

/**
 * `stepbind receipts verify --journal FILE`: checks the whole kept chain. Exit code 0 only for an
 * intact chain; 1 with the first broken receipt and why.
 *
 * @throws JournalError when the file cannot be opened as a journal.
 */
export async function verifyReceipts(
  path: string | JournalStore, // or an open store (closed here)
  json: boolean,
): Promise<ReceiptsReport> {
  const store = typeof path === 'string' ? openSqliteJournal({ path, readOnly: true }) : path;
  try {
    const verdict = verifyChain(await store.anchor(), await store.readReceipts());
    if (json) return { code: verdict.ok ? 0 : 1, stdout: `${JSON.stringify(verdict)}\n` };
    const from =
      verdict.anchor.seq === 0
        ? 'from the start'
        : `from receipt ${verdict.anchor.seq + 1} (older ones were pruned)`;
    return verdict.ok
      ? {
          code: 0,
          stdout: `✔ ${store.location}: ${verdict.count} receipt${verdict.count === 1 ? '' : 's'} verified ${from}; head ${verdict.head.seq} ${verdict.head.digest}\n`,
        }
      : {
          code: 1,
          stdout: `✘ ${store.location}: the receipts chain is broken at receipt ${verdict.seq} (${verdict.reason}): ${verdict.message}. ${verdict.count} receipt${verdict.count === 1 ? '' : 's'} before it verified ${from}.\n`,
        };
  } finally {
    await store.close();
  }
}

/**
 * `stepbind receipts list --journal FILE [--json] [--key K]`: the kept receipts in chain order,
 * one line each (or a JSON array of `{ seq, digest, prevDigest, ...body }`).
 *
 * @throws JournalError when the file cannot be opened as a journal.
 */
export async function listReceipts(
  path: string | JournalStore, // or an open store (closed here)
  options: { readonly json: boolean; readonly key?: string },
): Promise<ReceiptsReport> {
  const store = typeof path === 'string' ? openSqliteJournal({ path, readOnly: true }) : path;
  try {
    const receipts = await store.readReceipts(
      options.key === undefined ? {} : { key: options.key },
    );
    const rows = receipts.map((r) => ({ r, body: parse(r) }));
    if (options.json) {
      const out = rows.map(({ r, body }) => ({
        seq: r.seq,
        digest: r.digest,
        prevDigest: r.prevDigest,
        ...(body ?? { unreadable: r.text }),
      }));
      return { code: 0, stdout: `${JSON.stringify(out)}\n` };
    }
    if (rows.length === 0) return { code: 0, stdout: '(no receipts)\n' };
    const lines = rows.map(({ r, body }) =>
      body === undefined
        ? `${r.seq}  (unreadable receipt)`
        : [
            String(r.seq).padStart(6),
            new Date(body.at).toISOString(),
            body.source.padEnd(10),
            (body.key ?? '-').padEnd(24),
            body.modelName.padEnd(28),
            body.outcome.padEnd(24),
            body.delivery,
            body.replayed ? 'replayed' : '',
          ]
            .join('  ')
            .trimEnd(),
    );
    return { code: 0, stdout: `${lines.join('\n')}\n` };
  } finally {
    await store.close();
  }
}

function parse(r: StoredReceipt): ReceiptBody | undefined {
  try {
    return JSON.parse(r.text) as ReceiptBody;
  } catch {
    return undefined;
  }
}
