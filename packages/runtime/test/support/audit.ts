import { watch, type FSWatcher } from 'node:fs';
import { readAuditTrail, type AuditEntry } from '@stepbind/testkit';
import { within, WAIT_BOUND_MS } from './wait.js';

/**
 * Resolves with the first entry of the audit trail file at `path` (a stdio server's, written as
 * each message arrives) that `test` accepts, already there or still to come: it re-reads the file
 * on each change the file system reports instead of polling it.
 */
export function auditEntry(
  path: string,
  test: (entry: AuditEntry) => boolean,
  ms: number = WAIT_BOUND_MS,
): Promise<AuditEntry> {
  let watcher: FSWatcher | undefined;
  const found = new Promise<AuditEntry>((resolve, reject) => {
    let reading = false;
    let changed = false;
    const check = async (): Promise<void> => {
      changed = true;
      if (reading) return;
      reading = true;
      try {
        while (changed) {
          changed = false;
          const hit = (await readAuditTrail(path)).find(test);
          if (hit !== undefined) return resolve(hit);
        }
      } catch (error) {
        reject(error as Error);
      } finally {
        reading = false;
      }
    };
    watcher = watch(path, () => void check());
    void check();
  });
  return within(found, `matching entry in audit trail ${path}`, ms).finally(() => watcher?.close());
}
