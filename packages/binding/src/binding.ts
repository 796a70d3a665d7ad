import {
  DEFAULT_CALL_LIMITS,
  checkJsonValue,
  describeValueProblem,
  type CallLimits,
} from './bounds.js';
import { digestOf } from './canonical.js';
import {
  CallError,
  ErrorCode,
  StepbindError,
  type Delivery,
  type ErrorCode as Code,
} from './errors.js';
import type { CallJournal, JournalClaim } from './journal/journal.js';
import type { CallContext, JournalRecord, RecordedOutcome } from './journal/store.js';
import { RevisionLock, type Release } from './lock.js';
import type { McpContentBlock } from './tools/content.js';
import type { ModelTool } from './tools/view.js';
import type { CatalogSnapshot, EffectClass, ToolDescriptor } from './snapshot.js';

/** A raw `tools/call` result (content, structuredContent, isError, _meta...). */
export interface ToolCallResult {
  readonly content?: readonly McpContentBlock[];
  readonly structuredContent?: Readonly<Record<string, unknown>>;
  readonly isError?: boolean;
  readonly [key: string]: unknown;
}

/**
 * The one thing a prepared call needs from a server: send `tools/call` on this exact connection.
 * Implementations map failures to {@link StepbindError}s (`TIMEOUT`, `ABORTED`, `CONNECTION_CLOSED`,
 * `OUTCOME_UNKNOWN`, `SERVER_ERROR`), say in `detail.delivery` whether the request was written
 * (`not-sent` only when it certainly was not; a failure without it counts as `sent`), and send
 * `notifications/cancelled` on timeout or abort. A connection lost after the request was written is
 * `OUTCOME_UNKNOWN`, never `CONNECTION_CLOSED`.
 */
export interface ToolCaller {
  /** True once the connection is gone; a prepared call then fails with `CONNECTION_CLOSED`. */
  readonly closed: boolean;
  /**
   * The transport fault that closed the connection (`MESSAGE_TOO_LARGE`), if any: a prepared call
   * on the closed connection then fails with its code instead of `CONNECTION_CLOSED`.
   */
  readonly fault?: StepbindError | undefined;
  callTool(
    tool: string,
    args: Readonly<Record<string, unknown>>,
    options: { readonly signal?: AbortSignal; readonly timeoutMs: number },
  ): Promise<ToolCallResult>;
}

/**
 * The catalog of one server inside a ConnectionSet, with its revision behind a {@link RevisionLock}.
 * The catalog is swapped only under the write lock, and every swap increments the revision, so a
 * prepared call that holds the read lock sees a revision that cannot change until it finishes.
 */
export class CatalogSlot {
  /** Configured server name. */
  readonly server: string;
  /** The fair, writer-preferring lock guarding {@link catalog} and {@link revision}. */
  readonly lock = new RevisionLock();
  #catalog: CatalogSnapshot;
  #revision = 1;
  #listeners = new Set<() => void>();

  constructor(server: string, catalog: CatalogSnapshot) {
    this.server = server;
    this.#catalog = catalog;
  }

  /** The catalog currently in force. */
  get catalog(): CatalogSnapshot {
    return this.#catalog;
  }

  /** Starts at 1 and increments on every swap. */
  get revision(): number {
    return this.#revision;
  }

