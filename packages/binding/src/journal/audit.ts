/**
 * Verification that truncation and record edits cannot fool: the chain itself ({@link verifyChain}),
 * the stored head record against the newest kept receipt, the anchor against the `prune` receipt
 * that names it, an operator's external anchor, and every record's state, attempt and stored result
 * against the receipts its own transitions appended. `CallJournal` runs the record check before it
 * acts on a repeated key; `stepbind receipts verify` runs all of it.
 *
 * @packageDocumentation
 */
import { ErrorCode, JournalError } from '../errors.js';
import { resultDigestOf, verifyChain } from './chain.js';
import type {
  ChainAnchor,
  JournalRecord,
  JournalState,
  JournalStore,
  ReceiptBody,
  StoredReceipt,
} from './store.js';

/** Why {@link verifyJournal} rejects a journal (`JournalFinding.reason`). */
export type JournalFindingReason =
  /** A receipt is missing in the middle of the kept chain. */
  | 'gap'
  /** A receipt does not point at the digest of the one before it. */
  | 'prev-digest'
  /** A receipt's content does not match its digest. */
  | 'digest'
  /** A receipt is not a canonical JSON body. */
  | 'body'
  /** The head record disagrees with the newest kept receipt (newest receipts deleted, or edited). */
  | 'head'
  /** The anchor is not named by a `prune` receipt: a prefix was deleted outside a prune. */
  | 'anchor'
  /** The chain does not hold the operator's external anchor (`--expect-head`). */
  | 'expected-head'
  /** A record's state or attempt disagrees with the receipts of its key. */
  | 'record-state'
  /** A `COMPLETED` record's stored result is not the one its receipt digested. */
  | 'record-result';

/** One thing {@link verifyJournal} found wrong. */
export interface JournalFinding {
  readonly reason: JournalFindingReason;
  /** The receipt concerned, when there is one. */
  readonly seq?: number;
  /** The idempotency key concerned (record findings). */
  readonly key?: string;
  readonly message: string;
}

/** What {@link verifyJournal} checks. */
export interface JournalAuditInput {
  readonly anchor: ChainAnchor;
  /** The kept receipts in chain order. */
  readonly receipts: readonly StoredReceipt[];
  /** The store's head record; absent: truncation at the end cannot be detected. */
  readonly head?: ChainAnchor | undefined;
  /** The records to cross-check against the chain. @default none */
  readonly records?: readonly JournalRecord[];
  /** An external anchor (a head printed earlier) the chain must still contain. */
  readonly expectHead?: ChainAnchor | undefined;
}

/** The verdict of {@link verifyJournal}. */
export interface JournalVerification {
  /** True when there are no findings. */
  readonly ok: boolean;
  /** Receipts that verified (up to the first broken one). */
  readonly count: number;
  /** Records cross-checked. */
  readonly records: number;
  readonly anchor: ChainAnchor;
  /** The newest receipt that verified (the anchor when none did): print it to keep it elsewhere. */
  readonly head: ChainAnchor;
  /** The store's head record, when it has one. */
  readonly storedHead?: ChainAnchor;
  readonly findings: readonly JournalFinding[];
}

/** A receipt with its body, as the record check reads it. */
export interface KeyReceipt {
  readonly seq: number;
  readonly body: ReceiptBody;
}

export { resultDigestOf };

/**
 * Checks the whole journal: the chain from its anchor, the head record, the anchor's `prune`
 * receipt, the external anchor and each record against its key's receipts. Every problem is a
 * finding; none stops the others from being checked.
 */
