import { canonicalJson, sha256Hex } from '../canonical.js';
import type { ToolCallResult } from '../call/types.js';
import type {
  ChainAnchor,
  JournalRecord,
  ReceiptBody,
  ReceiptEntry,
  StoredReceipt,
} from './store.js';

/** The `prevDigest` of the first receipt of a chain: 64 zeros. */
export const GENESIS_DIGEST = '0'.repeat(64);

/** The anchor of a chain nothing was pruned from. */
export const GENESIS_ANCHOR: ChainAnchor = Object.freeze({ seq: 0, digest: GENESIS_DIGEST });

/** The `sha256:` digest a receipt records for a result (`resultDigest`). */
export function resultDigestOf(result: ToolCallResult): string {
  return resultDigestOfText(JSON.stringify(result));
}

/** {@link resultDigestOf} of a result whose `JSON.stringify` text is `text` (made once per call). */
export function resultDigestOfText(text: string): string {
  return `sha256:${sha256Hex(text)}`;
}

/**
 * JSON texts remembered for objects a journal made once and writes as they are (a completed
 * record's outcome): a store writes that text instead of serializing the object again.
 */
const jsonTexts = new WeakMap<object, string>();

/** Remembers `text` as the JSON text of `value` (a fresh object nothing else holds or changes). */
export function rememberJson<T extends object>(value: T, text: string): T {
  jsonTexts.set(value, text);
  return value;
}

/** The JSON text of `value`: the one remembered for it, else `JSON.stringify(value)`. */
export function jsonText(value: object): string {
  return jsonTexts.get(value) ?? JSON.stringify(value);
}

/** The text a receipt is stored and digested as: the canonical JSON of its body. */
export function receiptText(body: ReceiptBody): string {
  return canonicalJson(body);
}

/**
 * The digest of receipt `seq`: hex sha256 of `"<seq>\n<prevDigest>\n<text>"`, so a changed body, a
 * reordered or a dropped receipt changes every digest after it.
 */
export function receiptDigest(seq: number, prevDigest: string, text: string): string {
  return sha256Hex(`${seq}\n${prevDigest}\n${text}`);
}

/** Builds the next link after `head`. Stores call this inside their append transaction. */
export function chainReceipt(head: ChainAnchor, body: ReceiptBody): ReceiptEntry {
  const text = receiptText(body);
  const seq = head.seq + 1;
  return Object.freeze({
    seq,
    prevDigest: head.digest,
    digest: receiptDigest(seq, head.digest, text),
    text,
    body,
  });
}

/**
 * The receipt a store appends to a record's update: `body` stamped with the state the record is
 * moved to, so verification can tell a record edited outside stepbind from one its chain recorded.
 */
export function stampReceipt(body: ReceiptBody, record: JournalRecord): ReceiptBody {
  return { ...body, state: record.state };
}

/**
 * The receipt a store appends in the transaction of a prune that moved the anchor to `anchor`: a
 * prefix deleted any other way (with a forged anchor) has no such receipt.
 */
export function pruneReceipt(anchor: ChainAnchor, at: number): ReceiptBody {
  return {
    stepId: '',
    server: '',
    tool: '',
    modelName: '',
    descriptorDigest: '',
    effectClass: 'unknown',
    generation: 0,
    revision: 0,
    policyEpoch: 0,
    audience: '',
    catalogState: '',
    at,
    source: 'prune',
    key: null,
    attempt: null,
    outcome: 'pruned',
    delivery: 'not-sent',
    replayed: false,
    argsDigest: null,
    resultDigest: null,
    anchor: { seq: anchor.seq, digest: anchor.digest },
  };
}

/** The verdict of {@link verifyChain}. */
export type ChainVerification =
  | {
      readonly ok: true;
      /** Receipts checked. */
      readonly count: number;
      readonly anchor: ChainAnchor;
      /** The last receipt's seq and digest (the anchor's when the chain is empty). */
      readonly head: ChainAnchor;
    }
  | {
      readonly ok: false;
      readonly count: number;
      readonly anchor: ChainAnchor;
      /** The first receipt that does not verify. */
      readonly seq: number;
      readonly reason: 'gap' | 'prev-digest' | 'digest' | 'body';
      readonly message: string;
    };

/**
 * Checks a chain from `anchor`: consecutive `seq`s, each `prevDigest` equal to the previous digest,
 * each digest recomputed from the stored text, and each text the canonical JSON of a receipt body.
 * A flipped byte, a dropped or reordered receipt is reported at the first receipt it breaks.
 */
export function verifyChain(
  anchor: ChainAnchor,
  receipts: Iterable<StoredReceipt>,
): ChainVerification {
  let previous = anchor;
  let count = 0;
  const broken = (
    seq: number,
    reason: 'gap' | 'prev-digest' | 'digest' | 'body',
    message: string,
  ): ChainVerification => Object.freeze({ ok: false, count, anchor, seq, reason, message });
  for (const receipt of receipts) {
    if (receipt.seq !== previous.seq + 1) {
      return broken(
        receipt.seq,
        'gap',
        `receipt ${receipt.seq} follows receipt ${previous.seq}: receipts ${previous.seq + 1}..${receipt.seq - 1} are missing`,
      );
    }
    if (receipt.prevDigest !== previous.digest) {
      return broken(
        receipt.seq,
        'prev-digest',
        `receipt ${receipt.seq} does not point at the digest of receipt ${previous.seq}`,
      );
    }
    if (receiptDigest(receipt.seq, receipt.prevDigest, receipt.text) !== receipt.digest) {
      return broken(
        receipt.seq,
        'digest',
        `receipt ${receipt.seq} was changed: its content does not match its digest`,
      );
    }
    let canonical: boolean;
    try {
      canonical = canonicalJson(JSON.parse(receipt.text)) === receipt.text;
    } catch {
      canonical = false;
    }
    if (!canonical) {
      return broken(receipt.seq, 'body', `receipt ${receipt.seq} is not a canonical JSON body`);
    }
    previous = { seq: receipt.seq, digest: receipt.digest };
    count++;
  }
  return Object.freeze({ ok: true, count, anchor, head: Object.freeze({ ...previous }) });
}