  /**
   * Installs `catalog` and increments the revision; the caller must hold the write lock (this lets
   * a refresh swap several slots and move its pointer in one synchronous step).
   *
   * @throws Error when the write lock is not held.
   */
  installLocked(catalog: CatalogSnapshot): number {
    if (!this.lock.writing) throw new Error(`CatalogSlot(${this.server}): write lock not held`);
    this.#catalog = catalog;
    this.#revision++;
    for (const listener of this.#listeners) listener();
    return this.#revision;
  }

  /** Calls `listener` after every swap (inside the write lock). Returns an unsubscribe function. */
  onSwap(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/** One server as a binding sees it: a frozen catalog at a revision, and the exact client. */
export interface BoundServer {
  readonly name: string;
  readonly slot: CatalogSlot;
  readonly catalog: CatalogSnapshot;
  /** The slot's revision when this view was built. */
  readonly revision: number;
  readonly caller: ToolCaller;
  /** Default per-call timeout for this server's tools. */
  readonly callTimeoutMs: number;
  /** Which calls to this server need an approval from the `prepare` hook. */
  readonly approval: ApprovalMode;
  /** Raw tool names of this server that never need an approval. @default none */
  readonly autoApprove?: ReadonlySet<string>;
  /** Depth and size bounds of this server's call arguments and results (positive integers). */
  readonly callLimits?: Partial<CallLimits>;
  /**
   * `read` tools of this server whose outcome is unknown may be sent again under the same
   * idempotency key. @default false
   */
  readonly retryReads?: boolean;
}

/**
 * Which calls need an approval (`ctx.approve()` in the `prepare` hook) before anything is sent:
 * - `unproven-writes` (the default): non-`read` tools of a catalog that is not proven (`ELIGIBLE` or
 *   `SNAPSHOT_PROVEN`); every catalog without a server-provided revision token is unproven;
 * - `all-writes`: every non-`read` tool, proven or not;
 * - `none`: no approval is asked for (an explicit opt-out per server).
 *
 * Effect classes come from annotations, which are untrusted hints: a tool without annotations is
 * `unknown`, and only `read` tools are exempt.
 */
export type ApprovalMode = 'none' | 'unproven-writes' | 'all-writes';

/** A model-facing tool and where it runs. */
export interface BoundTool {
  readonly modelName: string;
  readonly server: BoundServer;
  readonly descriptor: ToolDescriptor;
}

/** A server that is not part of a step, and why. */
export interface LeftOutServer {
  readonly name: string;
  readonly required: boolean;
  readonly reason: 'starting' | 'failed' | 'closed';
  readonly error?: { readonly code: string; readonly message: string };
}

/**
 * An immutable projection of a ConnectionSet at one set of revisions: built once per publication
 * or catalog swap, shared by every binding captured until the next one. Capture cost is O(1) in the
 * number of tools because bindings only point at a view.
 */
export interface BindingView {
  readonly tools: readonly ModelTool[];
  readonly byModelName: ReadonlyMap<string, BoundTool>;
  readonly servers: readonly BoundServer[];
  readonly leftOut: readonly LeftOutServer[];
}

/** Live policy the runtime owns; read at call time, not at capture. */
export interface CallPolicy {
  /** Current policy epoch; a binding captured under another epoch is refused (`TOOL_DENIED`). */
  readonly policyEpoch: number;
  /** True when the (server, raw tool) pair was revoked after capture. */
  isRevoked(server: string, tool: string): boolean;
}

/** Status of one server in a binding. */
export type BindingServerStatus =
  | {
      readonly name: string;
      readonly bound: true;
      readonly catalogState: string;
      readonly generation: number;
      readonly revision: number;
      readonly sourceRevision: string | undefined;
      readonly toolCount: number;
    }
  | ({ readonly bound: false } & LeftOutServer);

/** What the `prepare` hook receives. It may throw to veto the call (nothing is sent). */
export interface PrepareContext {
  readonly server: string;
  readonly tool: string;
  readonly modelName: string;
  readonly effectClass: EffectClass;
  readonly catalogState: string;
  /**
   * True when the server's {@link ApprovalMode} requires an approval for this call: unless the hook
   * calls {@link approve}, the call is refused with `APPROVAL_REQUIRED` and nothing is sent.
   */
  readonly approvalRequired: boolean;
  /** Approves this call (the human or policy decision). Returning without it is not an approval. */
  approve(): void;
  readonly args: Readonly<Record<string, unknown>>;
  readonly signal: AbortSignal | undefined;
}

/** Options of {@link PreparedCall.run}. */
export interface RunOptions {
  /**
   * Runs under the revision read lock after admission and before `tools/call`: approvals, argument
   * rewriting, uploads. Return new arguments to replace them (they are validated again).
   */
  readonly prepare?: (
    ctx: PrepareContext,
  ) => Promise<Readonly<Record<string, unknown>> | void> | Readonly<Record<string, unknown>> | void;
  /** Cancels waiting, preparing or the call (a sent call gets `notifications/cancelled`). */
  readonly signal?: AbortSignal;
  /** Per-call timeout. @default the server's `callTimeoutMs` (60000) */
  readonly timeoutMs?: number;
  /**
   * Makes the call idempotent (DESIGN §13): a key whose call completed returns the stored result
   * and receipt (`replayed: true`, nothing is sent); a key in progress, used for another payload or
   * whose outcome is unknown is refused (`IDEMPOTENCY_IN_PROGRESS`, `IDEMPOTENCY_CONFLICT`,
   * `OUTCOME_UNKNOWN`). Use something stable across restarts, such as the model's tool-call id with
   * the step: `` `${stepKey}:${toolCall.id}` ``. 1 to 512 characters.
   */
  readonly idempotencyKey?: string;
}

/** Proof of what ran: binds a call to the catalog the model saw. */
export interface CallReceipt {
  readonly stepId: string;
  readonly server: string;
  readonly tool: string;
  readonly modelName: string;
  readonly descriptorDigest: string;
  readonly inputSchemaDigest: string;
  readonly outputSchemaDigest: string | undefined;
  readonly generation: number;
  readonly revision: number;
  readonly policyEpoch: number;
  readonly audience: string;
  readonly catalogState: string;
  readonly effectClass: EffectClass;
  /** `ok`, or `tool-error` when the server returned `isError: true`. */
  readonly outcome: 'ok' | 'tool-error';
  /** The run's idempotency key, if it had one. */
  readonly idempotencyKey: string | undefined;
  /**
   * `sha256:` digest of the canonical JSON of the arguments given to `run`; `undefined` when the
   * binding has no journal.
   */
  readonly argsDigest: string | undefined;
  /** Epoch milliseconds when `run` was called. */
  readonly startedAt: number;
  /** Milliseconds spent in each phase. */
  readonly timings: {
    readonly lockWaitMs: number;
    readonly prepareMs: number;
    readonly callMs: number;
    readonly totalMs: number;
  };
}

type CallPhase = 'admission' | 'prepare' | 'call' | 'output';

/** A successful call: the raw result and its receipt. */
export interface CallOutcome {
  readonly result: ToolCallResult;
  /** The receipt of the run that reached the server (the original one for a replay). */
  readonly receipt: CallReceipt;
  /** True when the result came from the journal for a repeated idempotency key: nothing was sent. */
  readonly replayed: boolean;
}

interface BindingState {
  released: boolean;
  inFlight: number;
  onDrained: (() => void) | undefined;
  readonly journal: CallJournal | undefined;
  readonly onJournalError: (error: unknown) => void;
}

/** Options of {@link createBinding}. */
export interface CreateBindingOptions {
  readonly stepId: string;
  readonly policy: CallPolicy;
  /** Called once when the binding is released and its last call finished. */
  readonly onDrained?: () => void;
  /** Records every run's outcome and holds idempotency keys. @default none (no keys, no receipts log) */
  readonly journal?: CallJournal;
  /**
   * Called when the journal could not record the outcome of a call that is reported anyway (a
   * result that came back while the disk was full).
   */
  readonly onJournalError?: (error: unknown) => void;
}

/**
 * Creates the frozen binding of one sampling step over `view`. O(servers), never O(tools).
 */
export function createBinding(view: BindingView, options: CreateBindingOptions): McpBinding {
  return new McpBinding(view, options);
}

/**
 * The tools one model sampling step saw, and the exact clients that run them. Frozen. Release it
 * (or `await using` it) when the step ends so retired connections can close.
 */
export class McpBinding {
  /** Identifier of the step, echoed in receipts. */
  readonly stepId: string;
  /** Policy epoch in force at capture. */
  readonly policyEpoch: number;
  /** Model-facing tools: `{ name, description, inputSchema }`. */
  readonly tools: readonly ModelTool[];
  /** Every configured server: bound (with catalog generation and revision) or left out (why). */
  readonly servers: readonly BindingServerStatus[];
  readonly #view: BindingView;
  readonly #policy: CallPolicy;
  readonly #state: BindingState;

  /** @internal use {@link createBinding}. */
  constructor(view: BindingView, options: CreateBindingOptions) {
    this.stepId = options.stepId;
    this.policyEpoch = options.policy.policyEpoch;
    this.tools = view.tools;
    this.#view = view;
    this.#policy = options.policy;
    this.#state = {
      released: false,
      inFlight: 0,
      onDrained: options.onDrained,
      journal: options.journal,
      onJournalError: options.onJournalError ?? (() => undefined),
    };
    this.servers = Object.freeze([
      ...view.servers.map((s): BindingServerStatus =>
        Object.freeze({
          name: s.name,
          bound: true,
          catalogState: s.catalog.state,
          generation: s.catalog.generation,
          revision: s.revision,
          sourceRevision: s.catalog.sourceRevision,
          toolCount: s.catalog.tools.length,
        }),
      ),
      ...view.leftOut.map((s): BindingServerStatus => Object.freeze({ ...s, bound: false })),
    ]);
    Object.freeze(this);
  }

  /** True after {@link release}. */
  get released(): boolean {
    return this.#state.released;
  }

  /**
   * Resolves a model-facing tool name to a call bound to this step's catalog, revision and client.
   *
   * @throws CallError `UNKNOWN_TOOL` when the step did not advertise that name; `BINDING_RELEASED`
   *   after {@link release}.
   */
  prepareCall(modelName: string): PreparedCall {
    if (this.#state.released) throw releasedError(this.stepId, modelName);
    const bound = this.#view.byModelName.get(modelName);
    if (bound === undefined) {
      throw new CallError(
        ErrorCode.UNKNOWN_TOOL,
        `This step has no tool named "${modelName}". Call only the tools advertised in this step.`,
        { detail: { modelName, stepId: this.stepId, delivery: 'not-sent' } },
      );
    }
    return new PreparedCall(bound, this.stepId, this.policyEpoch, this.#policy, this.#state);
  }

  /** Ends the step. Idempotent. Calls already running finish; new ones are refused. */
  release(): void {
    if (this.#state.released) return;
    this.#state.released = true;
    maybeDrained(this.#state);
  }

  /** Same as {@link release}. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.release();
  }
}

function maybeDrained(state: BindingState): void {
  if (state.released && state.inFlight === 0 && state.onDrained !== undefined) {
    const done = state.onDrained;
    state.onDrained = undefined;
    done();
  }
}

function releasedError(stepId: string, modelName: string): CallError {
  return new CallError(
    ErrorCode.BINDING_RELEASED,
    `The binding of step ${stepId} was released; "${modelName}" was not run. Call it from the current step.`,
    { detail: { stepId, modelName, delivery: 'not-sent' } },
  );
}

/**
 * One tool call the model made, bound to the step's catalog, revision and client. Never re-routed.
 */
export class PreparedCall {
  /** Configured server name. */
  readonly server: string;
  /** Raw MCP tool name. */
  readonly tool: string;
  /** The name the model used. */
  readonly modelName: string;
  /** The slot revision captured with the step. */
  readonly revision: number;
  /** The frozen descriptor the model saw. */
  readonly descriptor: ToolDescriptor;
  readonly #bound: BoundTool;
  readonly #stepId: string;
  readonly #policyEpoch: number;
  readonly #policy: CallPolicy;
  readonly #state: BindingState;

  /** @internal use {@link McpBinding.prepareCall}. */
  constructor(
    bound: BoundTool,
    stepId: string,
    policyEpoch: number,
    policy: CallPolicy,
    state: BindingState,
  ) {
    this.server = bound.server.name;
    this.tool = bound.descriptor.name;
    this.modelName = bound.modelName;
    this.revision = bound.server.revision;
    this.descriptor = bound.descriptor;
    this.#bound = bound;
    this.#stepId = stepId;
    this.#policyEpoch = policyEpoch;
    this.#policy = policy;
    this.#state = state;
    Object.freeze(this);
  }

  /**
   * Runs the call (DESIGN §7): idempotency key (DESIGN §13: replay, `IDEMPOTENCY_CONFLICT`,
   * `IDEMPOTENCY_IN_PROGRESS`, `OUTCOME_UNKNOWN`) → read lock → revision check (`STALE_CATALOG`:
   * nothing runs, nothing is sent) → admission (policy epoch, revocation, approval, input schema:
   * `TOOL_DENIED`, `INVALID_ARGUMENTS`) → `prepare` → the key's durable `SENT` record →
   * `tools/call` on the captured client (`TIMEOUT`, `ABORTED`, `CONNECTION_CLOSED` when nothing was
   * sent, `OUTCOME_UNKNOWN` when the connection was lost after sending, `SERVER_ERROR`) → output
   * validation against the frozen schema (`INVALID_TOOL_OUTPUT`; the call did run) → the outcome
   * and receipt are journaled → release → result and receipt.
   *
   * @throws CallError with one of the codes above (or `JOURNAL_UNAVAILABLE` when the journal cannot
   *   record the key before sending); `detail` names server, tool, model name and step, and
   *   `detail.delivery` says whether the request was written to the server.
   */
  async run(
    args: Readonly<Record<string, unknown>> = {},
    options: RunOptions = {},
  ): Promise<CallOutcome> {
    const state = this.#state;
    const key = options.idempotencyKey;
    // Every run the journal counts ends in exactly one of complete, fail or replayed.
    // Unkeyed runs skip a journal that records only keyed runs (the in-memory default).
    const journal =
      state.journal !== undefined &&
      (key !== undefined || state.journal.recordsEveryRun) &&
      state.journal.start()
        ? state.journal
        : undefined;
    const startedAt = Date.now();
    const t0 = performance.now();
    let context: CallContext | undefined;
    let argsDigest: string | undefined;
    let claim: JournalClaim | undefined;
    let recorded = false;
    let counted = false;
    let release: Release | undefined;
    // Where a failure happened decides what it means: nothing sent before 'call', a run call after.
    let phase: CallPhase = 'admission';
    try {
      if (state.released) throw releasedError(this.#stepId, this.modelName);
      state.inFlight++;
      counted = true;
      if (journal !== undefined) {
        context = this.#context();
        // Bounded first: the digest recurses over the arguments (20,000 levels must not overflow).
        this.#checkBounds(args, 'Argument');
        argsDigest = this.#argsDigest(args);
      }
      if (key !== undefined) {
        if (journal === undefined || context === undefined || argsDigest === undefined) {
          throw this.#noJournal(key);
        }
        checkKey(key, this.#detail({}));
        // Without a prepare hook nothing long can come between claim and send: the claim is
        // written once, as SENT, just before sending.
        const begun = await journal.begin(
          { key, context, argsDigest, retryReads: this.#bound.server.retryReads === true },
          { deferWrite: options.prepare === undefined },
        );
        if (begun.kind === 'refused') throw begun.error;
        if (begun.kind === 'replay') {
          recorded = true;
          return await this.#replay(journal, begun.record, begun.outcome, context);
        }
        claim = begun.claim;
      }
      const slot = this.#bound.server.slot;
      release = await slot.lock.acquireRead(
        options.signal === undefined ? {} : { signal: options.signal },
      );
      const tLock = performance.now();
      if (slot.revision !== this.revision) {
        throw new CallError(
          ErrorCode.STALE_CATALOG,
          `The tool catalog of server "${this.server}" changed after this step was captured (revision ${this.revision} → ${slot.revision}); "${this.modelName}" was not run and nothing was sent. Call again with the tools of the next step.`,
          {
            detail: this.#detail({
              capturedRevision: this.revision,
              currentRevision: slot.revision,
            }),
          },
        );
      }
      const approvalRequired = this.#admit(options);
      // Arguments already bounded for their digest are not walked again.
      let callArgs = this.#checkArgs(args, argsDigest !== undefined);
      if (options.prepare !== undefined) {
        phase = 'prepare';
        let approved = false;
        const replaced = await options.prepare({
          server: this.server,
          tool: this.tool,
          modelName: this.modelName,
          effectClass: this.descriptor.effectClass,
          catalogState: this.#bound.server.catalog.state,
          approvalRequired,
          approve: () => {
            approved = true;
          },
          args: callArgs,
          signal: options.signal,
        });
        phase = 'admission';
        if (approvalRequired && !approved) throw this.#approvalRequired(true);
        if (replaced !== undefined) callArgs = this.#checkArgs(replaced);
      }
      if (options.signal?.aborted === true) {
        throw new CallError(
          ErrorCode.ABORTED,
          `"${this.modelName}" was cancelled before it was sent.`,
          { detail: this.#detail({}), cause: options.signal.reason },
        );
      }
      const tPrepared = performance.now();
      const caller = this.#bound.server.caller;
      if (caller.closed) {
        if (caller.fault !== undefined) throw caller.fault;
        throw new CallError(
          ErrorCode.CONNECTION_CLOSED,
          `The connection of server "${this.server}" captured by this step is closed; "${this.modelName}" was not run and is never re-routed. Call again from the next step.`,
          { detail: this.#detail({}) },
        );
      }
      const timeoutMs = options.timeoutMs ?? this.#bound.server.callTimeoutMs;
      phase = 'admission';
      // The key's SENT record is durable before a byte is written: a crash from here on leaves
      // OUTCOME_UNKNOWN, never a key that looks unsent.
      if (claim !== undefined && journal !== undefined) await journal.markSent(claim, timeoutMs);
      phase = 'call';
      const result = await caller.callTool(this.tool, callArgs, {
        timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
      const tCalled = performance.now();
      phase = 'output';
      this.#checkOutput(result);
      const catalog = this.#bound.server.catalog;
      const receipt: CallReceipt = Object.freeze({
        stepId: this.#stepId,
        server: this.server,
        tool: this.tool,
        modelName: this.modelName,
        descriptorDigest: this.descriptor.descriptorDigest,
        inputSchemaDigest: this.descriptor.inputSchemaDigest,
        outputSchemaDigest: this.descriptor.outputSchemaDigest,
        generation: catalog.generation,
        revision: this.revision,
        policyEpoch: this.#policyEpoch,
        audience: catalog.audience,
        catalogState: catalog.state,
        effectClass: this.descriptor.effectClass,
        outcome: result.isError === true ? 'tool-error' : 'ok',
        idempotencyKey: key,
        argsDigest,
        startedAt,
        timings: Object.freeze({
          lockWaitMs: tLock - t0,
          prepareMs: tPrepared - tLock,
          callMs: tCalled - tPrepared,
          totalMs: performance.now() - t0,
        }),
      });
      if (journal !== undefined) {
        recorded = true;
        try {
          await journal.complete(claim, { result, receipt });
        } catch (error) {
          // The call ran and its result is here: report it, and the journal failure on the side
          // (the key stays SENT and becomes OUTCOME_UNKNOWN at the next recovery).
          state.onJournalError(error);
        }
      }
      return { result, receipt, replayed: false };
    } catch (error) {
      const failure = this.#fail(error, phase);
      if (journal !== undefined && !recorded) {
        try {
          await journal.fail(claim, context ?? this.#context(), failure, {
            argsDigest: argsDigest ?? null,
            key: key ?? null,
          });
        } catch (journalError) {
          state.onJournalError(journalError);
        }
      }
      throw failure;
    } finally {
      release?.();
      if (counted) {
        state.inFlight--;
        maybeDrained(state);
      }
    }
  }

  async #replay(
    journal: CallJournal,
    record: JournalRecord,
    outcome: RecordedOutcome,
    context: CallContext,
  ): Promise<CallOutcome> {
    try {
      await journal.replayed(record, context);
    } catch (error) {
      this.#state.onJournalError(error);
    }
    if (outcome.kind === 'result') {
      return { result: outcome.result, receipt: Object.freeze(outcome.receipt), replayed: true };
    }
    throw new CallError(outcome.code, outcome.message, {
      detail: {
        ...outcome.detail,
        ...this.#detail({ key: record.key, replayed: true }),
      },
    });
  }

  #context(): CallContext {
    const catalog = this.#bound.server.catalog;
    return {
      stepId: this.#stepId,
      server: this.server,
      tool: this.tool,
      modelName: this.modelName,
      descriptorDigest: this.descriptor.descriptorDigest,
      effectClass: this.descriptor.effectClass,
      generation: catalog.generation,
      revision: this.revision,
      policyEpoch: this.#policyEpoch,
      audience: catalog.audience,
      catalogState: catalog.state,
    };
  }

  #argsDigest(args: unknown): string {
    try {
      return digestOf(args);
    } catch (error) {
      throw new CallError(
        ErrorCode.INVALID_ARGUMENTS,
        `Arguments for "${this.modelName}" are not JSON (${error instanceof Error ? error.message : String(error)}); nothing was sent. Fix the arguments and call again.`,
        { detail: this.#detail({}), cause: error },
      );
    }
  }

  #noJournal(key: string): CallError {
    return new CallError(
      ErrorCode.INVALID_OPTIONS,
      `"${this.modelName}" was given idempotency key "${key}", but this binding has no journal (or it is closed); nothing was sent. Capture the step from an open McpRuntime.`,
      { detail: this.#detail({ key }) },
    );
  }

  #admit(options: RunOptions): boolean {
    const policy = this.#policy;
    if (policy.policyEpoch !== this.#policyEpoch) {
      throw new CallError(
        ErrorCode.TOOL_DENIED,
        `The policy changed after this step was captured (epoch ${this.#policyEpoch} → ${policy.policyEpoch}); "${this.modelName}" was not run. Call again from the next step.`,
        {
          detail: this.#detail({
            reason: 'policy-epoch',
            capturedEpoch: this.#policyEpoch,
            currentEpoch: policy.policyEpoch,
          }),
        },
      );
    }
    if (policy.isRevoked(this.server, this.tool)) {
      throw new CallError(
        ErrorCode.TOOL_DENIED,
        `Tool "${this.tool}" of server "${this.server}" was revoked; "${this.modelName}" was not run.`,
        { detail: this.#detail({ reason: 'revoked' }) },
      );
    }
    const server = this.#bound.server;
    const approvalRequired =
      server.autoApprove?.has(this.tool) !== true &&
      needsApproval(server.approval, server.catalog.state, this.descriptor.effectClass);
    if (approvalRequired && options.prepare === undefined) throw this.#approvalRequired(false);
    return approvalRequired;
  }

  #approvalRequired(hookRan: boolean): CallError {
    const mode = this.#bound.server.approval;
    const state = this.#bound.server.catalog.state;
    const why =
      mode === 'all-writes'
        ? `server "${this.server}" requires an approval for every call that may change state`
        : `the catalog of server "${this.server}" is not proven (${state}: the server sends no catalog revision token)`;
    return new CallError(
      ErrorCode.APPROVAL_REQUIRED,
      `"${this.modelName}" may change state (effect ${this.descriptor.effectClass}) and ${why}; it was not run and nothing was sent. ${hookRan ? 'The prepare hook returned without calling ctx.approve().' : 'No prepare hook was given.'} Approve it with run(args, { prepare: (ctx) => ctx.approve() }) after asking the user, or opt out for this server with "approval": "none" in its configuration.`,
      {
        detail: this.#detail({
          reason: 'approval-required',
          approval: mode,
          catalogState: state,
          effectClass: this.descriptor.effectClass,
        }),
      },
    );
  }

  #checkArgs(args: unknown, bounded = false): Readonly<Record<string, unknown>> {
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw new CallError(
        ErrorCode.INVALID_ARGUMENTS,
        `Arguments for "${this.modelName}" must be a JSON object; nothing was sent. Fix the arguments and call again.`,
        { detail: this.#detail({}) },
      );
    }
    // Bounded before anything recurses over them: validation, then serialisation by the transport.
    if (!bounded) this.#checkBounds(args, 'Argument');
    const verdict = this.descriptor.inputValidator().validate(args);
    if (!verdict.ok) {
      throw new CallError(
        ErrorCode.INVALID_ARGUMENTS,
        `Arguments for "${this.modelName}" do not match its input schema: ${verdict.errors}. Nothing was sent; fix the arguments and call again.`,
        { detail: this.#detail({ errors: verdict.errors }) },
      );
    }
    return args as Readonly<Record<string, unknown>>;
  }

  #checkOutput(result: ToolCallResult): void {
    // Every result, with or without an output schema: the caller serialises it next.
    this.#checkBounds(result, 'Output');
    const validator = this.descriptor.outputValidator();
    if (validator === undefined || result.isError === true) return;
    const structured = result.structuredContent;
    const verdict =
      structured === undefined
        ? {
            ok: false as const,
            errors: 'no structuredContent although the tool declares an outputSchema',
          }
        : validator.validate(structured);
    if (!verdict.ok) {
      throw new CallError(
        ErrorCode.INVALID_TOOL_OUTPUT,
        `Invalid structured content returned by tool ${this.tool} of server "${this.server}": ${verdict.errors}. The call did run; its result was discarded.`,
        { detail: this.#detail({ errors: verdict.errors, delivery: 'sent' }) },
      );
    }
  }

  /**
   * `INVALID_ARGUMENTS` (nothing sent) or `INVALID_TOOL_OUTPUT` (the call ran) when `value` is
   * deeper or larger than this server's {@link CallLimits}, or not plain JSON.
   */
  #checkBounds(value: unknown, which: 'Argument' | 'Output'): void {
    const limits = this.#bound.server.callLimits;
    const depthKey = `max${which}Depth` as const;
    const bytesKey = `max${which}Bytes` as const;
    const problem = checkJsonValue(
      value,
      limits?.[depthKey] ?? DEFAULT_CALL_LIMITS[depthKey],
      limits?.[bytesKey] ?? DEFAULT_CALL_LIMITS[bytesKey],
    );
    if (problem === undefined) return;
    const errors = describeValueProblem(problem, depthKey, bytesKey);
    const limit =
      problem.kind === 'depth' ? depthKey : problem.kind === 'bytes' ? bytesKey : undefined;
    const detail = this.#detail({
      errors,
      ...(limit === undefined
        ? { path: problem.kind === 'not-json' ? problem.path : '' }
        : { limit }),
      ...(problem.kind === 'not-json' ? {} : { max: problem.limit }),
      // A result over the bounds came back from a call that ran.
      ...(which === 'Output' ? { delivery: 'sent' } : {}),
    });
    if (which === 'Argument') {
      throw new CallError(
        ErrorCode.INVALID_ARGUMENTS,
        `Arguments for "${this.modelName}" are ${errors}. Nothing was sent; ${limit === undefined ? 'pass plain JSON' : `shrink the arguments or raise ${limit} in the limits of server "${this.server}"`} and call again.`,
        { detail },
      );
    }
    throw new CallError(
      ErrorCode.INVALID_TOOL_OUTPUT,
      `The result of tool ${this.tool} of server "${this.server}" is ${errors}. The call did run; its result was discarded.${limit === undefined ? '' : ` Raise ${limit} in the limits of server "${this.server}" if this server is trusted.`}`,
      { detail },
    );
  }

  #detail(extra: Record<string, unknown>): Record<string, unknown> {
    return {
      server: this.server,
      tool: this.tool,
      modelName: this.modelName,
      stepId: this.#stepId,
      delivery: 'not-sent',
      ...extra,
    };
  }

