/**
 * MemoryJournalStore's bounds: the default in-memory journal keeps at most `maxRecords` records
 * and `maxReceipts` receipts whatever the number of keyed calls, dropping the least recently
 * written prunable records (`COMPLETED`, `NOT_SENT`) and the oldest receipts (the anchor moves, the
 * chain still verifies), and never a key that is in progress or of unknown outcome.
 */
import {
  CallJournal,
  ConfigError,
  MemoryJournalStore,
  type CallIntent,
  type MemoryJournalOverCap,
} from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { callReceipt, context, ErrorCode, failure } from '../support/journal.js';

const intent = (key: string): CallIntent => ({
  key,
  context: context('write'),
  argsDigest: `sha256:${key}`,
  retryReads: false,
});

/** One keyed call as `PreparedCall.run` drives it, ending `COMPLETED` or `OUTCOME_UNKNOWN`. */
async function call(journal: CallJournal, key: string, end: 'ok' | 'lost' = 'ok'): Promise<void> {
  journal.start();
  const begun = await journal.begin(intent(key), { deferWrite: true });
  if (begun.kind !== 'claimed') throw new Error(`${key}: ${begun.kind}`);
  await journal.markSent(begun.claim, 1_000);
  if (end === 'ok') {
    await journal.complete(begun.claim, {
      result: { content: [{ type: 'text', text: `${key} done` }] },
      receipt: callReceipt(intent(key).context, key),
    });
  } else {
    await journal.fail(begun.claim, intent(key).context, failure(ErrorCode.TIMEOUT, 'sent'), {
      argsDigest: intent(key).argsDigest,
      key,
    });
  }
}

describe('MemoryJournalStore bounds', () => {
  it('keeps at most maxRecords records and maxReceipts receipts after many keyed calls, dropping the oldest completed keys', async () => {
    const store = new MemoryJournalStore({ maxRecords: 50, maxReceipts: 40 });
    const journal = new CallJournal(store, { receipts: 'keyed' });
    for (let i = 0; i < 1_000; i++) await call(journal, `k${i}`);
    const records = await store.listRecords();
    expect(records.length).toBeLessThanOrEqual(50);
    expect(records.length).toBeGreaterThanOrEqual(45);
    expect(await store.get('k999')).toBeDefined();
    expect(await store.get('k0')).toBeUndefined();
    // Past the cap the oldest tenth goes at once, and a prune receipt names the new anchor.
    const kept = await store.readReceipts();
    expect(kept.length).toBeLessThanOrEqual(40);
    expect(kept.length).toBeGreaterThanOrEqual(36);
    expect((await store.anchor()).seq).toBe((kept[0]?.seq ?? 0) - 1);
    expect(kept.at(-1)?.seq).toBeGreaterThan(1_000);
    expect((await journal.verify()).ok).toBe(true);
    // A dropped key starts over, as an expired one does.
    journal.start();
    expect((await journal.begin(intent('k0'))).kind).toBe('claimed');
  });

  it('never drops a key of unknown outcome or in progress over the cap; grows and reports it through onOverCap', async () => {
    const reports: MemoryJournalOverCap[] = [];
    const store = new MemoryJournalStore({ maxRecords: 10, onOverCap: (r) => reports.push(r) });
    const journal = new CallJournal(store, { receipts: 'keyed' });
    await call(journal, 'unknown-0', 'lost');
    for (let i = 0; i < 100; i++) await call(journal, `done-${i}`);
    expect((await store.get('unknown-0'))?.state).toBe('OUTCOME_UNKNOWN');
    journal.start();
    const refused = await journal.begin(intent('unknown-0'));
    expect(refused.kind === 'refused' && refused.error.code).toBe(ErrorCode.OUTCOME_UNKNOWN);
    expect(reports).toEqual([]);

    for (let i = 1; i <= 20; i++) await call(journal, `unknown-${i}`, 'lost');
    journal.start();
    const held = await journal.begin(intent('held'));
    expect(held.kind).toBe('claimed');
    const states = (await store.listRecords()).map((r) => r.state);
    expect(states.filter((s) => s === 'OUTCOME_UNKNOWN')).toHaveLength(21);
    expect(states).toContain('INTENT');
    expect(states).not.toContain('COMPLETED');
    expect(reports.length).toBeGreaterThan(0);
    expect(reports.at(-1)).toEqual({ records: 21, maxRecords: 10 });
    expect(reports.every((r) => r.records > r.maxRecords)).toBe(true);
  });

  it('refuses a maxRecords that is not a positive integer with INVALID_OPTIONS', () => {
    for (const maxRecords of [0, -1, 1.5, Number.NaN]) {
      expect(() => new MemoryJournalStore({ maxRecords })).toThrow(ConfigError);
    }
  });
});
