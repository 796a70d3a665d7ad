/**
 * A keyed run's own CPU (DESIGN §21.1, "keyed call CPU"). The result is serialized once: its
 * digest (unchanged, so older journals verify) and the completed record's outcome text come from
 * the same text. The store deadlines of a keyed run: every journal operation
 * gets a signal bounded by the call's timeout; a store that does not answer in time sees it abort
 * with a `TimeoutError`, and a deadline whose operations settled is cleared at once (its timer
 * gone, its signal never aborting later). Fake timers drive the clock: nothing here sleeps.
 */
import {
  CallError,
  CallJournal,
  JournalError,
  MemoryJournalStore,
  armedDeadlines,
  jsonText,
  type JournalRecord,
  type ReceiptBody,
  createBinding,
  type JournalStore,
  type McpBinding,
  type ToolCallResult,
  type ToolCaller,
} from '@stepbind/binding/internal';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { catalog, serverOver } from '../call/support.js';
import { ErrorCode } from '../support/journal.js';

/** One store operation as the run asked for it: its name and the signal it was given. */
interface Seen {
  readonly operation: string;
  readonly signal: AbortSignal | undefined;
}

interface Setup {
  readonly binding: McpBinding;
  readonly seen: Seen[];
  readonly sends: number[];
  /** Every record the run asked the store to update to, as given. */
  readonly updates: JournalRecord[];
  /** Every receipt body written with an update. */
  readonly receipts: ReceiptBody[];
}

/**
 * A binding over an in-memory store that answers on a later turn; with `hangSent`, the durable
 * `SENT` write never answers until its signal aborts (then it fails as a real store does:
 * `JOURNAL_UNAVAILABLE`, `reason: 'timeout'` for a `TimeoutError`).
 */
function setup(options: { readonly hangSent?: boolean } = {}): Setup {
  const memory = new MemoryJournalStore();
  const seen: Seen[] = [];
  const updates: JournalRecord[] = [];
  const receipts: ReceiptBody[] = [];
  const later = <T>(operation: string, signal: AbortSignal | undefined, fn: () => Promise<T>) => {
    seen.push({ operation, signal });
    return new Promise((resolve) => setImmediate(resolve)).then(fn);
  };
  const hang = (signal: AbortSignal | undefined): Promise<never> =>
    new Promise((_, reject) => {
      signal?.addEventListener('abort', () => {
        const timeout = (signal.reason as { name?: unknown } | undefined)?.name === 'TimeoutError';
        reject(
          new JournalError(ErrorCode.JOURNAL_UNAVAILABLE, 'the store did not answer', {
            detail: { reason: timeout ? 'timeout' : 'aborted' },
          }),
        );
      });
    });
  const store: JournalStore = {
    location: 'memory (deadline)',
    get: (key, o) => later('get', o?.signal, () => memory.get(key)),
    insert: (record, o) => {
      if (options.hangSent === true && record.state === 'SENT') {
        seen.push({ operation: 'insert', signal: o?.signal });
        return hang(o?.signal);
      }
      return later('insert', o?.signal, () => memory.insert(record));
    },
    update: (record, version, o) => {
      updates.push(record);
      if (o?.receipt !== undefined) receipts.push(o.receipt);
      return later('update', o?.signal, () => memory.update(record, version, o));
    },
    appendReceipt: (receipt, o) =>
      later('appendReceipt', o?.signal, () => memory.appendReceipt(receipt)),
    listRecords: (filter) => memory.listRecords(filter),
    readReceipts: (o) => memory.readReceipts(o),
    anchor: () => memory.anchor(),
    prune: (o) => memory.prune(o),
    close: () => memory.close(),
  };
  const journal = new CallJournal(store);
  const sends: number[] = [];
  const caller: ToolCaller = {
    closed: false,
    callTool: async (): Promise<ToolCallResult> => {
      sends.push(sends.length);
      return { content: [{ type: 'text', text: 'done' }] };
    },
  };
  const { server, byModelName } = serverOver(catalog, caller);
  const binding = createBinding(
    { tools: [], byModelName, servers: [server], leftOut: [] },
    { stepId: 'step-1', policy: { policyEpoch: 0, isRevoked: () => false }, journal },
  );
  return { binding, seen, sends, updates, receipts };
}

