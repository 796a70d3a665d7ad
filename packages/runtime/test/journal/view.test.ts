import { MemoryJournalStore } from '@stepbind/binding';
import { McpRuntime, isStepbindError } from '@stepbind/runtime';
import { describe, expect, it } from 'vitest';
import { trackRuntimes } from '../support/runtimes.js';
import { record } from '../support/journal.js';

const { runtimes } = trackRuntimes();

/** A runtime with no servers over `store` (the runtime closes the store). */
async function openOver(store: MemoryJournalStore): Promise<McpRuntime> {
  const runtime = await McpRuntime.open({ mcpServers: {} }, { journal: { store } });
  runtimes.push(runtime);
  return runtime;
}

describe('McpRuntime.journal (read-only view)', () => {
  it('hands out a frozen view without the claim protocol (begin, markSent, complete, store)', async () => {
    const runtime = await openOver(new MemoryJournalStore());
    const view = runtime.journal;
    expect(Object.isFrozen(view)).toBe(true);
    expect(Object.keys(view).sort()).toEqual(
      [
        'closed',
        'get',
        'location',
        'prune',
        'receipts',
        'records',
        'recover',
        'resolve',
        'verify',
      ].sort(),
    );
    for (const internal of ['begin', 'markSent', 'complete', 'fail', 'replayed', 'store', 'close'])
      expect(internal in view, internal).toBe(false);
    expect(runtime.journal).toBe(view);
    expect(view.location).toBe('memory');
  });

  it('reads records and receipts, verifies the chain and resolves an OUTCOME_UNKNOWN key', async () => {
    const store = new MemoryJournalStore();
    await store.insert(record('lost', { state: 'OUTCOME_UNKNOWN', owner: 'gone:1:x' }));
    const runtime = await openOver(store);
    const view = runtime.journal;
    expect((await view.get('lost'))?.state).toBe('OUTCOME_UNKNOWN');
    expect((await view.records({ states: ['OUTCOME_UNKNOWN'] })).map((r) => r.key)).toEqual([
      'lost',
    ]);

    const resolved = await view.resolve('lost', { outcome: 'not-run', by: 'operator' });

    expect(resolved.state).toBe('NOT_SENT');
    expect((await view.get('lost'))?.resolution?.by).toBe('operator');
    const receipts = await view.receipts({ key: 'lost' });
    expect(receipts).toHaveLength(1);
    expect(await view.verify()).toMatchObject({ ok: true, count: 1 });
  });

  it('says closed, and refuses repairs, once the runtime closed', async () => {
    const runtime = await openOver(new MemoryJournalStore());
    const view = runtime.journal;
    expect(view.closed).toBe(false);

    await runtime.close();

    expect(view.closed).toBe(true);
    const error: unknown = await view.recover().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isStepbindError(error) && error.code).toBe('JOURNAL_UNAVAILABLE');
  });
});
