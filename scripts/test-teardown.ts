/**
 * Vitest global setup: after the whole run, removes the audit trails (`stepbind-audit-*` in the
 * temp directory) that this run's tests created with `tempAuditPath` and did not remove themselves,
 * so `pnpm test` leaves nothing behind. Entries older than the run are left alone.
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const started = Date.now() - 1000;
  return () => {
    const dir = tmpdir();
    for (const name of readdirSync(dir)) {
      if (!name.startsWith('stepbind-audit-')) continue;
      const path = join(dir, name);
      try {
        if (statSync(path).mtimeMs >= started) rmSync(path, { recursive: true, force: true });
      } catch {
        // Gone already, or not ours to remove.
      }
    }
  };
}