/** Turns of the event loop (not of the faked clock) until the store was asked for `operation`. */
async function untilSeen(seen: readonly Seen[], operation: string): Promise<void> {
  for (let turn = 0; turn < 1_000 && !seen.some((s) => s.operation === operation); turn++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
  expect(seen.some((s) => s.operation === operation)).toBe(true);
}

beforeEach(() => {
  // Only the timers a deadline uses: the store's `setImmediate` turns stay real.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
});

afterEach(() => {
  vi.useRealTimers();
});

describe('store deadlines of a keyed run', () => {
  it('clears every deadline once its operations settled: no timer left, no signal fires later', async () => {
    const { binding, seen, sends } = setup();
    const call = binding.prepareCall('s__send');
    const before = armedDeadlines();
    await call.run({ to: 'a' }, { idempotencyKey: 'k1', timeoutMs: 500 });
    // A replay (its receipt recorded under an outcome deadline) and a refusal (a conflict).
    await call.run({ to: 'a' }, { idempotencyKey: 'k1', timeoutMs: 500 });
    await expect(call.run({ to: 'b' }, { idempotencyKey: 'k1', timeoutMs: 500 })).rejects.toThrow(
      CallError,
    );
    expect(sends).toHaveLength(1);
    expect(armedDeadlines()).toBe(before);
    const signals = seen.flatMap((s) => (s.signal === undefined ? [] : [s.signal]));
    // The claim, the SENT write and the completion, at least, ran under a deadline.
    expect(signals.length).toBeGreaterThanOrEqual(3);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(signals.filter((signal) => signal.aborted)).toEqual([]);
  });

  it('a store that does not answer the SENT write sees its signal abort at the timeout (TimeoutError): JOURNAL_UNAVAILABLE, not sent', async () => {
    const { binding, seen, sends } = setup({ hangSent: true });
    const run = binding
      .prepareCall('s__send')
      .run({ to: 'a' }, { idempotencyKey: 'k', timeoutMs: 500 });
    const outcome = run.then(
      () => undefined,
      (error: unknown) => error,
    );
    // Let the claim's reads run until the SENT write waits.
    await untilSeen(seen, 'insert');
    const sent = seen.find((s) => s.operation === 'insert')?.signal;
    expect(sent?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(499);
    expect(sent?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent?.aborted).toBe(true);
    expect((sent?.reason as DOMException).name).toBe('TimeoutError');
    const error = await outcome;
    expect(error).toBeInstanceOf(CallError);
    expect(error).toMatchObject({
      code: ErrorCode.JOURNAL_UNAVAILABLE,
      detail: { reason: 'timeout', delivery: 'not-sent' },
    });
    expect(sends).toHaveLength(0);
    expect(armedDeadlines()).toBe(0);
  });

  it("the caller's signal aborts the store's signal with its reason, and is let go once the run ended", async () => {
    const { binding, seen } = setup({ hangSent: true });
    const controller = new AbortController();
    const run = binding
      .prepareCall('s__send')
      .run({ to: 'a' }, { idempotencyKey: 'k', timeoutMs: 500, signal: controller.signal });
    const outcome = run.then(
      () => undefined,
      (error: unknown) => error,
    );
    await untilSeen(seen, 'insert');
    const sent = seen.find((s) => s.operation === 'insert')?.signal;
    const reason = new Error('stop');
    controller.abort(reason);
    expect(sent?.reason).toBe(reason);
    expect(await outcome).toBeInstanceOf(CallError);
    expect(armedDeadlines()).toBe(0);
  });
});

describe('the result of a keyed run, serialized once', () => {
  it('digests it as before and writes the outcome text its digest was made from', async () => {
    const { binding, updates, receipts } = setup();
    const outcome = await binding.prepareCall('s__send').run({ to: 'a' }, { idempotencyKey: 'k' });
    const completed = updates.find((r) => r.state === 'COMPLETED');
    expect(completed?.outcome?.kind).toBe('result');
    if (completed?.outcome == null) throw new Error('no completed record');
    // The digest of JSON.stringify(result), pinned: a journal written before verifies the same.
    expect(receipts.at(-1)?.resultDigest).toBe(
      'sha256:f18e2136669c8ee727a7ff5b7c1e3e37d56a50b31d44d865990925837b486b2d',
    );
    const text = jsonText(completed.outcome);
    expect(text).toBe(JSON.stringify(completed.outcome));
    expect(JSON.parse(text)).toEqual({
      kind: 'result',
      result: outcome.result,
      receipt: outcome.receipt,
    });
    expect(text).toContain('{"content":[{"type":"text","text":"done"}]}');
  });
});
