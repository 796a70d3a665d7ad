/**
 * What a prepared call works with: the result shape, the client it runs on, the live policy, the
 * `run` options and hook context, and the receipt and outcome it returns.
 *
 * @packageDocumentation
 */
import type { StepbindError } from '../errors.js';
import type { EffectClass } from '../snapshot/snapshot.js';
import type { McpContentBlock } from '../tools/content.js';
import type { InputRoundListener, InputRounds } from './input-rounds.js';

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
    options: {
      readonly signal?: AbortSignal;
      readonly timeoutMs: number;
      /** Told of every MRTR round (2026-07-28 era) as it is answered, or stopped at. */
      readonly onInputRound?: InputRoundListener;
      /**
       * Told of every accepted `notifications/progress` of this call (a progress token is sent only
       * when this or {@link resetTimeoutOnProgress} is given). See {@link RunOptions.onProgress}.
       */
      readonly onProgress?: ProgressListener;
      /** Each accepted progress notification restarts `timeoutMs`. @default false */
      readonly resetTimeoutOnProgress?: boolean;
      /** With {@link resetTimeoutOnProgress}: the absolute cap from the send, in ms. */
      readonly maxTotalTimeoutMs?: number;
      /**
       * Run the call as an MCP task (2025-11-25 `tools/call` with `task`), or resume polling one
       * (DESIGN §20.2). A caller that cannot make tasks fails a `required` one with a typed error,
       * nothing sent, and sends an `optional` one as a plain call.
       */
      readonly task?: TaskCallRequest;
    },
  ): Promise<ToolCallResult>;
}

/**
 * What a prepared call asks its {@link ToolCaller} to do with MCP tasks (DESIGN §20.2). `mode`:
 * `required` (the tool only runs as a task: a caller or server without tasks is a typed error,
 * nothing sent) or `optional` (a task when the server can make one, else a plain call).
 */
export interface TaskCallRequest {
  readonly mode: 'required' | 'optional';
  /** The task's time to live the caller asks the server for (`task.ttl`), in milliseconds. */
  readonly ttlMs?: number;
  /**
   * Poll this task (created by an earlier, crashed run of the same key) instead of sending
   * `tools/call`: nothing new is sent; a task the server no longer knows is `OUTCOME_UNKNOWN`.
   */
  readonly resumeTaskId?: string;
  /**
   * Told the task id once the server answered `tools/call` with `CreateTaskResult`, before the
   * caller polls (the journal records it there). Never rejects.
   */
  readonly onCreated?: (taskId: string) => Promise<void>;
}

/**
 * Which calls need an approval (`ctx.approve()` in the `prepare` hook) before anything is sent:
 * - `unproven-writes` (the default): non-`read` tools of a catalog that is not proven (`ELIGIBLE` or
 *   `SNAPSHOT_PROVEN`); every catalog without a server-provided revision token is unproven;
 * - `all-writes`: every non-`read` tool, proven or not;
 * - `none`: no approval is asked for (an explicit opt-out per server).
 *
 * Effect classes come from annotations, which are untrusted hints: a tool without annotations is
 * `unknown`, and only `read` tools are exempt, and only when the catalog is proven or the
 * application vouches for the server's annotations (`BoundServer.trustAnnotations`).
 */
export type ApprovalMode = 'none' | 'unproven-writes' | 'all-writes';

/** Live policy the runtime owns; read at call time, not at capture. */
export interface CallPolicy {
  /** Current policy epoch; a binding captured under another epoch is refused (`TOOL_DENIED`). */
  readonly policyEpoch: number;
  /** True when the (server, raw tool) pair was revoked after capture. */
  isRevoked(server: string, tool: string): boolean;
  /**
   * True when a standing approval (for example the fleet's `stepbind policy approve`) covers every
   * call of the (server, raw tool) pair: admission then needs no approval from the `prepare` hook.
   * @default never approved
   */
  isApproved?(server: string, tool: string): boolean;
}

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

