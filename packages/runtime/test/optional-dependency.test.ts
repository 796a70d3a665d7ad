import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { requireOptional } from '../src/optional-dependency.js';

const dist = new URL('../dist/optional-dependency.js', import.meta.url).href;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * Calls the built `requireOptional(name, feature, load)` in a fresh Node whose `load` resolves from
 * a new directory holding `files` (an app without the package), without the `NODE_PATH` pnpm's
 * shims set (it would find the workspace's copy). Returns the error's code, detail and message.
 */
function loadIn(
  name: string,
  feature: string,
  files: Record<string, string> = {},
): { code: string; detail: Record<string, string>; message: string } {
  const dir = mkdtempSync(join(tmpdir(), 'stepbind-optional-'));
  dirs.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const script = `
    const { createRequire } = await import('node:module');
    const { requireOptional } = await import(${JSON.stringify(dist)});
    try {
      requireOptional(${JSON.stringify(name)}, ${JSON.stringify(feature)}, createRequire(${JSON.stringify(join(dir, 'app.js'))}));
      console.log('{}');
    } catch (error) {
      console.log(JSON.stringify({ code: error.code, detail: error.detail, message: error.message }));
    }`;
  const env = { ...process.env };
  delete env['NODE_PATH'];
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: dir,
    env,
    encoding: 'utf8',
  });
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as {
    code: string;
    detail: Record<string, string>;
    message: string;
  };
}

describe('optional dependencies', () => {
  it('names the missing package, the feature and the install command (DEPENDENCY_MISSING, not-installed)', () => {
    const error = loadIn('better-sqlite3', 'the SQLite journal /srv/j.db');
    expect(error.code).toBe('DEPENDENCY_MISSING');
    expect(error.detail).toEqual({
      package: 'better-sqlite3',
      feature: 'the SQLite journal /srv/j.db',
      install: 'npm install better-sqlite3@^12',
      reason: 'not-installed',
    });
    expect(error.message).toBe(
      'The SQLite journal /srv/j.db needs the optional package "better-sqlite3", which is not installed. Run `npm install better-sqlite3@^12` in your application (stepbind loads it only for this feature).',
    );
  });

  it('tells an installed package that fails to load (a missing file of its own) from a missing one', () => {
    const error = loadIn('pg', 'the fleet store postgres://db/x', {
      'node_modules/pg/package.json': '{ "name": "pg", "main": "index.js" }',
      'node_modules/pg/index.js': "require('pg-types');",
    });
    expect(error.code).toBe('DEPENDENCY_MISSING');
    expect(error.detail).toMatchObject({ package: 'pg', reason: 'not-loadable' });
    expect(error.message).toContain("installed but failed to load (Cannot find module 'pg-types'");
    expect(error.message).toContain('`npm install pg@^8`');
  });

  it('loads an installed package once asked (pg and better-sqlite3 of the workspace)', () => {
    expect(typeof requireOptional<{ Pool: unknown }>('pg', 'the fleet store').Pool).toBe(
      'function',
    );
    expect(typeof requireOptional<unknown>('better-sqlite3', 'the SQLite journal')).toBe(
      'function',
    );
  });
});
