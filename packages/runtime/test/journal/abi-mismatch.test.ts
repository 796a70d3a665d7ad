import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

/**
 * A Node binary whose ABI differs from the one better-sqlite3 was built for (CI sets it: the
 * suite's tree is installed under one Node, this names another). Unset: the suite is skipped.
 */
const OTHER_NODE = process.env['STEPBIND_OTHER_ABI_NODE'];
const OPEN = fileURLToPath(new URL('./abi/open-journal.mjs', import.meta.url));

function openUnder(node: string, path: string, driver: string): Record<string, unknown> {
  const run = spawnSync(node, [OPEN, path, driver], { encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

function nodeSqliteIn(node: string): boolean {
  const run = spawnSync(
    node,
    ['-e', "process.stdout.write(String(!!process.getBuiltinModule?.('node:sqlite')))"],
    { encoding: 'utf8' },
  );
  return run.stdout === 'true';
}

describe.skipIf(OTHER_NODE === undefined)('better-sqlite3 built for another Node', () => {
  const node = OTHER_NODE ?? '';

  it('is a DEPENDENCY_MISSING (not-loadable) saying to rebuild it or use the default driver, and creates nothing', () => {
    using dir = tempDir('abi');
    const path = join(dir.path, 'journal.db');
    const result = openUnder(node, path, 'better-sqlite3');
    expect(result).toMatchObject({
      ok: false,
      code: 'DEPENDENCY_MISSING',
      detail: { package: 'better-sqlite3', reason: 'not-loadable' },
    });
    expect(result['message']).toContain('npm rebuild better-sqlite3');
    expect(result['message']).toContain('node:sqlite');
    expect(existsSync(path)).toBe(false);
  });

  it('does not stop the default driver: auto opens the journal on node:sqlite where that Node has it', () => {
    using dir = tempDir('abi');
    const path = join(dir.path, 'journal.db');
    const result = openUnder(node, path, 'auto');
    if (nodeSqliteIn(node)) {
      expect(result).toMatchObject({ ok: true, driver: 'node:sqlite' });
    } else {
      expect(result).toMatchObject({ ok: false, code: 'DEPENDENCY_MISSING' });
    }
  });
});
