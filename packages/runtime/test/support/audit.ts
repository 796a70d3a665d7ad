import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { readAuditTrail, type AuditEntry } from '@stepbind/testkit';
import { within, WAIT_BOUND_MS } from './wait.js';

/**
 * Resolves with the first value `read` returns other than `undefined`, reading at once and again
 * each time the file system reports a change of the file at `path` (which need not exist yet):
 * waits for a file another process writes instead of polling it.
 */
export function fileState<T>(
  path: string,
  read: () => Promise<T | undefined>,
  what: string,
  ms: number = WAIT_BOUND_MS,
): Promise<T> {
  let watcher: FSWatcher | undefined;
  const found = new Promise<T>((resolve, reject) => {
    let reading = false;
    let changed = false;
    const check = async (): Promise<void> => {
      changed = true;
      if (reading) return;
      reading = true;
      try {
        while (changed) {
          changed = false;
          const value = await read();
          if (value !== undefined) return resolve(value);
        }
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      } finally {
        reading = false;
      }
    };
    const name = basename(path);
    // The directory, not the file: it sees the file created, and every write to it.
    watcher = watch(dirname(path), (_, changedName) => {
      if (changedName === null || changedName === name) void check();
    });
    void check();
  });
  return within(found, what, ms).finally(() => watcher?.close());
}

/**
 * Resolves with the first entry of the audit trail file at `path` (a stdio server's, written as
 * each message arrives) that `test` accepts, already there or still to come (see
 * {@link fileState}).
 */
export function auditEntry(
  path: string,
  test: (entry: AuditEntry) => boolean,
  ms: number = WAIT_BOUND_MS,
): Promise<AuditEntry> {
  return fileState(
    path,
    async () => (await readAuditTrail(path).catch(() => [])).find(test),
    `matching entry in audit trail ${path}`,
    ms,
  );
}
