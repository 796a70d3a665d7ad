/**
 * One tool call the model made, run under the revision read lock (DESIGN §7, §13).
 *
 * @packageDocumentation
 */
import { DEFAULT_CALL_LIMITS, checkJsonValue, describeValueProblem } from '../bounds.js';
import { digestOf } from '../canonical.js';
import { CallError, ErrorCode, StepbindError, type Delivery } from '../errors.js';
import type { JournalClaim } from '../journal/claim.js';
import type { CallJournal } from '../journal/journal.js';
import type { CallContext, JournalRecord, RecordedOutcome } from '../journal/store.js';
import type { Release } from '../lock.js';
import type { CatalogSnapshot, ToolDescriptor } from '../snapshot/snapshot.js';
import type { BoundTool } from '../tools/view.js';
import {
  admissionVerdict,
  approvalRequiredError,
  trustedRead,
  type AdmissionSubject,
} from './admission.js';
import { anySignal, callDeadline, outcomeDeadline, untilAborted } from '../signals.js';
import { InputRoundLog, type InputRoundListener } from './input-rounds.js';
import { checkRunOptions } from './run-options.js';
import { maybeDrained, releasedError, type BindingState } from './state.js';
import type { CallOutcome, CallPolicy, CallReceipt, RunOptions, ToolCallResult } from './types.js';

