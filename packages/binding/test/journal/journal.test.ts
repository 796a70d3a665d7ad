/**
 * CallJournal over a MemoryJournalStore: what a repeated key means, decided by the key's state
 * first (DESIGN §13, "On a repeated key"). A key that may have run is never refused as not sent and
 * never advised a new key; an edited tool descriptor alone replays a completed key and leaves an
 * unknown or running one as it is.
 */
import {
  CallJournal,
  MemoryJournalStore,
  toToolResult,
  type BeginResult,
  type CallContext,
  type CallIntent,
  type JournalState,
} from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { callReceipt, context, ErrorCode, failure } from '../support/journal.js';

const T0 = 1_000_000;

function intentOf(overrides: Partial<CallContext> = {}, args = 'a'): CallIntent {
  return {
    key: 'k',
    context: context('write', overrides),
    argsDigest: `sha256:${args}`,
    retryReads: true,
  };
}

/** A journal whose key `k` was left in `state` by a first run (of another holder for INTENT/SENT). */
async function keyIn(state: JournalState): Promise<CallJournal> {
  const store = new MemoryJournalStore();
  const first = new CallJournal(store, { owner: 'first', now: () => T0 });
  const intent = intentOf();
  first.start();
  const begun = await first.begin(intent);
  if (begun.kind !== 'claimed') throw new Error('first run not claimed');
  if (state !== 'INTENT') {
    if (state === 'NOT_SENT') {
      await first.fail(begun.claim, intent.context, failure(ErrorCode.STALE_CATALOG, 'not-sent'), {
        argsDigest: intent.argsDigest,
        key: 'k',
      });
    } else {
      await first.markSent(begun.claim, 30_000);
      if (state === 'COMPLETED') {
        await first.complete(begun.claim, {
          result: { content: [{ type: 'text', text: 'sent once' }] },
          receipt: callReceipt(intent.context, 'k'),
        });
      } else if (state === 'OUTCOME_UNKNOWN') {
        await first.fail(begun.claim, intent.context, failure(ErrorCode.TIMEOUT, 'sent'), {
          argsDigest: intent.argsDigest,
          key: 'k',
        });
      }
    }
  }
  // The retry comes from another live process (first still holds INTENT/SENT keys).
  return new CallJournal(store, { owner: 'second', now: () => T0 + 1 });
}

async function retry(journal: CallJournal, intent: CallIntent): Promise<BeginResult> {
  journal.start();
  return journal.begin(intent);
}

const EDITED = { descriptorDigest: 'sha256:write:edited-description' };

