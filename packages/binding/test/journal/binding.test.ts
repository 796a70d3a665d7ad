/**
 * PreparedCall.run with a journal and in-process callers: the order of durable writes and sends,
 * replays through `run`, delivery on every error, and the model-facing messages.
 */
import {
  CallError,
  CallJournal,
  MemoryJournalStore,
  RuntimeError,
  createBinding,
  createCatalogSnapshot,
  toToolResult,
  type JournalStore,
  type McpBinding,
  type ToolCallResult,
  type ToolCaller,
} from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { serverOver } from '../call/support.js';
import { ErrorCode } from '../support/journal.js';

const catalog = createCatalogSnapshot({
  identity: { name: 's', transportDigest: 'sha256:t' },
  audience: 'default',
  policyEpoch: 0,
  pages: [
    [
      {
        name: 'send',
        inputSchema: { type: 'object', properties: { to: { type: 'string' } } },
        annotations: { readOnlyHint: false, destructiveHint: false },
      },
    ],
  ],
  revisionProof: 'unversioned',
  discoveryStartedAt: 0,
});

interface Setup {
  readonly binding: McpBinding;
  readonly journal: CallJournal;
  readonly sends: ToolCallResult[];
}

function setup(
  call: (memory: MemoryJournalStore) => Promise<ToolCallResult>,
  options: { readonly closed?: boolean } = {},
): Setup {
  // A store that answers on a later turn, as a database over the network does.
  const memory = new MemoryJournalStore();
  const later = <T>(fn: () => Promise<T>): Promise<T> =>
    new Promise((resolve) => setImmediate(resolve)).then(fn);
  const store: JournalStore = {
    location: 'memory (async)',
    get: (key) => later(() => memory.get(key)),
    insert: (record) => later(() => memory.insert(record)),
    update: (record, version, options) => later(() => memory.update(record, version, options)),
    appendReceipt: (receipt) => later(() => memory.appendReceipt(receipt)),
    listRecords: (filter) => memory.listRecords(filter),
    readReceipts: (options) => memory.readReceipts(options),
    anchor: () => memory.anchor(),
    prune: (options) => memory.prune(options),
    close: () => memory.close(),
  };
  const journal = new CallJournal(store);
  const sends: ToolCallResult[] = [];
  const caller: ToolCaller = {
    closed: options.closed ?? false,
    callTool: async () => {
      const result = await call(memory);
      sends.push(result);
      return result;
    },
  };
  const { server, byModelName } = serverOver(catalog, caller);
  const binding = createBinding(
    { tools: [], byModelName, servers: [server], leftOut: [] },
    {
      stepId: 'step-1',
      policy: { policyEpoch: 0, isRevoked: () => false },
      journal,
    },
  );
  return { binding, journal, sends };
}

async function failure(promise: Promise<unknown>): Promise<CallError> {
  const error: unknown = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CallError);
  return error as CallError;
}

const ok = (text: string): ToolCallResult => ({ content: [{ type: 'text', text }] });

