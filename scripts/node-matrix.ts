/**
 * `pnpm matrix [22] [24]`: the test suite on the Node lines users run besides the machine's own.
 * `.ci/run` runs the README's test command (`pnpm check`, the whole suite) on the machine's Node 20
 * and this on private installs of Node 22 and 24 (`private-node.ts`). For each line: a copy of the
 * working tree (tracked and untracked files, not ignored ones) in a temporary folder, installed from
 * nothing on that Node (`pnpm install --frozen-lockfile`: better-sqlite3 is built from source against
 * that Node's headers, `npm_config_nodedir`), built, and the subset below run. Prints one line per
 * Node with its counts and times, writes `coverage/vitest-nodeMAJOR.json`, and exits 1 on any
 * failure. Needs `STEPBIND_PG_URL` for the fleet suites (as `pnpm test` does).
 *
 * Why a subset: the whole suite takes about 17 minutes on 2 CPUs and CI must stay under 60 with
 * the mutation and conformance stages. The subset is every suite whose behaviour depends on the
 * Node it runs on (the SQLite driver, child processes and their groups, sockets and fetch, WebCrypto
 * and the OAuth server, PostgreSQL's driver, the packed install, the CLI, the adapters' frameworks);
 * what is left out is pure logic (catalogs, bindings, policies, property tests against the oracle),
 * which runs on Node 20 in the whole suite and does not touch a Node API that differs between lines.
 */
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRIVATE_NODES, privateNode, type PrivateMajor } from './private-node.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The suites run on Node 22 and 24, grouped by the Node behaviour they prove. */
export const SUBSET: readonly string[] = [
  // The journal on node:sqlite and better-sqlite3: files, busy waits, SIGKILL recovery, receipts.
  'packages/runtime/test/journal/',
  'packages/runtime/test/optional-dependency.test.ts',
  // Child processes, their process groups, signals, stdio framing, hostile servers.
  'packages/runtime/test/transports.stdio.test.ts',
  'packages/runtime/test/runtime.stdio.test.ts',
  'packages/runtime/test/delivery.stdio.test.ts',
  // Warm starts and lazy servers: process spawn and idle stop, the cache file's atomic writes.
  'packages/runtime/test/provisional.stdio.test.ts',
  'packages/runtime/test/cache/catalog-cache.test.ts',
  'packages/runtime/test/third-party.test.ts',
  'packages/testkit/test/hostile.process.test.ts',
  'packages/testkit/test/hostile.stdio.test.ts',
  // HTTP: fetch (undici), sockets, sessions, the legacy SSE transport, the 2026 era over HTTP.
  'packages/runtime/test/http.test.ts',
  'packages/runtime/test/http.sessions.test.ts',
  'packages/runtime/test/http.secrets.test.ts',
  'packages/runtime/test/sse.http.test.ts',
  'packages/runtime/test/era.sdk2.http.test.ts',
  'packages/runtime/test/third-party.http.test.ts',
  // OAuth against a real authorization server (oidc-provider, jose, WebCrypto, loopback sockets).
  'packages/runtime/test/auth/',
  // The fleet on PostgreSQL (the pg driver's sockets, SIGKILLed workers).
  'packages/runtime/test/fleet/',
  // What a user installs and runs: packed packages, the README's code, the CLI, options, config.
  'packages/runtime/test/install.test.ts',
  'packages/runtime/test/packaging.test.ts',
  'packages/runtime/test/readme.test.ts',
  'packages/runtime/test/cli/',
  'packages/runtime/test/cli.test.ts',
  'packages/runtime/test/options.test.ts',
  'packages/runtime/test/config-file.test.ts',
  'examples/',
  // The frameworks of the adapters (AI SDK 7 needs Node 22).
  'packages/runtime/test/adapters/',
];

/**
 * What Node 24 runs: one suite or a few per Node subsystem the subset above exercises, since the
 * whole suite on Node 24 found nothing in `src/` that behaves differently from Node 22 (DESIGN
 * §18) and the full subset on 24 proved again what 22 proved, for about 6 minutes of CI. Each
 * line's subsystem: node:sqlite (driver, busy waits, files of the other driver, the SIGKILL
 * campaign at {@link KILL_POINTS}), child processes and their groups, fetch (undici) and HTTP
 * sessions, WebCrypto and a real authorization server, the pg driver's sockets, npm packing and a
 * packed install, and the frameworks of the adapters (AI SDK 7).
 */
export const SUBSET_24: readonly string[] = [
  'packages/runtime/test/journal/node-sqlite.test.ts',
  'packages/runtime/test/journal/sqlite.test.ts',
  'packages/runtime/test/journal/sqlite.busy.test.ts',
  'packages/runtime/test/journal/cross-driver.test.ts',
  'packages/runtime/test/journal/abi-mismatch.test.ts',
  'packages/runtime/test/journal/group-commit.test.ts',
  'packages/runtime/test/journal/kill.test.ts',
  'packages/runtime/test/optional-dependency.test.ts',
  'packages/runtime/test/transports.stdio.test.ts',
  'packages/runtime/test/http.test.ts',
  'packages/runtime/test/auth/fetch.test.ts',
  'packages/runtime/test/auth/oidc.http.test.ts',
  'packages/runtime/test/fleet/journal-store.pg.test.ts',
  'packages/runtime/test/install.test.ts',
  'packages/runtime/test/packaging.test.ts',
  'packages/runtime/test/adapters/',
];