describe('CallJournal: a repeated key is decided by its state first', () => {
  it('replays a COMPLETED key whose tool descriptor changed, and the replay receipt keeps the digest it ran under', async () => {
    const journal = await keyIn('COMPLETED');
    const begun = await retry(journal, intentOf(EDITED));
    expect(begun.kind).toBe('replay');
    if (begun.kind !== 'replay') return;
    expect(begun.outcome.kind === 'result' && begun.outcome.result.content).toEqual([
      { type: 'text', text: 'sent once' },
    ]);
    const entry = await journal.replayed(begun.record, intentOf(EDITED).context);
    expect(entry.body).toMatchObject({
      replayed: true,
      delivery: 'not-sent',
      descriptorDigest: EDITED.descriptorDigest,
      recordedDescriptorDigest: 'sha256:write',
    });
  });

  it('refuses an OUTCOME_UNKNOWN key whose tool descriptor changed as OUTCOME_UNKNOWN (delivery sent, resolve it, never a new key)', async () => {
    const journal = await keyIn('OUTCOME_UNKNOWN');
    const begun = await retry(journal, intentOf(EDITED));
    expect(begun.kind).toBe('refused');
    if (begun.kind !== 'refused') return;
    const error = begun.error;
    expect([error.code, error.delivery]).toEqual([ErrorCode.OUTCOME_UNKNOWN, 'sent']);
    expect(error.detail).toMatchObject({ keyState: 'OUTCOME_UNKNOWN', descriptorChanged: true });
    expect(error.message).toMatch(/may have run.*resolve\("k"/);
    expect(error.message).not.toMatch(/use a new key/i);
    const model = toToolResult(error).content[0].text;
    expect(model).toMatch(/may or may not have taken effect/);
    expect(model).toMatch(/do not repeat it as a new tool call/);
    // The receipt of this refusal is about this run: nothing was sent by it.
    const entry = await journal.fail(undefined, intentOf(EDITED).context, error, {
      argsDigest: 'sha256:a',
      key: 'k',
    });
    expect([entry.body.delivery, entry.body.replayed]).toEqual(['not-sent', true]);
  });

  it('does not re-send a read of unknown outcome under an edited descriptor, even with retryReads', async () => {
    const store = new MemoryJournalStore();
    const journal = new CallJournal(store, { now: () => T0 });
    const read = (digest: string): CallIntent => ({
      key: 'r',
      context: context('read_doc', { descriptorDigest: digest }),
      argsDigest: 'sha256:a',
      retryReads: true,
    });
    journal.start();
    const begun = await journal.begin(read('sha256:v1'));
    if (begun.kind !== 'claimed') throw new Error('not claimed');
    await journal.markSent(begun.claim, 1_000);
    await journal.fail(begun.claim, read('sha256:v1').context, failure(ErrorCode.TIMEOUT, 'sent'), {
      argsDigest: 'sha256:a',
      key: 'r',
    });
    const edited = await retry(journal, read('sha256:v2'));
    expect(edited.kind === 'refused' && edited.error.code).toBe(ErrorCode.OUTCOME_UNKNOWN);
    const same = await retry(journal, read('sha256:v1'));
    expect(same.kind).toBe('claimed');
  });

  it.each(['INTENT', 'SENT'] as const)(
    'refuses a %s key of a live holder whose tool descriptor changed as IDEMPOTENCY_IN_PROGRESS (delivery sent)',
    async (state) => {
      const journal = await keyIn(state);
      const begun = await retry(journal, intentOf(EDITED));
      expect(begun.kind === 'refused' && [begun.error.code, begun.error.delivery]).toEqual([
        ErrorCode.IDEMPOTENCY_IN_PROGRESS,
        'sent',
      ]);
    },
  );

  it.each([
    ['COMPLETED', /which ran \(answered ok\)/],
    ['OUTCOME_UNKNOWN', /which may have run .*resolve\("k"/],
    ['SENT', /which is running or may have run/],
    ['INTENT', /which is running or may have run/],
  ] as const)(
    'refuses other arguments on a %s key as IDEMPOTENCY_CONFLICT with delivery sent, saying the key may have run',
    async (state, says) => {
      const journal = await keyIn(state);
      const begun = await retry(journal, intentOf({}, 'b'));
      expect(begun.kind).toBe('refused');
      if (begun.kind !== 'refused') return;
      const error = begun.error;
      expect([error.code, error.delivery, error.detail['keyState']]).toEqual([
        ErrorCode.IDEMPOTENCY_CONFLICT,
        'sent',
        state,
      ]);
      expect(error.message).toMatch(says);
      expect(error.message).toMatch(/do not run it again: check whether it took effect/);
      expect(error.message).not.toMatch(/use a new key/i);
      const model = toToolResult(error).content[0].text;
      expect(model).toMatch(state === 'COMPLETED' ? /which ran;/ : /which may have run;/);
      expect(model).toMatch(/do not make it again: check whether it already took effect/);
    },
  );

  it('refuses another tool on a COMPLETED key as IDEMPOTENCY_CONFLICT with delivery sent', async () => {
    const journal = await keyIn('COMPLETED');
    const begun = await retry(journal, {
      key: 'k',
      context: context('delete'),
      argsDigest: 'sha256:a',
      retryReads: false,
    });
    expect(begun.kind === 'refused' && [begun.error.code, begun.error.delivery]).toEqual([
      ErrorCode.IDEMPOTENCY_CONFLICT,
      'sent',
    ]);
  });

  it.each([
    ['an edited descriptor', intentOf(EDITED)],
    ['other arguments', intentOf({}, 'b')],
  ])(
    'refuses %s on a NOT_SENT key as IDEMPOTENCY_CONFLICT with delivery not-sent (it never ran)',
    async (_what, intent) => {
      const journal = await keyIn('NOT_SENT');
      const begun = await retry(journal, intent);
      expect(begun.kind === 'refused' && [begun.error.code, begun.error.delivery]).toEqual([
        ErrorCode.IDEMPOTENCY_CONFLICT,
        'not-sent',
      ]);
      if (begun.kind === 'refused') {
        expect(toToolResult(begun.error).content[0].text).toMatch(/was not run either/);
      }
    },
  );

  it('refuses a key a dead holder left SENT, with an edited descriptor, as OUTCOME_UNKNOWN after recovering it', async () => {
    const journal = await keyIn('SENT');
    const later = new CallJournal(journal.store, {
      owner: 'third',
      now: () => T0 + 1,
      isOwnerAlive: (owner) => owner !== 'first',
    });
    const begun = await retry(later, intentOf(EDITED));
    expect(begun.kind === 'refused' && [begun.error.code, begun.error.delivery]).toEqual([
      ErrorCode.OUTCOME_UNKNOWN,
      'sent',
    ]);
    expect((await later.get('k'))?.state).toBe('OUTCOME_UNKNOWN');
  });
});