export function verifyJournal(input: JournalAuditInput): JournalVerification {
  const { anchor, receipts } = input;
  const findings: JournalFinding[] = [];
  const chain = verifyChain(anchor, receipts);
  if (!chain.ok) findings.push({ reason: chain.reason, seq: chain.seq, message: chain.message });
  const head = chain.ok ? chain.head : lastVerified(anchor, receipts, chain.count);
  const stored = input.head;
  if (stored !== undefined && chain.ok && !sameAnchor(stored, head)) {
    findings.push({
      reason: 'head',
      seq: stored.seq,
      message:
        stored.seq > head.seq
          ? `the head record says receipt ${stored.seq} is the newest, but the kept chain ends at receipt ${head.seq}: receipts ${head.seq + 1}..${stored.seq} were deleted`
          : `the head record (receipt ${stored.seq}) does not match the newest kept receipt ${head.seq}: the head record or the chain was edited`,
    });
  }
  const bodies: KeyReceipt[] = [];
  for (const receipt of receipts) {
    const body = parseBody(receipt.text);
    if (body !== undefined) bodies.push({ seq: receipt.seq, body });
  }
  if (anchor.seq > 0) {
    const prune = bodies.findLast((r) => r.body.source === 'prune');
    if (prune?.body.anchor === undefined || !sameAnchor(prune.body.anchor, anchor)) {
      findings.push({
        reason: 'anchor',
        seq: anchor.seq,
        message: `the chain starts after receipt ${anchor.seq}, but no prune receipt names that anchor: receipts 1..${anchor.seq} were deleted outside a prune, or the anchor was changed`,
      });
    }
  }
  if (input.expectHead !== undefined) {
    const problem = expectedHeadProblem(input.expectHead, anchor, receipts);
    if (problem !== undefined) {
      findings.push({ reason: 'expected-head', seq: input.expectHead.seq, message: problem });
    }
  }
  const byKey = new Map<string, KeyReceipt[]>();
  for (const r of bodies) {
    if (r.body.key === null) continue;
    const list = byKey.get(r.body.key);
    if (list === undefined) byKey.set(r.body.key, [r]);
    else list.push(r);
  }
  const records = input.records ?? [];
  for (const record of records) {
    const finding = recordFinding(record, byKey.get(record.key) ?? []);
    if (finding !== undefined) findings.push(finding);
  }
  return Object.freeze({
    ok: findings.length === 0,
    count: chain.count,
    records: records.length,
    anchor,
    head: Object.freeze({ ...head }),
    ...(stored === undefined ? {} : { storedHead: Object.freeze({ ...stored }) }),
    findings: Object.freeze(findings),
  });
}

/**
 * Checks one record against the receipts of its key (in chain order). Every transition to a
 * finished state appends a receipt stamped with the state it wrote (`ReceiptBody.state`), in the
 * same transaction; in-progress states (`INTENT`, `SENT`) have none. So:
 *
 * - a finished record must be in the state the newest stamped receipt of its attempt says, and a
 *   `COMPLETED` result must have the digest that receipt recorded;
 * - a newer attempt than the newest stamped receipt's may follow only a state a key may be claimed
 *   again from (never `OUTCOME_UNKNOWN` of a tool that is not `read`), and a finished one has its
 *   own stamped receipt once any receipt is stamped;
 * - an in-progress record must not be at (or before) an attempt that already finished.
 *
 * Unstamped receipts (refusals, replays, receipts of claims never written, older journals) are not
 * evidence. A record whose receipts were pruned cannot be checked and passes.
 *
 * @returns the finding, or `undefined` when the record agrees with its chain.
 */
export function recordFinding(
  record: JournalRecord,
  receipts: readonly KeyReceipt[],
): JournalFinding | undefined {
  const inProgress = record.state === 'INTENT' || record.state === 'SENT';
  let newest: (KeyReceipt & { readonly state: JournalState }) | undefined;
  let ofAttempt: (KeyReceipt & { readonly state: JournalState }) | undefined;
  for (const r of receipts) {
    const state = r.body.state;
    if (state === undefined || r.body.key !== record.key || r.body.attempt === null) continue;
    // An earlier use of the key (pruned, then claimed again from attempt 1) is not this record's.
    if (r.body.at < record.createdAt) continue;
    newest = { ...r, state };
    if (r.body.attempt === record.attempt) ofAttempt = newest;
  }
  if (newest === undefined) return undefined;
  const at = `key "${record.key}" (${record.context.server}/${record.context.tool})`;
  const mismatch = (why: string, seq: number): JournalFinding => ({
    reason: 'record-state',
    key: record.key,
    seq,
    message: `${at} is ${record.state} at attempt ${record.attempt}, but ${why}: the record was changed outside stepbind`,
  });
  const attempt = newest.body.attempt ?? 0;
  if (attempt > record.attempt || (inProgress && attempt === record.attempt)) {
    return mismatch(
      `receipt ${newest.seq} already recorded attempt ${attempt} as ${newest.state}`,
      newest.seq,
    );
  }
  if (attempt < record.attempt) {
    if (newest.state === 'OUTCOME_UNKNOWN' && newest.body.effectClass !== 'read') {
      return mismatch(
        `receipt ${newest.seq} left attempt ${attempt} OUTCOME_UNKNOWN, which is never claimed again`,
        newest.seq,
      );
    }
    if (!inProgress) {
      return mismatch(`no receipt records attempt ${record.attempt} ending`, newest.seq);
    }
    return undefined;
  }
  if (ofAttempt === undefined || inProgress) return undefined;
  if (ofAttempt.state !== record.state) {
    return mismatch(`receipt ${ofAttempt.seq} recorded it as ${ofAttempt.state}`, ofAttempt.seq);
  }
  const expected = ofAttempt.body.resultDigest;
  if (
    record.state === 'COMPLETED' &&
    record.outcome?.kind === 'result' &&
    expected !== null &&
    resultDigestOf(record.outcome.result) !== expected
  ) {
    return {
      reason: 'record-result',
      key: record.key,
      seq: ofAttempt.seq,
      message: `${at}: the stored result is not the one receipt ${ofAttempt.seq} recorded (its digest differs): the result was rewritten outside stepbind`,
    };
  }
  return undefined;
}