  #fail(error: unknown, phase: CallPhase): CallError {
    // Before 'call' nothing was written; after it the caller's word counts, and silence means sent.
    const delivery: Delivery =
      phase === 'call'
        ? error instanceof StepbindError && error.detail['delivery'] === 'not-sent'
          ? 'not-sent'
          : 'sent'
        : phase === 'output'
          ? 'sent'
          : 'not-sent';
    if (error instanceof CallError && error.detail['delivery'] !== undefined) return error;
    if (error instanceof StepbindError) {
      // A caller that reports a lost connection after sending as CONNECTION_CLOSED is corrected:
      // CONNECTION_CLOSED means nothing was sent.
      const code =
        error.code === ErrorCode.CONNECTION_CLOSED && delivery === 'sent'
          ? ErrorCode.OUTCOME_UNKNOWN
          : error.code;
      return new CallError(code, error.message, {
        detail: { ...this.#detail({}), ...error.detail, delivery },
        cause: error,
      });
    }
    const message = error instanceof Error ? error.message : String(error);
    switch (phase) {
      case 'prepare':
        return new CallError(
          ErrorCode.TOOL_DENIED,
          `The prepare hook of "${this.modelName}" refused or failed: ${message}. Nothing was sent.`,
          { detail: this.#detail({ reason: 'prepare' }), cause: error },
        );
      case 'admission':
        return new CallError(
          ErrorCode.TOOL_DENIED,
          `"${this.modelName}" could not be admitted: ${message}. Nothing was sent.`,
          { detail: this.#detail({ reason: 'admission' }), cause: error },
        );
      case 'call':
        return new CallError(
          ErrorCode.SERVER_ERROR,
          `tools/call of "${this.modelName}" on server "${this.server}" failed: ${message}. It may or may not have run.`,
          { detail: this.#detail({ delivery }), cause: error },
        );
      case 'output':
        return new CallError(
          ErrorCode.INVALID_TOOL_OUTPUT,
          `"${this.modelName}" ran, but its output could not be validated: ${message}. The result was discarded.`,
          { detail: this.#detail({ delivery }), cause: error },
        );
    }
  }
}

/** Whether a call needs an approval under `mode` (see {@link ApprovalMode}). */
function needsApproval(mode: ApprovalMode, catalogState: string, effect: EffectClass): boolean {
  if (mode === 'none' || effect === 'read') return false;
  if (mode === 'all-writes') return true;
  return catalogState !== 'ELIGIBLE' && catalogState !== 'SNAPSHOT_PROVEN';
}

/** Idempotency keys: 1 to 512 characters, no control characters. */
function checkKey(key: unknown, detail: Record<string, unknown>): void {
  if (
    typeof key !== 'string' ||
    key.length === 0 ||
    key.length > 512 ||
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u001f]/.test(key)
  ) {
    throw new CallError(
      ErrorCode.INVALID_OPTIONS,
      `The idempotency key must be a string of 1 to 512 characters without control characters; "${String(detail['modelName'])}" was not run.`,
      { detail },
    );
  }
}

const MODEL_MESSAGES: Partial<Record<Code, (e: StepbindError) => string>> = {
  STALE_CATALOG: (e) =>
    `The tool catalog of server "${String(e.detail.server)}" changed; this call was not run. Call again with the tools of the next step.`,
  UNKNOWN_TOOL: (e) =>
    `There is no tool named "${String(e.detail['modelName'])}" in this step. Use one of the tools you were given.`,
  INVALID_ARGUMENTS: (e) =>
    `The arguments do not match the tool's input schema (${typeof e.detail['errors'] === 'string' ? e.detail['errors'] : 'not an object'}); the call was not run. Fix the arguments and call again.`,
  INVALID_TOOL_OUTPUT: () =>
    'The tool ran but returned output that does not match its declared schema, so the result was discarded. Do not assume it failed or succeeded; check before retrying.',
  TOOL_DENIED: (e) => `This call was not allowed and was not run: ${e.message}`,
  APPROVAL_REQUIRED: () =>
    'This call may change state and needs an approval from the user before it runs; it was not run. Ask the user to approve it, then call it again.',
  BINDING_RELEASED: () =>
    'This call belongs to a finished step and was not run. Call again with the tools of the current step.',
  CONNECTION_CLOSED: (e) =>
    `The server "${String(e.detail.server)}" is disconnected; this call was not sent, so it did not run, and it was not re-routed. Try again in the next step.`,
  OUTCOME_UNKNOWN: (e) =>
    `The call was sent to server "${String(e.detail.server)}" but no answer came back (the connection was lost), so it may or may not have taken effect. Check whether it did before calling it again.`,
  TIMEOUT: () =>
    'The tool did not answer in time and the request was cancelled. It may or may not have taken effect; check before retrying.',
  ABORTED: (e) =>
    isSent(e)
      ? 'The call was cancelled after it was sent. It may or may not have taken effect; check before retrying.'
      : 'The call was cancelled before it was sent; it did not run.',
  IDEMPOTENCY_IN_PROGRESS: () =>
    'This tool call is already running; it was not started again. Wait for its result instead of calling it again.',
  IDEMPOTENCY_CONFLICT: () =>
    'This tool-call id was already used for a different call, so this call was not run. Make it again as a new tool call.',
};

function isSent(e: StepbindError): boolean {
  return e.detail['delivery'] === 'sent';
}

/** True when the call may have taken effect: it was written and no answer says otherwise. */
function mayHaveRun(e: StepbindError): boolean {
  return (
    e.code === ErrorCode.OUTCOME_UNKNOWN || (isSent(e) && e.code !== ErrorCode.CONNECTION_CLOSED)
  );
}

/** An `isError` MCP tool result a model can act on. */
export interface ErrorToolResult {
  readonly isError: true;
  readonly content: readonly [{ readonly type: 'text'; readonly text: string }];
  readonly _meta: { readonly 'io.stepbind/error': { readonly code: string } };
}

/**
 * Renders any error as an `isError` tool result with a message a model can act on, so the agent
 * loop can continue with a new step. Whenever the call may have run (`OUTCOME_UNKNOWN`, a timeout,
 * any failure after the request was sent) the model is told to check before retrying; a call that
 * was not sent is said not to have run. Non-stepbind errors are rendered generically.
 */
export function toToolResult(error: unknown): ErrorToolResult {
  let code = 'INTERNAL';
  let text = `The call failed: ${error instanceof Error ? error.message : String(error)}`;
  if (StepbindError.isInstance(error)) {
    code = error.code;
    text = MODEL_MESSAGES[error.code]?.(error) ?? error.message;
    if (mayHaveRun(error) && !/check/i.test(text)) {
      text = `${text} It may have taken effect; check before retrying.`;
    }
  }
  return Object.freeze({
    isError: true,
    content: Object.freeze([Object.freeze({ type: 'text', text })] as const),
    _meta: Object.freeze({ 'io.stepbind/error': Object.freeze({ code }) }),
  });
}