/**
 * Kill points of the SIGKILL campaign per line: 50 on Node 22 reach every kind of kill point about
 * 8 times; 24 on Node 24 about 4 times (Node 20 runs 200 on better-sqlite3 in the whole suite).
 */
const KILL_POINTS: Readonly<Record<PrivateMajor, string>> = { 22: '50', 24: '24' };

interface Report {
  readonly numPassedTests: number;
  readonly numFailedTests: number;
  readonly numPendingTests: number;
  readonly numTodoTests: number;
  readonly testResults: readonly unknown[];
}

function seconds(since: bigint): string {
  return `${(Number(process.hrtime.bigint() - since) / 1e9).toFixed(0)} s`;
}

function step(label: string, command: string, args: readonly string[], options: SpawnSyncOptions) {
  const start = process.hrtime.bigint();
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  const took = seconds(start);
  if (result.status !== 0 && label !== 'tests') {
    throw new Error(
      `${label} failed (${command} ${args.join(' ')}: exit ${result.status ?? result.signal})`,
    );
  }
  return { took, status: result.status };
}

/** Copies the working tree's tracked and untracked files (not ignored ones) into `to`. */
function copyTree(to: string): void {
  const listed = spawnSync(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const file of listed.stdout.split('\0')) {
    if (file === '') continue;
    const target = join(to, file);
    mkdirSync(dirname(target), { recursive: true });
    try {
      cpSync(join(root, file), target, { verbatimSymlinks: true });
    } catch (error) {
      // A file deleted in the working tree but not yet in the index is not part of it.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

function runOn(major: PrivateMajor): { line: string; ok: boolean } {
  const node = privateNode(major, 'the Node-sensitive suites run on it');
  const work = mkdtempSync(join(tmpdir(), `stepbind-node${major}-`));
  const report = join(root, 'coverage', `vitest-node${major}.json`);
  rmSync(report, { force: true });
  try {
    const tree = join(work, 'stepbind');
    copyTree(tree);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${node.bin}:${process.env['PATH'] ?? ''}`,
      // Native addons (better-sqlite3) build against this Node's headers, not a download.
      npm_config_nodedir: node.dir,
      // Both journal drivers must run here (node:sqlite is built in from 22.13 on).
      STEPBIND_REQUIRE_JOURNAL_DRIVERS: 'node:sqlite,better-sqlite3',
      // The machine's Node has another ABI: loading this tree's better-sqlite3 there must fail clearly.
      STEPBIND_OTHER_ABI_NODE: process.execPath,
      STEPBIND_REQUIRE_AI_SDK7: '1',
      // The SIGKILL campaign on node:sqlite (100 points took about 2 minutes per Node of CI's 60).
      STEPBIND_KILL_POINTS: KILL_POINTS[major],
      CI: '1',
    };
    const options: SpawnSyncOptions = { cwd: tree, env };
    const version = spawnSync(node.node, ['--version'], { encoding: 'utf8' }).stdout.trim();
    console.log(`\n=== ${version}: install from nothing, build, the Node-sensitive suites ===`);
    const install = step(
      'install',
      'pnpm',
      ['install', '--frozen-lockfile', '--prefer-offline'],
      options,
    );
    const build = step('build', 'pnpm', ['-s', 'build'], options);
    mkdirSync(dirname(report), { recursive: true });
    const tests = step(
      'tests',
      node.node,
      [
        'node_modules/vitest/vitest.mjs',
        'run',
        // The suites wait on child processes, sockets and PostgreSQL more than they compute: two
        // workers on 2 CPUs (vitest's default is one less than the CPUs).
        '--maxWorkers=2',
        '--project',
        'default',
        // The adapter suites again against AI SDK 7, which needs Node 22.
        '--project',
        'ai-sdk-7',
        ...(major === 24 ? SUBSET_24 : SUBSET),
      ],
      options,
    );
    // CI=1 makes the configuration write its JSON report in the copy (vitest.config.ts).
    let counts: Report | undefined;
    try {
      const text = readFileSync(join(tree, 'coverage', 'vitest.json'), 'utf8');
      writeFileSync(report, text);
      counts = JSON.parse(text) as Report;
    } catch {
      counts = undefined;
    }
    const ok =
      tests.status === 0 &&
      counts !== undefined &&
      counts.numFailedTests === 0 &&
      counts.numPassedTests > 0;
    const line =
      counts === undefined
        ? `node ${version} (subset): no report (vitest exit ${tests.status})`
        : `node ${version} (subset, ${counts.testResults.length} files): ${counts.numPassedTests} passed, ${counts.numFailedTests} failed, ${counts.numPendingTests + counts.numTodoTests} skipped; install ${install.took} (better-sqlite3 compiled, or reused from pnpm's cache for this Node), build ${build.took}, tests ${tests.took}`;
    console.log(line);
    return { line, ok };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const requested = process.argv.slice(2).map(Number);
const majors = (
  requested.length > 0 ? requested : Object.keys(PRIVATE_NODES).map(Number)
) as PrivateMajor[];
for (const major of majors) {
  if (!(major in PRIVATE_NODES)) {
    console.error(`usage: pnpm matrix [${Object.keys(PRIVATE_NODES).join('] [')}]`);
    process.exit(2);
  }
}
const lines: string[] = [];
let failed = false;
for (const major of majors) {
  const { line, ok } = runOn(major);
  lines.push(line);
  if (!ok) failed = true;
}
console.log('');
for (const line of lines) console.log(line);
process.exitCode = failed ? 1 : 0;