/**
 * What `CallJournal` runs before it acts on a repeated key (replay, re-claim, recovery): one read
 * of the key's receipts and, for a `COMPLETED` result, one digest of the result already read.
 *
 * @throws JournalError `JOURNAL_CORRUPT` (`detail.reason` from {@link recordFinding}) when the
 *   record's receipts contradict it: a rewritten result is never replayed, a key that may have
 *   run is never re-sent.
 */
export async function checkChained(store: JournalStore, record: JournalRecord): Promise<void> {
  const receipts = keyReceipts(await store.readReceipts({ key: record.key }));
  const finding = recordFinding(record, receipts);
  if (finding === undefined) return;
  throw new JournalError(
    ErrorCode.JOURNAL_CORRUPT,
    `The journal at ${store.location}: ${finding.message}. "${record.context.modelName}" was not run and nothing was replayed. Run \`stepbind receipts verify\`, then restore the journal from a backup or resolve the key.`,
    { detail: { path: store.location, reason: finding.reason, key: record.key } },
  );
}

/** Parses stored receipt texts of one key for {@link recordFinding}; unreadable ones are skipped. */
export function keyReceipts(receipts: readonly StoredReceipt[]): KeyReceipt[] {
  const out: KeyReceipt[] = [];
  for (const receipt of receipts) {
    const body = parseBody(receipt.text);
    if (body !== undefined) out.push({ seq: receipt.seq, body });
  }
  return out;
}

function expectedHeadProblem(
  expected: ChainAnchor,
  anchor: ChainAnchor,
  receipts: readonly StoredReceipt[],
): string | undefined {
  const name = `the expected head ${expected.seq} ${expected.digest}`;
  if (expected.seq === anchor.seq) {
    return anchor.digest === expected.digest ? undefined : `${name} is not the chain's anchor`;
  }
  if (expected.seq < anchor.seq) {
    return `${name} was pruned (the chain starts after receipt ${anchor.seq}), so it cannot be checked; keep a newer head`;
  }
  const found = receipts.find((r) => r.seq === expected.seq);
  if (found === undefined) {
    return `${name} is not in the chain (it ends at receipt ${receipts.at(-1)?.seq ?? anchor.seq}): receipts were deleted`;
  }
  return found.digest === expected.digest
    ? undefined
    : `receipt ${expected.seq} has digest ${found.digest}, not ${expected.digest}: the chain was rewritten`;
}

function lastVerified(
  anchor: ChainAnchor,
  receipts: readonly StoredReceipt[],
  count: number,
): ChainAnchor {
  const last = count === 0 ? undefined : receipts[count - 1];
  return last === undefined ? anchor : { seq: last.seq, digest: last.digest };
}

function sameAnchor(a: ChainAnchor, b: ChainAnchor): boolean {
  return a.seq === b.seq && a.digest === b.digest;
}

function parseBody(text: string): ReceiptBody | undefined {
  try {
    const body = JSON.parse(text) as unknown;
    return typeof body === 'object' && body !== null ? (body as ReceiptBody) : undefined;
  } catch {
    return undefined;
  }
}
