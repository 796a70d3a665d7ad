import {
  GENESIS_ANCHOR,
  MemoryJournalStore,
  chainReceipt,
  receiptDigest,
  verifyChain,
  verifyJournal,
  type StoredReceipt,
} from '@stepbind/binding';
import { describe, expect, it } from 'vitest';
import { body } from '../support/journal.js';

function chain(n: number): StoredReceipt[] {
  const out: StoredReceipt[] = [];
  let head = GENESIS_ANCHOR;
  for (let i = 1; i <= n; i++) {
    const entry = chainReceipt(head, body(i));
    out.push({
      seq: entry.seq,
      prevDigest: entry.prevDigest,
      digest: entry.digest,
      text: entry.text,
    });
    head = { seq: entry.seq, digest: entry.digest };
  }
  return out;
}

function flip(text: string, at: number): string {
  const c = text.charCodeAt(at);
  return text.slice(0, at) + String.fromCharCode(c ^ 1) + text.slice(at + 1);
}

describe('receipts chain', () => {
  it('verifies an intact chain from the genesis anchor', () => {
    const verdict = verifyChain(GENESIS_ANCHOR, chain(5));
    expect(verdict).toMatchObject({ ok: true, count: 5, head: { seq: 5 } });
  });

  it('detects one flipped byte anywhere in any receipt text, at that receipt', () => {
    const receipts = chain(4);
    const target = receipts[2] as StoredReceipt;
    for (let at = 0; at < target.text.length; at++) {
      const tampered = receipts.map((r) => (r === target ? { ...r, text: flip(r.text, at) } : r));
      const verdict = verifyChain(GENESIS_ANCHOR, tampered);
      expect(verdict.ok).toBe(false);
      if (!verdict.ok) expect(verdict.seq).toBe(3);
    }
  });

  it('detects one flipped byte in a digest or a previous-digest link', () => {
    const receipts = chain(3);
    const digest = receipts.map((r, i) => (i === 1 ? { ...r, digest: flip(r.digest, 10) } : r));
    expect(verifyChain(GENESIS_ANCHOR, digest)).toMatchObject({
      ok: false,
      seq: 2,
      reason: 'digest',
    });
    const link = receipts.map((r, i) =>
      i === 2 ? { ...r, prevDigest: flip(r.prevDigest, 0) } : r,
    );
    expect(verifyChain(GENESIS_ANCHOR, link)).toMatchObject({
      ok: false,
      seq: 3,
      reason: 'prev-digest',
    });
  });

  it('detects a dropped receipt (a gap), the dropped first one, and a reordering', () => {
    const receipts = chain(5);
    expect(
      verifyChain(
        GENESIS_ANCHOR,
        receipts.filter((r) => r.seq !== 3),
      ),
    ).toMatchObject({
      ok: false,
      seq: 4,
      reason: 'gap',
    });
    expect(verifyChain(GENESIS_ANCHOR, receipts.slice(1))).toMatchObject({ ok: false, seq: 2 });
    const swapped = [receipts[0], receipts[2], receipts[1], receipts[3]] as StoredReceipt[];
    expect(verifyChain(GENESIS_ANCHOR, swapped).ok).toBe(false);
  });

  it('detects a rewritten receipt whose digest was recomputed, at the next link', () => {
    const receipts = chain(3);
    const forged = chainReceipt(
      { seq: 1, digest: (receipts[0] as StoredReceipt).digest },
      { ...body(2), outcome: 'tool-error' },
    );
    const tampered = [receipts[0], forged, receipts[2]] as StoredReceipt[];
    expect(verifyChain(GENESIS_ANCHOR, tampered)).toMatchObject({
      ok: false,
      seq: 3,
      reason: 'prev-digest',
    });
  });

  it('refuses a body that is not canonical JSON even when its digest matches', () => {
    const head = GENESIS_ANCHOR;
    const entry = chainReceipt(head, body(1));
    const text = entry.text.replace('{', '{ ');
    const rewritten = {
      seq: 1,
      prevDigest: head.digest,
      digest: receiptDigest(1, head.digest, text),
      text,
    };
    expect(verifyChain(GENESIS_ANCHOR, [rewritten])).toMatchObject({ ok: false, reason: 'body' });
  });

  it('keeps verifying from the anchor after the memory store drops old receipts', async () => {
    const store = new MemoryJournalStore({ maxReceipts: 3 });
    for (let i = 1; i <= 7; i++) await store.appendReceipt(body(i));
    const anchor = await store.anchor();
    const kept = await store.readReceipts();
    // Past 3 kept, the oldest is dropped and a prune receipt naming the new anchor is chained.
    expect(kept.map((r) => r.seq)).toEqual([anchor.seq + 1, anchor.seq + 2, anchor.seq + 3]);
    expect(verifyChain(anchor, kept)).toMatchObject({ ok: true, count: 3 });
    expect(verifyChain(GENESIS_ANCHOR, kept).ok).toBe(false);
    const verdict = verifyJournal({ anchor, receipts: kept, head: await store.head() });
    expect(verdict.findings).toEqual([]);
    const pruned = await store.prune({ now: 2_000, receiptsBefore: 1_008 });
    expect(pruned.receipts).toBeGreaterThan(0);
    const after = await store.readReceipts();
    expect(
      verifyJournal({ anchor: await store.anchor(), receipts: after, head: await store.head() })
        .findings,
    ).toEqual([]);
  });
});
