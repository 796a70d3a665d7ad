import { rmSync } from 'node:fs';
import { isStepbindError, type CallError } from '@stepbind/binding';
import type { McpRuntime } from '@stepbind/runtime';
import { isProcessAlive } from '@stepbind/testkit';
import { afterEach, expect } from 'vitest';
import { waitUntilGone } from '../helpers.js';

/** What a test file hands to {@link trackRuntimes}'s clean-up. */
export interface RuntimeTracker {
  /** Runtimes to close after each test. */
  readonly runtimes: McpRuntime[];
  /** Server processes (besides the runtimes' own) that must be gone after each test. */
  readonly pids: Set<number>;
  /** Audit files to remove after each test. */
  readonly auditFiles: string[];
}

/**
 * Registers an `afterEach` that closes every tracked runtime, waits for its server processes (and
 * the tracked pids) to be gone and asserts none is left, then removes the audit files.
 */
export function trackRuntimes(): RuntimeTracker {
  const tracker: RuntimeTracker = { runtimes: [], pids: new Set<number>(), auditFiles: [] };
  afterEach(async () => {
    const { runtimes, pids, auditFiles } = tracker;
    for (const r of runtimes.splice(0)) {
      for (const pid of r.pids()) pids.add(pid);
      await r.close();
    }
    for (const pid of pids) await waitUntilGone(pid);
    const left = [...pids].filter((pid) => isProcessAlive(pid));
    pids.clear();
    for (const file of auditFiles.splice(0)) rmSync(file, { force: true });
    expect(left).toEqual([]);
  });
  return tracker;
}

/** The typed error `promise` rejects with; fails the test when it resolves or rejects otherwise. */
export async function failure(promise: Promise<unknown>): Promise<CallError> {
  const error: unknown = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  expect(isStepbindError(error)).toBe(true);
  return error as CallError;
}
