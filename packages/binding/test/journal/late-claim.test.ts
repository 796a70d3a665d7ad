/**
 * A keyed run without a `prepare` hook decides its key late (DESIGN §21.6): it reads nothing before
 * admission, writes its claim once as `SENT`, and reads the key only when that insert loses or the
 * run is refused before it. Every answer stays the one a read at the claim gives (DESIGN §13: the
 * key's state decides first, then the payload, then admission).
 */
import { ErrorCode, RuntimeError, type JournalStore } from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { bumpRevision, failure, harness, ok, type Harness } from '../call/support.js';

/** Counts the store's record reads; `fail` makes them throw (a database that stops answering). */
function reads(h: Harness): { count: () => number; fail: () => void } {
  const store: JournalStore = h.journal.store;
  const get = store.get.bind(store);
  let count = 0;
  let failing = false;
  store.get = (key, options) => {
    count++;
    if (failing) return Promise.reject(new Error('the database is gone'));
    return get(key, options);
  };
  return { count: () => count, fail: () => (failing = true) };
}

const run = (h: Harness, args: Record<string, unknown>, key: string) =>
  h.binding.prepareCall('s__send').run(args, { idempotencyKey: key });

describe('a keyed run decided late (DESIGN §21.6)', () => {
  it('reads a new key no time: its store work is the SENT insert and the completion', async () => {
    const h = harness();
    const count = reads(h).count;
    const outcome = await run(h, { to: 'a' }, 'k');
    expect(outcome.replayed).toBe(false);
    expect(count()).toBe(0);
    expect(h.log).toEqual(['store:SENT', 'send:send', 'store:COMPLETED']);
  });

  it('replays a completed key whose tool was revoked since, and refuses a new key as TOOL_DENIED writing nothing', async () => {
    const h = harness();
    const first = await run(h, { to: 'a' }, 'k');
    h.policy.revoked = true;
    // The key's state decides first: the recorded outcome, although admission now refuses.
    expect(await run(h, { to: 'a' }, 'k')).toEqual({ ...first, replayed: true });
    expect(await run(h, { to: 'a' }, 'k')).toEqual({ ...first, replayed: true });
    const denied = await failure(run(h, { to: 'a' }, 'fresh'));
    expect([denied.code, denied.delivery]).toEqual([ErrorCode.TOOL_DENIED, 'not-sent']);
    expect(await h.journal.get('fresh')).toBeUndefined();
    expect(h.sends).toHaveLength(1);
  });

  it('refuses a key of unknown outcome as OUTCOME_UNKNOWN (sent), not as the stale catalog it also met', async () => {
    let reply = (): never => {
      throw new RuntimeError(ErrorCode.CONNECTION_CLOSED, 'the pipe broke');
    };
    const h = harness({ reply: () => reply() });
    const lost = await failure(run(h, { to: 'a' }, 'k'));
    expect(lost.code).toBe(ErrorCode.OUTCOME_UNKNOWN);
    reply = () => {
      throw new Error('sent twice');
    };
    await bumpRevision(h.slot);
    const again = await failure(run(h, { to: 'a' }, 'k'));
    expect([again.code, again.delivery]).toEqual([ErrorCode.OUTCOME_UNKNOWN, 'sent']);
    // A key nobody used meets the stale catalog itself.
    const stale = await failure(run(h, { to: 'a' }, 'fresh'));
    expect([stale.code, stale.delivery]).toEqual([ErrorCode.STALE_CATALOG, 'not-sent']);
    expect(h.sends).toHaveLength(1);
  });

  it('refuses other arguments for a used key as IDEMPOTENCY_CONFLICT even when they fail the input schema', async () => {
    const h = harness();
    await run(h, { to: 'a' }, 'k');
    const conflict = await failure(run(h, { to: 5 }, 'k'));
    expect([conflict.code, conflict.delivery]).toEqual([ErrorCode.IDEMPOTENCY_CONFLICT, 'sent']);
    // The refused run let go of the key: the same arguments replay it.
    expect((await run(h, { to: 'a' }, 'k')).replayed).toBe(true);
    const invalid = await failure(run(h, { to: 5 }, 'fresh'));
    expect(invalid.code).toBe(ErrorCode.INVALID_ARGUMENTS);
    expect(h.sends).toHaveLength(1);
  });

  it('makes a second run of the key in this process wait for the first one decided: both replay a completed key, one of two runs of a new key is sent', async () => {
    const h = harness();
    const first = await run(h, { to: 'a' }, 'done');
    const replays = await Promise.all([run(h, { to: 'a' }, 'done'), run(h, { to: 'a' }, 'done')]);
    expect(replays).toEqual([
      { ...first, replayed: true },
      { ...first, replayed: true },
    ]);
    // And the key is free for a third run of this process once both ended.
    expect(await run(h, { to: 'a' }, 'done')).toEqual({ ...first, replayed: true });
    const both = await Promise.allSettled([run(h, { to: 'b' }, 'new'), run(h, { to: 'b' }, 'new')]);
    expect(both.map((s) => s.status).sort()).toEqual(['fulfilled', 'rejected']);
    const refused = both.find((s) => s.status === 'rejected');
    expect((refused?.reason as { code?: string }).code).toBe(ErrorCode.IDEMPOTENCY_IN_PROGRESS);
    expect(h.sends).toHaveLength(2);
  });

  it("bounds a second run's wait for an undecided late claim by its own timeout and signal: IDEMPOTENCY_IN_PROGRESS, ABORTED, nothing sent by them", async () => {
    const h = harness();
    // A hard refresh holds the write lock: the first run is claimed late and waits at the lock,
    // its key undecided.
    const release = await h.slot.lock.acquireWrite();
    const first = run(h, { to: 'a' }, 'k');
    const late = await failure(
      h.binding.prepareCall('s__send').run({ to: 'a' }, { idempotencyKey: 'k', timeoutMs: 50 }),
    );
    expect([late.code, late.delivery]).toEqual([ErrorCode.IDEMPOTENCY_IN_PROGRESS, 'sent']);
    const controller = new AbortController();
    const cancelled = h.binding
      .prepareCall('s__send')
      .run({ to: 'a' }, { idempotencyKey: 'k', signal: controller.signal });
    controller.abort(new Error('the user cancelled'));
    const aborted = await failure(cancelled);
    expect([aborted.code, aborted.delivery]).toEqual([ErrorCode.ABORTED, 'not-sent']);
    expect(h.sends).toEqual([]);
    release();
    expect((await first).replayed).toBe(false);
    expect(h.sends).toHaveLength(1);
  });

  it("keeps the run's own refusal (not sent) when the key cannot be read for the late decision", async () => {
    const h = harness();
    await run(h, { to: 'a' }, 'k');
    reads(h).fail();
    h.policy.revoked = true;
    const denied = await failure(run(h, { to: 'a' }, 'k'));
    expect([denied.code, denied.delivery]).toEqual([ErrorCode.TOOL_DENIED, 'not-sent']);
    expect(h.sends).toHaveLength(1);
    expect(h.journalErrors).toEqual([]);
  });

  it('replays a completed key at its SENT write: the insert loses, the key is read once, nothing is sent', async () => {
    const h = harness({ reply: () => ok('once') });
    await run(h, { to: 'a' }, 'k');
    const count = reads(h).count;
    const again = await run(h, { to: 'a' }, 'k');
    expect(again.replayed).toBe(true);
    expect(count()).toBe(1);
    expect(h.log).toEqual(['store:SENT', 'send:send', 'store:COMPLETED', 'store:SENT']);
  });
});
