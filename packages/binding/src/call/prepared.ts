/**
 * One tool call the model made, run under the revision read lock (DESIGN §7, §13): `run` is the
 * sequence of its phases, each a private method below it in the order it runs.
 *
 * @packageDocumentation
 */
import type { CallError } from '../errors.js';
import type { ToolDescriptor } from '../snapshot/snapshot.js';
import type { BoundServer, BoundTool } from '../tools/view.js';
import {
  admissionVerdict,
  approvalRequiredError,
  trustedRead,
  type AdmissionSubject,
} from './admission.js';
import { anySignal, boundedBy, callDeadline, outcomeDeadline, untilAborted } from '../signals.js';
import { argsDigestOf, checkArgs, checkBounds, checkOutput, type CheckedCall } from './checks.js';
import {
  abortedBeforeSend,
  connectionClosedError,
  noJournalError,
  staleCatalogError,
  type FailingCall,
} from './failure.js';
import { InputRoundLog } from './input-rounds.js';
import { progressOptions, sendWithProgress, wantsProgress } from './progress.js';
import { confirmLive } from './provisional.js';
import { callContext, receiptOf, type CallCapture } from './receipt.js';
import { decideUnsent, failedRun, lateOutcome, replayOutcome } from './recorded.js';
import { checkRunOptions } from './run-options.js';
import { resumeTask, taskOption, taskSupportOf } from './task.js';
import { maybeDrained, releasedError, type BindingState } from './state.js';
import type { Release } from '../lock.js';
import type {
  CallOutcome,
  CallPolicy,
  CallReceipt,
  RunOptions,
  ToolCallResult,
  ToolCaller,
} from './types.js';
import type { CallRun } from './run.js';
import type { LateDecision } from '../journal/claim.js';

