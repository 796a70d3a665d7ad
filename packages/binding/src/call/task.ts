/**
 * Tasks (MCP 2025-11-25, DESIGN §20.2) in a prepared call: which calls run as a task, the `task`
 * request a run gives its caller (the task id recorded on the key before polling), and resuming
 * the task a crashed run of the same key created.
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode, StepbindError } from '../errors.js';
import type { JournalClaim } from '../journal/claim.js';
import type { CallJournal } from '../journal/journal.js';
import { recordTaskId } from '../journal/task.js';
import type { StoreDeadline } from '../signals.js';
import type { ToolDescriptor } from '../snapshot/snapshot.js';
import type { BoundTool } from '../tools/view.js';
import { checkOutput, type CheckedCall } from './checks.js';
import type { CallPhase, FailingCall } from './failure.js';
import type { RunOptions, TaskCallRequest, ToolCallResult } from './types.js';

/** A descriptor's `execution.taskSupport` (MCP 2025-11-25); `forbidden` when absent. */
export type TaskSupport = 'required' | 'optional' | 'forbidden';

/** What the task path reads and writes of one run (the prepared call's private run record). */
interface TaskRun {
  readonly bound: BoundTool;
  readonly options: RunOptions;
  readonly timeoutMs: number;
  readonly claim: JournalClaim | undefined;
  readonly journal: CallJournal | undefined;
  phase: CallPhase;
  tCalled: number;
  taskId: string | undefined;
}

/** The `execution.taskSupport` of a descriptor (anything unknown counts as `forbidden`). */
export function taskSupportOf(descriptor: ToolDescriptor): TaskSupport {
  const execution = (descriptor.raw as { readonly execution?: unknown }).execution;
  if (typeof execution !== 'object' || execution === null) return 'forbidden';
  const support = (execution as { readonly taskSupport?: unknown }).taskSupport;
  return support === 'required' || support === 'optional' ? support : 'forbidden';
}

/**
 * Whether a call of `descriptor` with `options` runs as a task: always for `required`, for
 * `optional` when `options.task` asks for it, never otherwise.
 */
export function taskRequestOf(
  descriptor: ToolDescriptor,
  options: Pick<RunOptions, 'task'>,
): TaskCallRequest | undefined {
  const support = taskSupportOf(descriptor);
  const asked = options.task;
  const ttlMs = typeof asked === 'object' ? asked.ttlMs : undefined;
  const ttl = ttlMs === undefined ? {} : { ttlMs };
  if (support === 'required') return { mode: 'required', ...ttl };
  if (support === 'optional' && asked !== undefined && asked !== false) {
    return { mode: 'optional', ...ttl };
  }
  return undefined;
}

/**
 * The `task` option of a run's `callTool` (none for a plain call). Once the server created the
 * task, its id goes on the run (for the receipt) and on the key's `SENT` record, durably, before
 * the caller polls: a crash from then on resumes polling it. A journal failure there is reported
 * to `state.onJournalError` (the key then ends `OUTCOME_UNKNOWN` after a crash, as any sent call).
 */
export function taskOption(
  run: TaskRun,
  io: () => StoreDeadline,
  state: { readonly onJournalError: (error: unknown) => void },
): { readonly task?: TaskCallRequest } {
  const request = taskRequestOf(run.bound.descriptor, run.options);
  if (request === undefined) return {};
  const onCreated = async (taskId: string): Promise<void> => {
    run.taskId = taskId;
    const { claim, journal } = run;
    if (claim === undefined || journal === undefined) return;
    const bound = io();
    try {
      await recordTaskId(journal.store, claim, taskId, { signal: bound.signal });
    } catch (error) {
      state.onJournalError(error);
    } finally {
      bound.end();
    }
  };
  return { task: { ...request, onCreated } };
}

/**
 * Resumes a key whose earlier run created an MCP task and ended without its outcome (a crash, a
 * timeout): polls that task on the captured connection and returns its checked result. Nothing
 * new is sent, so neither the revision lock, admission nor the `prepare` hook runs. Every failure
 * says `sent` (the key's call was sent), so the key stays `OUTCOME_UNKNOWN` unless the server
 * answered (a failed task is `COMPLETED` with its error).
 *
 * @throws CallError, `delivery: 'sent'`: the caller's failure, or `OUTCOME_UNKNOWN`
 *   (`reason: 'resume-failed'`) when polling could not start.
 */
export async function resumeTask(
  run: TaskRun,
  call: CheckedCall & FailingCall,
  args: Readonly<Record<string, unknown>>,
): Promise<ToolCallResult> {
  const taskId = run.claim?.resumeTaskId ?? '';
  const { signal } = run.options;
  run.phase = 'call';
  run.taskId = taskId;
  let result: ToolCallResult;
  try {
    // `required`: a caller that cannot poll tasks must refuse, never fall back to sending it.
    result = await run.bound.server.caller.callTool(run.bound.descriptor.name, args, {
      timeoutMs: run.timeoutMs,
      ...(signal === undefined ? {} : { signal }),
      task: { mode: 'required', resumeTaskId: taskId },
    });
  } catch (error) {
    if (!(error instanceof StepbindError) || error.detail['delivery'] !== 'not-sent') throw error;
    throw new CallError(
      ErrorCode.OUTCOME_UNKNOWN,
      `Polling task "${taskId}" of "${call.modelName}" on server "${call.server}" could not start (${error.message}). The call was sent by an earlier run and may have run; call again with the same key to resume polling.`,
      { detail: call.detail({ delivery: 'sent', taskId, reason: 'resume-failed' }), cause: error },
    );
  }
  run.tCalled = performance.now();
  run.phase = 'output';
  checkOutput(call, result);
  return result;
}
