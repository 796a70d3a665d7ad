import {
  CallJournal,
  MemoryJournalStore,
  verifyJournal,
  type CallIntent,
  type JournalRecord,
} from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { callReceipt, context, ErrorCode, failure } from '../support/journal.js';

const intent = (key: string): CallIntent => ({
  key,
  context: context(),
  argsDigest: 'sha256:args',
  retryReads: false,
});

async function completed(journal: CallJournal, key: string): Promise<void> {
  journal.start();
  const begun = await journal.begin(intent(key));
  if (begun.kind !== 'claimed') throw new Error(`expected a claim, got ${begun.kind}`);
  await journal.markSent(begun.claim, 1_000);
  const result = { content: [{ type: 'text' as const, text: `done ${key}` }] };
  await journal.complete(begun.claim, { result, receipt: callReceipt(intent(key).context, key) });
}

async function audit(store: MemoryJournalStore): Promise<ReturnType<typeof verifyJournal>> {
  return verifyJournal({
    anchor: await store.anchor(),
    receipts: await store.readReceipts(),
    head: await store.head(),
    records: await store.listRecords(),
  });
}

describe('the record check over the in-memory store', () => {
  it('passes every record of an untouched journal, refusals and replays included', async () => {
    const store = new MemoryJournalStore();
    const journal = new CallJournal(store);
    await completed(journal, 'a');
    const replay = await journal.begin(intent('a'));
    expect(replay.kind).toBe('replay');
    if (replay.kind === 'replay') {
      journal.start();
      await journal.replayed(replay.record, intent('a').context);
    }
    // A refused run (a payload conflict) appends an unstamped receipt that proves nothing.
    const conflict = await journal.begin({ ...intent('a'), argsDigest: 'sha256:other' });
    expect(conflict.kind).toBe('refused');
    const begun = await journal.begin(intent('b'));
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    journal.start();
    await journal.fail(
      begun.claim,
      intent('b').context,
      failure(ErrorCode.CONNECTION_CLOSED, 'not-sent'),
      {
        argsDigest: 'sha256:args',
        key: 'b',
      },
    );
    expect((await audit(store)).findings).toEqual([]);
    // NOT_SENT agrees with its receipt: the key is claimed again.
    expect((await journal.begin(intent('b'))).kind).toBe('claimed');
  });

  it('refuses to replay a result edited in the store (JOURNAL_CORRUPT, reason record-result)', async () => {
    const store = new MemoryJournalStore();
    const journal = new CallJournal(store);
    await completed(journal, 'a');
    const record = (await store.get('a')) as JournalRecord;
    const edited: JournalRecord = {
      ...record,
      version: record.version + 1,
      outcome:
        record.outcome?.kind === 'result'
          ? { ...record.outcome, result: { content: [{ type: 'text', text: 'forged' }] } }
          : record.outcome,
    };
    expect((await store.update(edited, record.version)).ok).toBe(true);
    expect((await audit(store)).findings).toEqual([
      expect.objectContaining({ reason: 'record-result', key: 'a' }),
    ]);
    await expect(journal.begin(intent('a'))).rejects.toMatchObject({
      code: 'JOURNAL_CORRUPT',
      detail: { reason: 'record-result', key: 'a' },
    });
  });
});