/** What admission decided before the `prepare` hook, and the arguments checked so far. */
interface Admitted {
  readonly admission: AdmissionSubject;
  readonly approvalRequired: boolean;
  /** The arguments to send: the caller's, or the hook's replacement, bounded and validated. */
  readonly callArgs: Readonly<Record<string, unknown>>;
  /** True when the `prepare` hook called `ctx.approve()`. */
  readonly approved: boolean;
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
  /** The call as the value checks and failures see it (bound tool, names, error detail). */
  readonly #call: CheckedCall & FailingCall;
  readonly #capture: CallCapture;
  /** The call's error detail without extras, built only when an option is refused. */
  readonly #baseDetail: () => Record<string, unknown>;
  /** True when the captured descriptor never runs as an MCP task (`taskSupport` forbidden). */
  readonly #plain: boolean;
  /** What admission reads of this call (the captured tool), built once. */
  readonly #subject: AdmissionSubject;

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
    this.#call = {
      bound,
      server: this.server,
      modelName: this.modelName,
      detail: (extra) => this.#detail(extra),
    };
    this.#capture = { bound, stepId, policyEpoch };
    this.#baseDetail = () => this.#detail({});
    this.#plain = taskSupportOf(bound.descriptor) === 'forbidden';
    this.#subject = {
      bound,
      policy,
      policyEpoch,
      detail: (extra) => this.#detail(extra),
    };
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
   * and receipt are journaled → release → result and receipt. Without a `prepare` hook the key is
   * read only if its `SENT` insert loses or the run is refused before it, and its state then
   * decides as above, before any refusal of the run's own (DESIGN §21.6).
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
    checkRunOptions(options, this.#baseDetail);
    const run = this.#start(options);
    // Each phase that has nothing to wait for runs synchronously: an unkeyed call without a hook
    // awaits only the lock when it is contended and the send (every `await` is a microtask turn).
    try {
      this.#enter(run);
      try {
        if (run.journal !== undefined || run.key !== undefined) {
          const replay = await this.#claimKey(run, args);
          if (replay !== undefined) return replay;
          if (run.claim?.resumeTaskId !== undefined) {
            return await this.#finish(run, await resumeTask(run, this.#call, args));
          }
        }
        const locking = this.#lockRevision(run);
        if (locking !== undefined) await locking;
        const checked = this.#admit(run, args);
        const admitted =
          run.options.prepare === undefined ? checked : await this.#prepare(run, checked);
        const caller = this.#admitAtPointOfUse(run, admitted);
        if (run.claim !== undefined) {
          const late = await this.#markSent(run);
          if (late !== undefined) return await this.#decidedLate(run, late, args);
        }
        const result = await this.#send(run, caller, admitted.callArgs);
        run.tCalled = performance.now();
        run.phase = 'output';
        checkOutput(this.#call, result);
        return run.journal === undefined
          ? this.#outcome(run, result)
          : await this.#finish(run, result);
      } catch (error) {
        // A key claimed without a read, refused before its SENT write: its state decides first.
        const late = await decideUnsent(run);
        if (late === undefined) throw error;
        return await this.#decidedLate(run, late, args);
      }
    } catch (error) {
      throw await failedRun(run, error, this.#call, this.#capture, this.#state, () =>
        this.#recordIo(run),
      );
    } finally {
      this.#leave(run);
    }
  }

  /**
   * Opens the run's record. Every run the journal counts (`start()`) ends in exactly one of
   * complete, fail or replayed; unkeyed runs skip a journal that records only keyed runs (the
   * in-memory default).
   */
  #start(options: RunOptions): CallRun {
    const state = this.#state;
    const key = options.idempotencyKey;
    const journal =
      state.journal !== undefined &&
      (key !== undefined || state.journal.recordsEveryRun) &&
      state.journal.start()
        ? state.journal
        : undefined;
    const startedAt = Date.now();
    const t0 = performance.now();
    return {
      options,
      bound: this.#bound,
      revision: this.revision,
      key,
      journal,
      timeoutMs: options.timeoutMs ?? this.#bound.server.callTimeoutMs,
      startedAt,
      t0,
      tLock: t0,
      tPrepared: t0,
      tCalled: t0,
      phase: 'admission',
      counted: false,
      recorded: false,
      context: undefined,
      argsDigest: undefined,
      claim: undefined,
      release: undefined,
      io: undefined,
      rounds: undefined,
      taskId: undefined,
    };
  }

  /**
   * Counts the run in flight, so that the binding's release waits for it.
   *
   * @throws CallError `BINDING_RELEASED` (nothing counted) when the binding was released.
   */
  #enter(run: CallRun): void {
    const state = this.#state;
    if (state.released) throw releasedError(this.#stepId, this.modelName);
    state.inFlight++;
    run.counted = true;
  }

  /**
   * The journal claim (DESIGN §13), before the lock: with a journal, the arguments are bounded and
   * digested; with a key, the journal replays a completed key (the outcome is returned, nothing
   * runs) or refuses one in progress, used for another payload or of unknown outcome, and
   * otherwise claims it for this run (`run.claim`).
   *
   * @throws CallError `INVALID_ARGUMENTS`, `INVALID_OPTIONS` (a key without a journal), the
   *   journal's refusal, or a replayed failure; nothing is sent.
   */
  async #claimKey(
    run: CallRun,
    args: Readonly<Record<string, unknown>>,
  ): Promise<CallOutcome | undefined> {
    const { journal, key, options } = run;
    if (journal !== undefined) {
      run.context = callContext(this.#capture);
      // Bounded first: the digest recurses over the arguments (20,000 levels must not overflow).
      checkBounds(this.#call, args, 'Argument');
      run.argsDigest = argsDigestOf(this.#call, args);
    }
    if (key === undefined) return undefined;
    const { context, argsDigest } = run;
    if (journal === undefined || context === undefined || argsDigest === undefined) {
      throw noJournalError(this.#call, key);
    }
    run.io = callDeadline(options.signal, run.timeoutMs);
    // Without a prepare hook nothing long can come between claim and send: the claim is
    // written once, as SENT, just before sending, and the key is read only if that write loses
    // or the run ends before it (DESIGN §21.6).
    const late = options.prepare === undefined;
    const begun = await journal.begin(
      {
        key,
        context,
        argsDigest,
        retryReads: this.#bound.server.retryReads === true && trustedRead(this.#bound),
      },
      { deferWrite: late, decideLate: late, signal: run.io.signal },
    );
    if (begun.kind === 'refused') throw begun.error;
    if (begun.kind === 'replay') {
      run.recorded = true;
      return await replayOutcome(
        journal,
        begun,
        context,
        this.#recordIo(run),
        this.#call,
        this.#state,
      );
    }
    run.claim = begun.claim;
    return undefined;
  }

  /**
   * Takes the server's revision read lock (held until the run ends: a hard refresh waits for it)
   * and checks that the revision is still the captured one.
   *
   * @throws CallError `ABORTED` (the caller's signal, before or while waiting) or `STALE_CATALOG`;
   *   the `prepare` hook does not run and nothing is sent.
   */
  #lockRevision(run: CallRun): Promise<void> | undefined {
    this.#checkAborted(run.options.signal);
    const provisional = this.#bound.server.provisional;
    if (provisional === undefined) {
      // Uncontended (no writer waiting or writing): taken now, without a turn of the event loop.
      const release = run.bound.server.slot.lock.tryAcquireRead();
      if (release !== undefined) {
        // Taken without waiting and, with no journal claim before it, nothing since the start
        // that took time: the lock wait is 0 without a clock read.
        this.#locked(run, release, run.journal === undefined ? run.t0 : performance.now());
        return undefined;
      }
    }
    return this.#lockRevisionLater(run, provisional);
  }

  /** {@link #lockRevision} when it has to wait: for a provisional server's live catalog, or the lock. */
  async #lockRevisionLater(run: CallRun, provisional: BoundServer['provisional']): Promise<void> {
    const { signal } = run.options;
    if (provisional !== undefined) {
      await confirmLive(run, provisional, this.#call, (reason) => this.#abortedBeforeSend(reason));
    }
    const lock = run.bound.server.slot.lock;
    const release = await lock.acquireRead(signal === undefined ? {} : { signal });
    this.#locked(run, release, performance.now());
  }

  /**
   * Holds the read lock for the rest of the run and checks the revision under it.
   *
   * @throws CallError `STALE_CATALOG`.
   */
  #locked(run: CallRun, release: Release, tLock: number): void {
    run.release = release;
    run.tLock = tLock;
    const slot = run.bound.server.slot;
    if (slot.revision !== run.revision) {
      throw staleCatalogError(this.#call, run.revision, slot.revision);
    }
  }

  /**
   * Admission under the lock, before the `prepare` hook: policy epoch, revocation, whether an
   * approval is needed (refused at once without a hook to give it), then the arguments (bounded,
   * unless bounded for their digest already, and validated against the frozen input schema).
   *
   * @throws CallError `TOOL_DENIED`, `POLICY_STALE`, `APPROVAL_REQUIRED`, `INVALID_ARGUMENTS`;
   *   nothing is sent.
   */
  #admit(run: CallRun, args: Readonly<Record<string, unknown>>): Admitted {
    const admission = this.#admission(run);
    const { approvalRequired } = admissionVerdict(admission);
    if (approvalRequired && run.options.prepare === undefined) {
      throw approvalRequiredError(admission, false);
    }
    // Arguments already bounded for their digest are not walked again.
    const callArgs = checkArgs(this.#call, args, run.argsDigest !== undefined);
    return { admission, approvalRequired, callArgs, approved: false };
  }

  /**
   * Runs the caller's `prepare` hook, if any, under the lock (phase `prepare`). The hook sees the
   * caller's signal and the runtime's close; the run waits for neither past its firing. Arguments
   * the hook returns replace the caller's once bounded and validated again.
   *
   * @throws CallError `ABORTED` (not sent), `APPROVAL_REQUIRED` (the hook did not approve a call
   *   that needs it), `TOOL_DENIED` (the hook threw), `INVALID_ARGUMENTS`; nothing is sent.
   */
  async #prepare(run: CallRun, admitted: Admitted): Promise<Admitted> {
    const { prepare, signal } = run.options;
    if (prepare === undefined) return admitted;
    const { admission, approvalRequired } = admitted;
    let approved = false;
    run.phase = 'prepare';
    // The hook sees the caller's signal and the runtime's close; neither waits for it to return.
    const hookSignal = anySignal(signal, this.#state.closeSignal);
    const replaced = await untilAborted(
      prepare({
        server: this.server,
        tool: this.tool,
        modelName: this.modelName,
        effectClass: this.descriptor.effectClass,
        catalogState: run.bound.server.catalog.state,
        approvalRequired,
        approve: () => {
          approved = true;
        },
        args: admitted.callArgs,
        signal: hookSignal,
      }),
      hookSignal,
      (reason) => this.#abortedBeforeSend(reason),
    );
    if (approvalRequired && !approved) throw approvalRequiredError(admission, true);
    run.phase = 'admission';
    const callArgs = replaced === undefined ? admitted.callArgs : checkArgs(this.#call, replaced);
    return { admission, approvalRequired, callArgs, approved };
  }

  /**
   * Admission again at the point of use, right before the `SENT` record and the send: the caller's
   * signal, the captured connection, then what the hook may have waited through (the runtime's
   * close, a revocation, a new epoch, a stale fleet view, a withdrawn standing approval).
   *
   * @returns the captured client, open.
   * @throws CallError `ABORTED`, `CONNECTION_CLOSED` (or the connection's fault), `TOOL_DENIED`,
   *   `POLICY_STALE`, `APPROVAL_REQUIRED`; nothing is sent.
   */
  #admitAtPointOfUse(run: CallRun, admitted: Admitted): ToolCaller {
    this.#checkAborted(run.options.signal);
    run.tPrepared = performance.now();
    const caller = run.bound.server.caller;
    if (caller.closed) {
      if (caller.fault !== undefined) throw caller.fault;
      throw connectionClosedError(this.#call);
    }
    this.#checkUse(admitted.admission, admitted.approved, run.options.prepare !== undefined);
    return caller;
  }

  /**
   * Makes the key's `SENT` record durable before a byte is written: a crash from here on leaves
   * `OUTCOME_UNKNOWN`, never a key that looks unsent. Unkeyed runs write nothing here.
   *
   * @throws CallError `JOURNAL_UNAVAILABLE` or `ABORTED` from the store; nothing is sent.
   */
  async #markSent(run: CallRun): Promise<LateDecision | undefined> {
    const { claim, journal, options } = run;
    if (claim === undefined || journal === undefined) return undefined;
    // A fresh bound: a prepare hook (a human approval) may have outlived the claim's. The bound
    // of the writes before the send ends with the last of them (DESIGN §21.1).
    if (options.prepare !== undefined) run.io = callDeadline(options.signal, run.timeoutMs, run.io);
    return await boundedBy(run.io, (io) => journal.markSent(claim, run.timeoutMs, io));
  }

  /** {@link lateOutcome} of this call: a task to resume is polled and finished here. */
  #decidedLate(
    run: CallRun,
    late: LateDecision,
    args: Readonly<Record<string, unknown>>,
  ): Promise<CallOutcome> {
    const resume = async (): Promise<CallOutcome> =>
      this.#finish(run, await resumeTask(run, this.#call, args));
    return lateOutcome(run, late, this.#call, this.#state, () => this.#recordIo(run), resume);
  }

  /**
   * Sends `tools/call` on the captured client (phase `call`) with the per-call timeout, the
   * caller's signal and the MRTR round log, still under the read lock; from here a failure may
   * mean the call ran. The caller's own promise when no progress listener needs ending after it
   * (no extra `async` frame); `run` moves the run to phase `output` once it settles.
   */
  #send(
    run: CallRun,
    caller: ToolCaller,
    callArgs: Readonly<Record<string, unknown>>,
  ): Promise<ToolCallResult> {
    const { options } = run;
    const { signal } = options;
    run.phase = 'call';
    const progress = wantsProgress(options) ? progressOptions(options) : undefined;
    const task = this.#plain && run.bound === this.#bound ? undefined : this.#taskOption(run);
    // Optional fields are added only when present (a spread of `{}` is an allocation per call).
    let request: Parameters<ToolCaller['callTool']>[2] = {
      timeoutMs: run.timeoutMs,
      onInputRound: (round) => (run.rounds ??= new InputRoundLog()).add(round),
    };
    if (signal !== undefined) request = { ...request, signal };
    if (task !== undefined) request = { ...request, ...task };
    if (progress === undefined) return caller.callTool(this.tool, callArgs, request);
    return sendWithProgress(caller, this.tool, callArgs, { ...request, ...progress.options }, () =>
      progress.end(),
    );
  }

  /**
   * Builds the receipt of a call that ran and whose output was checked, and journals the outcome.
   * A journal failure here is reported on the side (`onJournalError`): the result is returned, and
   * the key stays `SENT` (it becomes `OUTCOME_UNKNOWN` at the next recovery).
   */
  async #finish(run: CallRun, result: ToolCallResult): Promise<CallOutcome> {
    const receipt = this.#receipt(run, result);
    const { journal } = run;
    if (journal !== undefined) {
      run.recorded = true;
      try {
        const outcome = { result, receipt };
        await boundedBy(this.#recordIo(run), (io) => journal.complete(run.claim, outcome, io));
      } catch (error) {
        this.#state.onJournalError(error);
      }
    }
    this.#state.onResult?.(run.bound.server.name, result);
    return { result, receipt, replayed: false };
  }

  /** {@link #finish} of a run no journal records: nothing to wait for. */
  #outcome(run: CallRun, result: ToolCallResult): CallOutcome {
    const receipt = this.#receipt(run, result);
    this.#state.onResult?.(run.bound.server.name, result);
    return { result, receipt, replayed: false };
  }

  /** The frozen receipt of a run whose call returned `result` (its output checked). */
  #receipt(run: CallRun, result: ToolCallResult): CallReceipt {
    return receiptOf(
      run.bound === this.#bound ? this.#capture : { ...this.#capture, bound: run.bound },
      {
        key: run.key,
        argsDigest: run.argsDigest,
        startedAt: run.startedAt,
        timings: run,
        rounds: run.rounds,
        taskId: run.taskId,
      },
      result,
    );
  }

  /** The task option of a run's `callTool` (see `taskOption`). */
  #taskOption(run: CallRun): ReturnType<typeof taskOption> {
    return taskOption(run, () => this.#recordIo(run), this.#state);
  }

  /** Releases the read lock and the in-flight count (the binding may drain now). */
  #leave(run: CallRun): void {
    run.io?.end(); // a run that ended before its SENT write (a refusal, a replay)
    run.release?.();
    if (run.counted) {
      this.#state.inFlight--;
      maybeDrained(this.#state);
    }
  }

  /** The store bound of recording the run's outcome (DESIGN §13, `outcomeDeadline`). */
  #recordIo(run: CallRun): ReturnType<typeof outcomeDeadline> {
    return outcomeDeadline(run.options.signal, run.timeoutMs);
  }

  #admission(run: CallRun): AdmissionSubject {
    if (run.bound === this.#bound) return this.#subject;
    return {
      bound: run.bound,
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
    // Without a hook nothing ran since the first admission (no await between them, DESIGN §21.2):
    // its verdict still holds, so it is not decided twice.
    if (!hookRan) return;
    if (admissionVerdict(admission).approvalRequired && !approved) {
      throw approvalRequiredError(admission, hookRan);
    }
  }

  /** ABORTED (not sent) once `signal` fired: checked before waiting on the catalog and before sending. */
  #checkAborted(signal: AbortSignal | undefined): void {
    if (signal?.aborted === true) throw this.#abortedBeforeSend(signal.reason);
  }

  #abortedBeforeSend(reason: unknown): CallError {
    return abortedBeforeSend(this.#call, reason, this.#state.closeSignal?.aborted === true);
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
}