/**
 * Options of {@link PreparedCall.run}, checked at run time before anything is journaled or sent: an
 * unknown key (with a did-you-mean) or a value of the wrong type or range is `INVALID_OPTIONS`.
 */
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
  /**
   * Per-call timeout: an integer from 1 to 2^31−1 ms (anything else is `INVALID_OPTIONS`, nothing
   * sent). @default the server's `callTimeoutMs` (60000)
   */
  readonly timeoutMs?: number;
  /**
   * Makes the call idempotent (DESIGN §13): a key whose call completed returns the stored result
   * and receipt (`replayed: true`, nothing is sent; also when the tool's description changed
   * since); a key in progress, used for another payload or whose outcome is unknown is refused
   * (`IDEMPOTENCY_IN_PROGRESS`, `IDEMPOTENCY_CONFLICT`, `OUTCOME_UNKNOWN`; `detail.delivery` is
   * `sent` whenever the key may have run). Use something stable across restarts, such as the model's tool-call id with
   * the step: `` `${stepKey}:${toolCall.id}` ``. 1 to 512 characters.
   */
  readonly idempotencyKey?: string;
  /**
   * Told of every `notifications/progress` the server sends for this call, in order, only while
   * the call runs (nothing after it settled). What a server sends is bounded first: a message is
   * cut to 1,000 characters, a non-finite or non-numeric `progress`/`total` and a `progress` that
   * does not increase are dropped. A listener that throws does not affect the call. Giving it makes
   * the call carry a progress token. @default none (no progress token is sent)
   */
  readonly onProgress?: ProgressListener;
  /**
   * Each accepted progress notification restarts {@link timeoutMs} (a long tool that reports
   * progress is not timed out while it does), up to {@link maxTotalTimeoutMs}. Makes the call carry
   * a progress token. A timeout after sending is still `TIMEOUT` with `delivery: 'sent'`.
   * @default false (the timeout runs from the send, whatever the server reports)
   */
  readonly resetTimeoutOnProgress?: boolean;
  /**
   * The absolute cap, from the send, of a call whose timeout progress extends: an integer from 1 to
   * 2^31−1 ms, at least {@link timeoutMs} when both are given (else `INVALID_OPTIONS`). Reaching it
   * is `TIMEOUT` (`detail.maxTotalTimeoutMs`). Used only with {@link resetTimeoutOnProgress}.
   * @default no cap beyond the reset timeout
   */
  readonly maxTotalTimeoutMs?: number;
  /**
   * Runs a tool whose descriptor says `execution.taskSupport: "optional"` as an MCP task
   * (DESIGN §20.2): `true`, or `{ ttlMs }` to ask the server to keep the task that long (an integer
   * from 1 to 2^31−1). A `"required"` tool always runs as a task; a tool without task support
   * ignores it. @default false
   */
  readonly task?: boolean | { readonly ttlMs?: number };
}

/** One progress report of a running call (`notifications/progress`), as a server sent it, bounded. */
export interface CallProgress {
  /** The progress so far; each report's is greater than the previous one's. */
  readonly progress: number;
  /** The total, when the server knows it. */
  readonly total?: number;
  /** A human-readable message from the server (untrusted text, at most 1,000 characters). */
  readonly message?: string;
}

/** Told of each accepted {@link CallProgress} of a running call. */
export type ProgressListener = (progress: CallProgress) => void;

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
  /** The protocol version of the server's connection (part of its identity), when known. */
  readonly protocolVersion?: string;
  /**
   * The MRTR rounds of the call (2026-07-28 era): per round the keys and kinds the server asked
   * for and how each was answered, never the answers or the server's messages. Absent when the
   * server asked for nothing.
   */
  readonly inputRounds?: InputRounds;
  readonly effectClass: EffectClass;
  /**
   * The MCP task the call ran as (DESIGN §20.2), when it ran as one; absent otherwise. A run that
   * resumed polling a task a crashed run created names that task.
   */
  readonly taskId?: string;
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

/** A successful call: the raw result and its receipt. */
export interface CallOutcome {
  readonly result: ToolCallResult;
  /** The receipt of the run that reached the server (the original one for a replay). */
  readonly receipt: CallReceipt;
  /** True when the result came from the journal for a repeated idempotency key: nothing was sent. */
  readonly replayed: boolean;
}
