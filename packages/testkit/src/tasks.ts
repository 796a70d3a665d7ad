import { spawn } from 'node:child_process';
import { existsSync, readFileSync, watch } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { StdioServerParams } from './connect.js';
import type { TaskServerEvent, TaskServerOptions } from './server/tasks.js';

export type { TaskServerEvent, TaskServerOptions } from './server/tasks.js';

/** Absolute path of the compiled task server entry, also when this module runs from `src/`. */
function taskEntryPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = basename(here) === 'src' ? join(dirname(here), 'dist') : here;
  return join(root, 'server', 'tasks.js');
}

/**
 * The stdio server parameters of the task server (two task tools, `slow_job` with
 * `taskSupport: "required"` and `maybe_job` with `"optional"`; see `server/tasks.ts`).
 */
export function taskServerParams(options: TaskServerOptions = {}): StdioServerParams {
  return {
    command: process.execPath,
    args: [taskEntryPath(), '--options', JSON.stringify(options)],
  };
}

/** The task server over Streamable HTTP in a child process that outlives its clients. */
export interface TaskHttpServer {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly pid: number;
  /** Ends the process and waits for it. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts the task server over Streamable HTTP and resolves once it listens. Its tasks live as long
 * as the process, across sessions: a restarted client can poll a task an earlier one created.
 *
 * @throws Error when the process exits before listening.
 */
export async function spawnTaskHttpServer(
  options: TaskServerOptions = {},
): Promise<TaskHttpServer> {
  const child = spawn(
    process.execPath,
    [taskEntryPath(), '--options', JSON.stringify(options), '--http', '0'],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('close', () => reject(new Error('the task server exited before listening')));
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        const event = JSON.parse(line) as { event?: string; port?: number };
        if (event.event === 'listening' && typeof event.port === 'number') resolve(event.port);
      } catch {
        // not an event line
      }
    });
  });
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    })();
    return closing;
  };
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    pid: child.pid ?? -1,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** The events a task server appended to `path` so far, whole lines only (none without the file). */
export function readTaskEvents(path: string): TaskServerEvent[] {
  if (!existsSync(path)) return [];
  const lines = readFileSync(path, 'utf8').split('\n');
  // The last piece is a line still being written (or empty after the final newline).
  lines.pop();
  return lines.map((line) => JSON.parse(line) as TaskServerEvent);
}

/**
 * Resolves with the events of `path` once one of them satisfies `predicate` (checked now and on
 * every change of the file, which `fs.watch` reports: no polling). The file must exist or be
 * created in its directory.
 */
export function untilTaskEvent(
  path: string,
  predicate: (event: TaskServerEvent) => boolean,
): Promise<TaskServerEvent[]> {
  return new Promise((resolve, reject) => {
    const watcher = watch(dirname(path), () => check());
    watcher.once('error', (error) => {
      watcher.close();
      reject(error);
    });
    function check(): void {
      const events = readTaskEvents(path);
      if (!events.some(predicate)) return;
      watcher.close();
      resolve(events);
    }
    check();
  });
}