type CallPhase = 'admission' | 'prepare' | 'call' | 'output';

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
   * Runs the call (DESIGN §7): options checked (`INVALID_OPTIONS`, nothing journaled) →
   * idempotency key (DESIGN §13: replay, `IDEMPOTENCY_CONFLICT`,
   * `IDEMPOTENCY_IN_PROGRESS`, `OUTCOME_UNKNOWN`) → read lock → revision check (`STALE_CATALOG`:
   * nothing runs, nothing is sent) → admission (policy epoch, revocation, approval, input schema:
   * `TOOL_DENIED`, `INVALID_ARGUMENTS`) → `prepare` (`ABORTED` when the runtime closes) →
   * admission again at the point of use → the key's durable `SENT` record →
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
    // Before anything is journaled or sent: a bad option is the caller's bug, not a run.
    checkRunOptions(options, () => this.#detail({}));
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
    // MRTR rounds (2026-07-28 era): the log exists only once a server asks for input.
    let rounds: InputRoundLog | undefined;
    // Bounds the journal's store operations (caller's signal, call's timeout): DESIGN §13.
    const boundMs = options.timeoutMs ?? this.#bound.server.callTimeoutMs;
    let io: { readonly signal?: AbortSignal } = {};
    const recordIo = (): { readonly signal?: AbortSignal } =>
      outcomeDeadline(options.signal, boundMs);
    const onInputRound: InputRoundListener = (round) => (rounds ??= new InputRoundLog()).add(round);
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
        io = callDeadline(options.signal, boundMs);
        // Without a prepare hook nothing long can come between claim and send: the claim is
        // written once, as SENT, just before sending.
        const begun = await journal.begin(
          {
            key,
            context,
            argsDigest,
            retryReads: this.#bound.server.retryReads === true && trustedRead(this.#bound),
          },
          { deferWrite: options.prepare === undefined, ...io },
        );
        if (begun.kind === 'refused') throw begun.error;
        if (begun.kind === 'replay') {
          recorded = true;
          return await this.#replay(journal, begun.record, begun.outcome, context, recordIo());
        }
        claim = begun.claim;
      }
      this.#checkAborted(options.signal);
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
      const admission = this.#admission();
      const { approvalRequired } = admissionVerdict(admission);
      if (approvalRequired && options.prepare === undefined) {
        throw approvalRequiredError(admission, false);
      }
      // Arguments already bounded for their digest are not walked again.
      let callArgs = this.#checkArgs(args, argsDigest !== undefined);
      let approved = false;
      if (options.prepare !== undefined) {
        phase = 'prepare';
        // The hook sees the caller's signal and the runtime's close; neither waits for it to return.
        const hookSignal = anySignal(options.signal, state.closeSignal);
        const replaced = await untilAborted(
          options.prepare({
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
            signal: hookSignal,
          }),
          hookSignal,
          (reason) => this.#abortedBeforeSend(reason),
        );
        if (approvalRequired && !approved) throw approvalRequiredError(admission, true);
        phase = 'admission';
        if (replaced !== undefined) callArgs = this.#checkArgs(replaced);
      }
      this.#checkAborted(options.signal);
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
      // The point of use: what the hook waited through (a revocation, a new epoch, a stale
      // fleet view, a withdrawn standing approval, the runtime's close) refuses the call here.
      this.#checkUse(admission, approved, options.prepare !== undefined);
      // The key's SENT record is durable before a byte is written: a crash from here on leaves
      // OUTCOME_UNKNOWN, never a key that looks unsent.
      if (claim !== undefined && journal !== undefined) {
        // A fresh bound: a prepare hook (a human approval) may have outlived the claim's.
        if (options.prepare !== undefined) io = callDeadline(options.signal, boundMs);
        await journal.markSent(claim, timeoutMs, io);
      }
      phase = 'call';
      const result = await caller.callTool(this.tool, callArgs, {
        timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        onInputRound,
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
        ...protocolOf(catalog),
        ...rounds?.field(),
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
          await journal.complete(claim, { result, receipt }, recordIo());
        } catch (error) {
          // The call ran and its result is here: report it, and the journal failure on the side
          // (the key stays SENT and becomes OUTCOME_UNKNOWN at the next recovery).
          state.onJournalError(error);
        }
      }
      return { result, receipt, replayed: false };
    } catch (error) {
      const failure = withRounds(this.#fail(error, phase), rounds);
      if (journal !== undefined && !recorded) {
        try {
          await journal.fail(
            claim,
            context ?? this.#context(),
            failure,
            {
              argsDigest: argsDigest ?? null,
              key: key ?? null,
              ...rounds?.field(),
            },
            recordIo(),
          );
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
    deadline: { readonly signal?: AbortSignal },
  ): Promise<CallOutcome> {
    try {
      await journal.replayed(record, context, deadline);
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
      ...protocolOf(catalog),
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

  #admission(): AdmissionSubject {
    return {
      bound: this.#bound,
      policy: this.#policy,
      policyEpoch: this.#policyEpoch,
      detail: (extra) => this.#detail(extra),
    };
  }

  /**
   * Admission again at the point of use, after the `prepare` hook (DESIGN §7): the runtime's
   * close, then the policy epoch, revocation and approval as they are now.
   */
  #checkUse(admission: AdmissionSubject, approved: boolean, hookRan: boolean): void {
    const closed = this.#state.closeSignal;
    if (closed?.aborted === true) throw this.#abortedBeforeSend(closed.reason);
    if (admissionVerdict(admission).approvalRequired && !approved) {
      throw approvalRequiredError(admission, hookRan);
    }
  }

  /** ABORTED (not sent) once `signal` fired: checked before waiting on the catalog and before sending. */
  #checkAborted(signal: AbortSignal | undefined): void {
    if (signal?.aborted === true) throw this.#abortedBeforeSend(signal.reason);
  }

  #abortedBeforeSend(reason: unknown): CallError {
    const closing = this.#state.closeSignal?.aborted === true;
    return new CallError(
      ErrorCode.ABORTED,
      closing
        ? `The runtime closed before "${this.modelName}" was sent; it was not run and nothing was sent. Open a new runtime to call it.`
        : `"${this.modelName}" was cancelled before it was sent.`,
      { detail: this.#detail({ ...(closing ? { reason: 'closed' } : {}) }), cause: reason },
    );
  }

  #noJournal(key: string): CallError {
    return new CallError(
      ErrorCode.INVALID_OPTIONS,
      `"${this.modelName}" was given idempotency key "${key}", but this binding has no journal (or it is closed); nothing was sent. Capture the step from an open McpRuntime.`,
      { detail: this.#detail({ key }) },
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

/** The catalog's protocol version (from its server identity), as an optional field. */
function protocolOf(catalog: CatalogSnapshot): { readonly protocolVersion?: string } {
  const version = catalog.identity.protocolVersion;
  return version === undefined ? {} : { protocolVersion: version };
}

/**
 * The failure of a call that went through MRTR rounds, with `detail.inputRounds` (what was asked
 * and how it was answered, never the answers), so the application sees what the journal records.
 */
function withRounds(failure: CallError, rounds: InputRoundLog | undefined): CallError {
  const field = rounds?.field() ?? {};
  if (field.inputRounds === undefined || failure.detail['inputRounds'] !== undefined)
    return failure;
  return new CallError(failure.code, failure.message, {
    detail: { ...failure.detail, inputRounds: field.inputRounds },
    cause: failure.cause ?? failure,
  });
}
