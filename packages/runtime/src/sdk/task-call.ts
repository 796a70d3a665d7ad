/**
 * The task-augmented `tools/call` of MCP 2025-11-25 on an SDK client (DESIGN §20.2): whether a
 * server can make tasks, the `task` parameter, and waiting for a task (`tasks/get` at the server's
 * poll interval, `tasks/result`, `tasks/cancel` on abort). The SDK's experimental task helpers
 * are not used: its `callToolStream` hides the created task id, which the journal needs first.
 *
 * @packageDocumentation
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
  McpError,
  ErrorCode as RpcErrorCode,
} from '@modelcontextprotocol/sdk/types.js';
import {
  ErrorCode,
  RuntimeError,
  StepbindError,
  type TaskCallRequest,
} from '@stepbind/binding/internal';
import { systemClock, type RuntimeClock } from '../clock.js';
import type { RawCallResult } from '../connection.js';

/** The shortest wait between two `tasks/get` of one task, whatever the server asks for. */
export const MIN_POLL_INTERVAL_MS = 50;
/** The longest wait between two `tasks/get` of one task, whatever the server asks for. */
export const MAX_POLL_INTERVAL_MS = 30_000;
/** The wait between two `tasks/get` when the server suggests none. */
export const DEFAULT_POLL_INTERVAL_MS = 500;
/** How long an aborted call waits for the server to answer its `tasks/cancel`. */
const CANCEL_TIMEOUT_MS = 5_000;

/** A task as `tasks/get` and `CreateTaskResult` describe it. */
export interface TaskState {
  readonly taskId: string;
  readonly status: 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
  readonly pollInterval?: number | undefined;
  readonly statusMessage?: string | undefined;
}

/** True when the server declared `tasks.requests.tools.call` (it can run `tools/call` as a task). */
export function serverMakesTasks(client: Client): boolean {
  const tasks = client.getServerCapabilities()?.tasks as
    { readonly requests?: { readonly tools?: { readonly call?: unknown } } } | undefined;
  return tasks?.requests?.tools?.call !== undefined;
}

/**
 * The error of a task-required tool on a server or protocol era that cannot make tasks: nothing
 * was sent (`SERVER_ERROR`, `detail.reason: 'tasks-unsupported'`).
 */
export function tasksUnsupportedError(server: string, tool: string, why: string): RuntimeError {
  return new RuntimeError(
    ErrorCode.SERVER_ERROR,
    `Tool "${tool}" of server "${server}" runs only as a task (execution.taskSupport "required"), but ${why}. Nothing was sent; use a server or protocol version with tasks (MCP 2025-11-25).`,
    { detail: { server, tool, delivery: 'not-sent', reason: 'tasks-unsupported' } },
  );
}

/** The `task` parameter of a task-augmented request. */
export function taskParam(request: TaskCallRequest): { readonly ttl?: number } {
  return request.ttlMs === undefined ? {} : { ttl: request.ttlMs };
}

/**
 * What a `tools/call` sent with `task` answered: the created task, or (a server that ran it at
 * once) the tool's result.
 */
export function createdTaskOf(
  result: unknown,
): { readonly task: TaskState } | { readonly result: RawCallResult } {
  if (typeof result === 'object' && result !== null && 'task' in result) {
    return { task: CreateTaskResultSchema.parse(result).task };
  }
  return { result: CallToolResultSchema.parse(result) };
}

/** What {@link awaitTask} needs from the connection. */
export interface TaskWait {
  readonly client: Client;
  readonly server: string;
  readonly tool: string;
  readonly signal?: AbortSignal | undefined;
  /** `performance.now()` by which the whole call must have ended (the call's timeout). */
  readonly deadline: number;
  readonly timeoutMs: number;
  /** Maps a failed `tasks/result` (the tool's own error, a lost connection) like a `tools/call`. */
  readonly mapError: (error: unknown) => StepbindError;
  /** Told of every `tasks/get` this wait sends (tests count polls). */
  readonly onPoll?: (() => void) | undefined;
  /** @default the real clock */
  readonly clock?: RuntimeClock | undefined;
}

/**
 * Waits for a task and returns its result: `tasks/get` every poll interval the server suggests
 * (clamped to {@link MIN_POLL_INTERVAL_MS}..{@link MAX_POLL_INTERVAL_MS}) until it is `completed`
 * (or `input_required`: `tasks/result` then carries the server's requests), then `tasks/result`.
 * `first` is the task as created, or `undefined` to resume polling `taskId` (a crashed run's).
 *
 * @throws StepbindError (all `delivery: 'sent'`, with `detail.taskId`): `SERVER_ERROR` with
 *   `detail.taskStatus` for a task the server reports `failed` or `cancelled`; `OUTCOME_UNKNOWN`
 *   (`reason: 'task-unknown'`) when the server answers `tasks/get` with an error (it no longer
 *   knows the task); `TIMEOUT` past the deadline (the task is left running: the same idempotency
 *   key resumes it); `ABORTED` for the caller's signal (after `tasks/cancel` was sent).
 */
