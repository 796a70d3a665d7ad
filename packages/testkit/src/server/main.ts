import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Runs `main` when the module at `moduleUrl` is the script node was started with (a server entry
 * point run as a child process), and not when it is imported. A failure is written to stderr as
 * `label: message` and exits with code 2.
 */
export function runIfMain(moduleUrl: string, label: string, main: () => Promise<void>): void {
  const script = process.argv[1];
  if (script === undefined) return;
  let isMain: boolean;
  try {
    isMain = realpathSync(script) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    isMain = false;
  }
  if (!isMain) return;
  main().catch((error: unknown) => {
    process.stderr.write(`${label}: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  });
}
