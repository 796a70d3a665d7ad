/**
 * Another process (`lock-holder.mjs`) holding a journal file's write lock (`BEGIN IMMEDIATE`) until
 * released: the busy-wait and group-commit suites.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { JournalDriver } from '@stepbind/runtime';
import { expect } from 'vitest';

const HOLDER = fileURLToPath(new URL('./lock-holder.mjs', import.meta.url));

/** Another process holding `path`'s write lock (BEGIN IMMEDIATE) until `release()`. */
export interface LockHolder extends AsyncDisposable {
  release(): Promise<void>;
}

export async function holdLock(
  driver: JournalDriver,
  path: string,
  pids: Set<number>,
): Promise<LockHolder> {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [HOLDER, path, driver], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  pids.add(child.pid ?? -1);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (expected: string): Promise<void> => {
    const line = await lines.next();
    expect(line.value, stderr).toBe(expected);
  };
  await next('locked');
  let released = false;
  const release = async (): Promise<void> => {
    if (released) return;
    released = true;
    child.stdin.end('release\n');
    await next('released');
    if (child.exitCode === null) await once(child, 'exit');
  };
  return { release, [Symbol.asyncDispose]: release };
}
