import { rmSync } from 'node:fs';
import type { McpRuntime } from '@stepbind/runtime';
import { afterEach } from 'vitest';
import { expectGone } from './processes.js';

/** What a test file hands to {@link trackRuntimes}'s clean-up. */
export interface RuntimeTracker {
  /** Runtimes to close after each test. */
  readonly runtimes: McpRuntime[];
  /** Processes (besides the runtimes' servers) that must be gone, without waiting, after each test. */
  readonly pids: Set<number>;
  /** Audit files to remove after each test. */
  readonly auditFiles: string[];
}

/**
 * Registers an `afterEach` that closes every tracked runtime, asserts that none of its server
 * processes (nor the tracked pids) is left (a runtime's `close()` resolves only once its servers
 * are gone: nothing to wait for), then removes the audit files.
 */
export function trackRuntimes(): RuntimeTracker {
  const tracker: RuntimeTracker = { runtimes: [], pids: new Set<number>(), auditFiles: [] };
  afterEach(async () => {
    const { runtimes, pids, auditFiles } = tracker;
    for (const r of runtimes.splice(0)) {
      for (const pid of r.pids()) pids.add(pid);
      await r.close();
    }
    const tracked = [...pids];
    pids.clear();
    for (const file of auditFiles.splice(0)) rmSync(file, { force: true });
    expectGone(tracked);
  });
  return tracker;
}