export async function awaitTask(
  wait: TaskWait,
  taskId: string,
  first: TaskState | undefined,
): Promise<RawCallResult> {
  try {
    let task = first ?? (await getTask(wait, taskId));
    for (;;) {
      switch (task.status) {
        case 'completed':
        case 'input_required':
          return await taskResult(wait, taskId);
        case 'failed':
        case 'cancelled':
          throw taskEndedError(wait, task);
        case 'working':
          await pause(wait, pollIntervalOf(task));
          task = await getTask(wait, taskId);
      }
    }
  } catch (error) {
    if (wait.signal?.aborted === true) {
      await cancelTask(wait, taskId);
      throw new RuntimeError(
        ErrorCode.ABORTED,
        `tools/call on server "${wait.server}" (tool "${wait.tool}") was cancelled by the caller while its task "${taskId}" ran; tasks/cancel was sent. It may have run in part.`,
        { detail: detailOf(wait, taskId), cause: error },
      );
    }
    if (error instanceof StepbindError) throw error;
    throw wait.mapError(error);
  }
}

/** The wait the server asks for between polls, bounded. */
export function pollIntervalOf(task: Pick<TaskState, 'pollInterval'>): number {
  const asked = task.pollInterval ?? DEFAULT_POLL_INTERVAL_MS;
  if (!Number.isFinite(asked)) return DEFAULT_POLL_INTERVAL_MS;
  return Math.min(MAX_POLL_INTERVAL_MS, Math.max(MIN_POLL_INTERVAL_MS, asked));
}

function detailOf(wait: TaskWait, taskId: string): Record<string, unknown> {
  return { server: wait.server, tool: wait.tool, delivery: 'sent', taskId };
}

function remaining(wait: TaskWait, taskId: string): number {
  const left = Math.ceil(wait.deadline - performance.now());
  if (left <= 0) throw timeoutError(wait, taskId);
  return left;
}

function timeoutError(wait: TaskWait, taskId: string): RuntimeError {
  return new RuntimeError(
    ErrorCode.TIMEOUT,
    `tools/call on server "${wait.server}" (tool "${wait.tool}") did not finish within ${wait.timeoutMs} ms; its task "${taskId}" was left running. Call again with the same idempotency key to resume waiting for it, or with a longer timeoutMs.`,
    { detail: { ...detailOf(wait, taskId), timeoutMs: wait.timeoutMs } },
  );
}

async function getTask(wait: TaskWait, taskId: string): Promise<TaskState> {
  const timeout = remaining(wait, taskId);
  wait.onPoll?.();
  try {
    return await wait.client.request(
      { method: 'tasks/get', params: { taskId } },
      GetTaskResultSchema,
      {
        timeout,
        ...(wait.signal === undefined ? {} : { signal: wait.signal }),
      },
    );
  } catch (error) {
    if (isAnswer(error) && wait.signal?.aborted !== true) {
      throw new RuntimeError(
        ErrorCode.OUTCOME_UNKNOWN,
        `Server "${wait.server}" no longer knows task "${taskId}" of tool "${wait.tool}" (tasks/get: ${error.message}). The call was sent and may have run; check its effect, then resolve the key.`,
        {
          detail: { ...detailOf(wait, taskId), reason: 'task-unknown', rpcError: error.code },
          cause: error,
        },
      );
    }
    if (isTimeout(error)) throw timeoutError(wait, taskId);
    throw error;
  }
}

async function taskResult(wait: TaskWait, taskId: string): Promise<RawCallResult> {
  const timeout = remaining(wait, taskId);
  try {
    return await wait.client.request(
      { method: 'tasks/result', params: { taskId } },
      CallToolResultSchema,
      { timeout, ...(wait.signal === undefined ? {} : { signal: wait.signal }) },
    );
  } catch (error) {
    if (isTimeout(error)) throw timeoutError(wait, taskId);
    throw error;
  }
}

/** Sends `tasks/cancel` and waits a bounded time for its answer; a failure changes nothing. */
async function cancelTask(wait: TaskWait, taskId: string): Promise<void> {
  try {
    await wait.client.request(
      { method: 'tasks/cancel', params: { taskId } },
      CancelTaskResultSchema,
      {
        timeout: CANCEL_TIMEOUT_MS,
      },
    );
  } catch {
    // The task may have ended meanwhile, or the connection is gone: the abort stands either way.
  }
}

function taskEndedError(wait: TaskWait, task: TaskState): RuntimeError {
  const why = task.statusMessage === undefined ? '' : `: ${task.statusMessage}`;
  return new RuntimeError(
    ErrorCode.SERVER_ERROR,
    `The task "${task.taskId}" of tool "${wait.tool}" on server "${wait.server}" ended ${task.status}${why}. It ran (in part); check its effect before calling again.`,
    {
      detail: {
        ...detailOf(wait, task.taskId),
        taskStatus: task.status,
        ...(task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage }),
      },
    },
  );
}

function isTimeout(error: unknown): boolean {
  return error instanceof McpError && error.code === Number(RpcErrorCode.RequestTimeout);
}

/** A JSON-RPC error response of the server (not the SDK's own timeout or closed connection). */
function isAnswer(error: unknown): error is McpError {
  return (
    error instanceof McpError &&
    error.code !== Number(RpcErrorCode.RequestTimeout) &&
    error.code !== Number(RpcErrorCode.ConnectionClosed)
  );
}

/** Waits `ms` on the clock, bounded by the deadline; rejects at once when the signal fires. */
function pause(wait: TaskWait, ms: number): Promise<void> {
  const clock = wait.clock ?? systemClock;
  const left = wait.deadline - performance.now();
  const { signal } = wait;
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = clock.setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, Math.min(ms, left)),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
