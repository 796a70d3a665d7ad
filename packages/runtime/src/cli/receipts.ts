import {
  verifyJournal,
  type ChainAnchor,
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
 * Parses `--expect-head SEQ:DIGEST` (a head printed by an earlier `verify`).
 *
 * @returns the anchor, or `undefined` when the text is not `<seq>:<64 hex digits>`.
 */
export function parseExpectedHead(text: string): ChainAnchor | undefined {
  const match = /^(\d{1,15}):([0-9a-f]{64})$/.exec(text.trim());
  if (match === null) return undefined;
  return { seq: Number(match[1]), digest: match[2] as string };
}

/**
 * `stepbind receipts verify --journal FILE [--expect-head SEQ:DIGEST]`: checks the whole kept
 * chain, the head record (a deleted newest receipt shows), the anchor against the `prune` receipt
 * naming it (a deleted prefix shows), every record against its key's receipts (an edited state or
 * result shows) and, when given, an external anchor. Prints `head: SEQ DIGEST` to keep elsewhere.
 * Exit code 0 only when nothing was found; 1 with each finding and its reason. A SQLite file is
 * opened read-only: nothing is migrated or written.
 *
 * @throws JournalError when the file cannot be opened as a journal.
 */
export async function verifyReceipts(
  path: string | JournalStore, // or an open store (closed here)
  json: boolean,
  expectHead?: ChainAnchor,
): Promise<ReceiptsReport> {
  const store = typeof path === 'string' ? openSqliteJournal({ path, readOnly: true }) : path;
  try {
    const verdict = verifyJournal({
      anchor: await store.anchor(),
      receipts: await store.readReceipts(),
      head: await store.head?.(),
      records: await store.listRecords(),
      expectHead,
    });
    if (json) return { code: verdict.ok ? 0 : 1, stdout: `${JSON.stringify(verdict)}\n` };
    const from =
      verdict.anchor.seq === 0
        ? 'from the start'
        : `from receipt ${verdict.anchor.seq + 1} (older ones were pruned)`;
    const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
    const head = `head: ${verdict.head.seq} ${verdict.head.digest}\n`;
    const unchecked =
      verdict.storedHead === undefined
        ? ' (no head record: a schema-1 journal, truncation at the end is not detectable)'
        : '';
    if (verdict.ok) {
      return {
        code: 0,
        stdout: `✔ ${store.location}: ${plural(verdict.count, 'receipt')} verified ${from}, ${plural(verdict.records, 'record')} agree with them${unchecked}${expectHead === undefined ? '' : `; the expected head ${expectHead.seq} is in the chain`}\n${head}`,
      };
    }
    const lines = verdict.findings.map((f) => `  ${f.reason}: ${f.message}`);
    return {
      code: 1,
      stdout: `✘ ${store.location}: ${plural(verdict.findings.length, 'finding')} (${plural(verdict.count, 'receipt')} verified ${from}):\n${lines.join('\n')}\n${head}`,
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
