/**
 * In-process fakes for PreparedCall tests: one server `s` with a catalog slot, a scripted
 * `ToolCaller`, a live policy the test edits, the runtime's close signal and a journal over an
 * in-memory store. Every step a run takes (journal writes, the hook, the send) is appended to
 * `log`, so a test reads the order of phases from it.
 */
import {
  CallError,
  CallJournal,
  CatalogSlot,
  MemoryJournalStore,
  createBinding,
  createCatalogSnapshot,
  type ApprovalMode,
  type BoundServer,
  type BoundTool,
  type CatalogSnapshot,
  type InputRoundListener,
  type JournalStore,
  type McpBinding,
  type StepbindError,
  type ToolCallResult,
  type ToolCaller,
} from '@stepbind/binding/internal';
import { expect } from 'vitest';

/** The catalog of server `s`: `send` (a write), `report` (a read with an output schema). */
export const catalog = createCatalogSnapshot({
  identity: { name: 's', transportDigest: 'sha256:t', protocolVersion: '2025-06-18' },
  audience: 'default',
  policyEpoch: 0,
  pages: [
    [
      {
        name: 'send',
        inputSchema: { type: 'object', properties: { to: { type: 'string' } } },
        annotations: { readOnlyHint: false, destructiveHint: false },
      },
      {
        name: 'report',
        inputSchema: { type: 'object' },
        outputSchema: {
          type: 'object',
          properties: { n: { type: 'number' } },
          required: ['n'],
        },
        annotations: { readOnlyHint: true },
      },
    ],
  ],
  revisionProof: 'unversioned',
  discoveryStartedAt: 0,
});

/** What the scripted server does with one `tools/call`. */
export type Reply = (call: {
  readonly tool: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly signal: AbortSignal | undefined;
  readonly onInputRound: InputRoundListener | undefined;
}) => Promise<ToolCallResult> | ToolCallResult;

/** Options of {@link harness}. */
export interface HarnessOptions {
  readonly approval?: ApprovalMode;
  readonly reply?: Reply;
  /** The captured connection is closed (with this fault, if given). */
  readonly closed?: boolean;
  readonly fault?: StepbindError;
  /** Store writes of this state throw (the database is gone). */
  readonly failWritesOf?: string;
}

/** The live policy, edited by tests (a revocation, a new epoch, a standing approval). */
export interface LivePolicy {
  policyEpoch: number;
  revoked: boolean;
  approved: boolean;
  /** Thrown by `isRevoked` when set (a fleet view that cannot answer). */
  failure: Error | undefined;
}

/** One fake runtime around one captured step. */
export interface Harness {
  readonly binding: McpBinding;
  readonly journal: CallJournal;
  readonly slot: CatalogSlot;
  readonly policy: LivePolicy;
  /** The runtime's close. */
  readonly close: AbortController;
  /** What happened, in order: `store:<STATE>`, `hook`, `send:<tool>`. */
  readonly log: string[];
  readonly sends: { readonly tool: string; readonly args: unknown }[];
  readonly journalErrors: unknown[];
}

/** A successful text result. */
export const ok = (text = 'done'): ToolCallResult => ({ content: [{ type: 'text', text }] });

/** Server `s` of `snapshot` at revision 1 calling through `caller`, and its tools by model name. */
export function serverOver(
  snapshot: CatalogSnapshot,
  caller: ToolCaller,
  approval: ApprovalMode = 'none',
): { readonly server: BoundServer; readonly byModelName: Map<string, BoundTool> } {
  const server: BoundServer = {
    name: 's',
    slot: new CatalogSlot('s', snapshot),
    catalog: snapshot,
    revision: 1,
    caller,
    callTimeoutMs: 1_000,
    approval,
  };
  const byModelName = new Map<string, BoundTool>();
  for (const descriptor of snapshot.tools) {
    byModelName.set(descriptor.modelName, { modelName: descriptor.modelName, server, descriptor });
  }
  return { server, byModelName };
}

/** A fake runtime with server `s` captured at revision 1 and policy epoch 0. */
export function harness(options: HarnessOptions = {}): Harness {
  const log: string[] = [];
  const sends: { tool: string; args: unknown }[] = [];
  const memory = new MemoryJournalStore();
  const write = (state: string): void => {
    log.push(`store:${state}`);
    if (state === options.failWritesOf) throw new Error('the database is gone');
  };
  const store: JournalStore = {
    location: 'memory (logged)',
    get: (key, o) => memory.get(key, o),
    insert: async (record, o) => {
      write(record.state);
      return memory.insert(record, o);
    },
    update: async (record, version, o) => {
      write(record.state);
      return memory.update(record, version, o);
    },
    appendReceipt: (receipt, o) => memory.appendReceipt(receipt, o),
    listRecords: (filter) => memory.listRecords(filter),
    readReceipts: (o) => memory.readReceipts(o),
    anchor: () => memory.anchor(),
    prune: (o) => memory.prune(o),
    close: () => memory.close(),
  };
  const journal = new CallJournal(store);
  const reply = options.reply ?? (() => ok());
  const caller: ToolCaller = {
    closed: options.closed ?? false,
    fault: options.fault,
    callTool: async (tool, args, o) => {
      log.push(`send:${tool}`);
      sends.push({ tool, args });
      return await reply({ tool, args, signal: o.signal, onInputRound: o.onInputRound });
    },
  };
  const { server, byModelName } = serverOver(catalog, caller, options.approval);
  const policy: LivePolicy = {
    policyEpoch: 0,
    revoked: false,
    approved: false,
    failure: undefined,
  };
  const close = new AbortController();
  const journalErrors: unknown[] = [];
  const binding = createBinding(
    { tools: [], byModelName, servers: [server], leftOut: [] },
    {
      stepId: 'step-1',
      policy: {
        get policyEpoch() {
          return policy.policyEpoch;
        },
        isRevoked: () => {
          if (policy.failure !== undefined) throw policy.failure;
          return policy.revoked;
        },
        isApproved: () => policy.approved,
      },
      journal,
      closeSignal: close.signal,
      onJournalError: (error) => journalErrors.push(error),
    },
  );
  return { binding, journal, slot: server.slot, policy, close, log, sends, journalErrors };
}

/** Moves the slot to the next revision, as a hard refresh does (under the write lock). */
export async function bumpRevision(slot: CatalogSlot): Promise<void> {
  const release = await slot.lock.acquireWrite();
  slot.installLocked(catalog);
  release();
}

/** The `CallError` `promise` rejects with (fails the test when it resolves). */
export async function failure(promise: Promise<unknown>): Promise<CallError> {
  const error: unknown = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CallError);
  return error as CallError;
}

/** A promise and the function that resolves it (a gate a fake waits on). */
export function gate<T = void>(): {
  readonly promise: Promise<T>;
  readonly open: (value: T) => void;
} {
  let open: (value: T) => void = () => undefined;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}