describe('PreparedCall.run with a journal', () => {
  it('makes the key SENT before the caller is asked to send, and COMPLETED after the answer', async () => {
    let stateAtSend: string | undefined;
    const { binding, journal } = setup(async (memory) => {
      // What the store holds the moment the caller is asked to send (read synchronously).
      const atSend = memory.get('k');
      stateAtSend = (await atSend)?.state;
      return ok('done');
    });
    const outcome = await binding.prepareCall('s__send').run({ to: 'a' }, { idempotencyKey: 'k' });
    expect(stateAtSend).toBe('SENT');
    expect(outcome.replayed).toBe(false);
    expect((await journal.get('k'))?.state).toBe('COMPLETED');
  });

  it('replays a completed key through run: the first result and receipt, nothing sent', async () => {
    const { binding, sends } = setup(async () => ok(`call ${String(Math.random())}`));
    const call = binding.prepareCall('s__send');
    const first = await call.run({ to: 'a' }, { idempotencyKey: 'k' });
    const again = await binding.prepareCall('s__send').run({ to: 'a' }, { idempotencyKey: 'k' });
    expect(again).toEqual({ ...first, replayed: true });
    expect(sends).toHaveLength(1);
  });

  it('refuses a second run of a key still running in this process', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let sending!: () => void;
    const sent = new Promise<void>((resolve) => (sending = resolve));
    const { binding, sends } = setup(async () => {
      sending();
      await gate;
      return ok('slow');
    });
    const first = binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' });
    await sent;
    const second = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect(second.code).toBe('IDEMPOTENCY_IN_PROGRESS');
    expect(toToolResult(second).content[0].text).toMatch(/already running/);
    release();
    await first;
    expect(sends).toHaveLength(1);
  });

  it("turns a foreign caller's CONNECTION_CLOSED without delivery into OUTCOME_UNKNOWN (it may have run)", async () => {
    const { binding, journal } = setup(async () => {
      throw new RuntimeError(ErrorCode.CONNECTION_CLOSED, 'the pipe broke');
    });
    const error = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect([error.code, error.delivery]).toEqual(['OUTCOME_UNKNOWN', 'sent']);
    expect((await journal.get('k'))?.state).toBe('OUTCOME_UNKNOWN');
  });

  it('keeps CONNECTION_CLOSED when the caller says nothing was written, and frees the key', async () => {
    const { binding, journal } = setup(async () => {
      throw new RuntimeError(ErrorCode.CONNECTION_CLOSED, 'gone before writing', {
        detail: { delivery: 'not-sent' },
      });
    });
    const error = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect([error.code, error.delivery]).toEqual(['CONNECTION_CLOSED', 'not-sent']);
    expect(toToolResult(error).content[0].text).toMatch(/not sent, so it did not run/);
    expect((await journal.get('k'))?.state).toBe('NOT_SENT');
  });

  it('refuses a closed captured connection before writing anything to the journal key', async () => {
    const { binding, journal, sends } = setup(async () => ok('never'), { closed: true });
    const error = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect([error.code, error.delivery]).toEqual(['CONNECTION_CLOSED', 'not-sent']);
    // Without a prepare hook the claim is written only as SENT, just before sending: nothing here.
    expect(await journal.get('k')).toBeUndefined();
    expect(sends).toEqual([]);
    // With one, the INTENT written at the claim is released as NOT_SENT.
    await failure(
      binding.prepareCall('s__send').run({}, { idempotencyKey: 'p', prepare: () => undefined }),
    );
    expect((await journal.get('p'))?.state).toBe('NOT_SENT');
  });

  it('says "check before retrying" for every failure after sending and never for one before', () => {
    const sent = (code: ErrorCode) =>
      toToolResult(new CallError(code, 'x', { detail: { server: 's', delivery: 'sent' } }))
        .content[0].text;
    const unsent = (code: ErrorCode) =>
      toToolResult(new CallError(code, 'x', { detail: { server: 's', delivery: 'not-sent' } }))
        .content[0].text;
    for (const code of [
      ErrorCode.OUTCOME_UNKNOWN,
      ErrorCode.TIMEOUT,
      ErrorCode.ABORTED,
      ErrorCode.SERVER_ERROR,
      ErrorCode.INVALID_TOOL_OUTPUT,
      ErrorCode.JOURNAL_BUSY,
    ]) {
      expect(sent(code), code).toMatch(/check/i);
    }
    for (const code of [
      ErrorCode.CONNECTION_CLOSED,
      ErrorCode.STALE_CATALOG,
      ErrorCode.ABORTED,
      ErrorCode.JOURNAL_BUSY,
    ]) {
      expect(unsent(code), code).not.toMatch(/check/i);
    }
  });

  it('refuses a key without a journal, and a malformed key, before anything runs', async () => {
    const { binding } = setup(async () => ok('x'));
    const empty = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: '' }));
    expect([empty.code, empty.delivery]).toEqual(['INVALID_OPTIONS', 'not-sent']);
    const control = await failure(
      binding.prepareCall('s__send').run({}, { idempotencyKey: 'a\nb' }),
    );
    expect(control.code).toBe('INVALID_OPTIONS');
  });
});
