/**
 * Tasks (MCP 2025-11-25, DESIGN §20.2): which calls run as a task, and what a prepared call asks
 * its {@link ToolCaller} for (create a task, or resume polling one a crashed run created).
 *
 * @packageDocumentation
 */
import type { ToolDescriptor } from '../snapshot/snapshot.js';
import type { RunOptions } from './types.js';

/** A tool descriptor's `execution.taskSupport` (MCP 2025-11-25); `forbidden` when absent. */
export type TaskSupport = 'required' | 'optional' | 'forbidden';

/**
 * What a prepared call asks its caller to do with tasks. `mode`: `required` (the tool only runs as
 * a task: a caller or server without tasks is a typed error, nothing sent) or `optional` (a task
 * when the server can make one, else a plain call).
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
 *
 * @returns the request without `resumeTaskId`/`onCreated`, or `undefined` for a plain call.
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
