import { isProcessAlive } from '@stepbind/testkit';

/**
 * Resolves once `pid` is gone; rejects after about 5 s. The one wait on the kernel in the tests,
 * for a process that is not this process's child (a server its own parent left behind, reaped by
 * init): Node reports no exit for those, so this probes `kill(pid, 0)` every 20 ms. A child of this
 * process is awaited through its exit instead, and a runtime's servers are gone once its `close()`
 * resolves (see {@link expectGone}).
 */
export async function waitUntilGone(pid: number): Promise<void> {
  for (let i = 0; i < 250; i++) {
    if (!isProcessAlive(pid)) return;
    // eslint-disable-next-line no-restricted-syntax -- no exit event exists for a non-child pid
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`process ${pid} is still alive`);
}

/**
 * Throws when a process in `pids` still exists (no waiting: call it once they must be gone). Free
 * of vitest, like the rest of this module, so `scripts/soak.ts` can load the kill harness.
 */
export function expectGone(pids: Iterable<number>): void {
  const left = [...pids].filter((pid) => isProcessAlive(pid));
  if (left.length > 0) throw new Error(`processes still alive: ${left.join(', ')}`);
}
