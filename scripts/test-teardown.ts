/**
 * Vitest global setup: every test must remove the temp files and directories it creates, and this
 * guard fails the run (exit code 1, the leftovers listed) when one does not.
 *
 * The run gets a private temp directory (`stepbind-test-run-*` in the system temp directory) set as
 * `TMPDIR` before the test workers start, so `os.tmpdir()` in every test, worker and child process
 * that inherits the environment points there. At teardown anything left in it is a leak of this
 * run, whatever its name: it is listed, the run fails, and the directory is removed. A private
 * directory, rather than a before/after listing of the shared one, keeps concurrent runs (of this
 * repository or of other tools) from failing each other.
 *
 * The system temp directory is also listed at setup and at teardown: `stepbind-*` entries that
 * appeared there meanwhile are printed as a note (they come from a process that did not inherit
 * `TMPDIR`, or from another run), without failing the run, since they cannot be told apart.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The prefix every temp entry this repository creates starts with. */
const REPO_PREFIX = 'stepbind-';
const RUN_PREFIX = `${REPO_PREFIX}test-run-`;

/** Names in `after` that start with the repository's prefix and were not in `before`. */
function newRepoEntries(before: ReadonlySet<string>, after: readonly string[]): string[] {
  return after
    .filter((name) => name.startsWith(REPO_PREFIX) && !name.startsWith(RUN_PREFIX))
    .filter((name) => !name.startsWith(`${REPO_PREFIX}test-cache-`))
    .filter((name) => !before.has(name))
    .sort();
}

/** Set while a run's private directory is in place: every vitest project's setup after the first shares it. */
const RUN_DIR_ENV = 'STEPBIND_TEST_RUN_DIR';

export default function setup(): () => void {
  // Each vitest project runs its global setup; the first one of the run owns the directory.
  const current = process.env[RUN_DIR_ENV];
  if (current !== undefined && process.env['TMPDIR'] === current) return () => undefined;
  const systemTmp = tmpdir();
  const before = new Set(readdirSync(systemTmp));
  const runDir = mkdtempSync(join(systemTmp, RUN_PREFIX));
  const previous = process.env['TMPDIR'];
  process.env['TMPDIR'] = runDir;
  process.env[RUN_DIR_ENV] = runDir;
  // Tools the tests spawn (pnpm, tsx) turn on Node 22+'s module compile cache, a folder in TMPDIR
  // that outlives them: it is theirs, not a test's leftover, and no test needs it.
  process.env['NODE_DISABLE_COMPILE_CACHE'] ??= '1';
  // The CLI keeps its catalog cache under the user's cache directory (DESIGN §19.1): for the run it
  // is a folder of its own, so no test reads or writes the user's, and it goes with the run.
  const previousCacheHome = process.env['XDG_CACHE_HOME'];
  const cacheHome = mkdtempSync(join(systemTmp, `${REPO_PREFIX}test-cache-`));
  process.env['XDG_CACHE_HOME'] = cacheHome;
  return () => {
    delete process.env[RUN_DIR_ENV];
    if (previousCacheHome === undefined) delete process.env['XDG_CACHE_HOME'];
    else process.env['XDG_CACHE_HOME'] = previousCacheHome;
    rmSync(cacheHome, { recursive: true, force: true });
    if (previous === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = previous;
    let leftovers: string[];
    try {
      leftovers = readdirSync(runDir).sort();
    } catch (error) {
      console.error(`temp guard: the run's temp directory ${runDir} is gone:`, error);
      process.exitCode = 1;
      return;
    }
    rmSync(runDir, { recursive: true, force: true });
    if (leftovers.length > 0) {
      console.error(
        `\ntemp guard: FAILED: the tests left ${leftovers.length} entr${leftovers.length === 1 ? 'y' : 'ies'} in the temp directory (${runDir}, now removed):\n` +
          leftovers.map((name) => `  ${name}`).join('\n') +
          '\nEach test must remove what it creates (await using a testkit tempDir/tempAudit).\n',
      );
      process.exitCode = 1;
    }
    const outside = newRepoEntries(before, readdirSync(systemTmp));
    if (outside.length > 0) {
      console.warn(
        `temp guard: note: ${outside.length} new ${REPO_PREFIX}* entr${outside.length === 1 ? 'y' : 'ies'} in ${systemTmp} during the run (another run, or a process without TMPDIR):\n` +
          outside.map((name) => `  ${name}`).join('\n'),
      );
    }
  };
}
