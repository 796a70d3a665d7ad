/**
 * The first install, as a user meets it (DESIGN §17.4): the three packages packed, installed OFFLINE
 * into fresh apps from the local pnpm store, then a plain-JS agent loop on this Node, a strict
 * TypeScript check with `skipLibCheck: false`, and a journal without better-sqlite3: on Node 22.13+
 * it opens on the built-in `node:sqlite` (DESIGN §18.1), before that it is `DEPENDENCY_MISSING`.
 * Prints the install time of the runtime alone and with better-sqlite3, tagged with the Node
 * version; with `STEPBIND_INSTALL_FROM_SOURCE=1` better-sqlite3 is built from source (pnpm's
 * side-effects cache off; minutes), else the store's cached build for this Node is reused (CI: the
 * one its own install of the tree just made). Slow: packing,
 * three installs and a full `tsc` are about a minute of CPU, plus the native build when asked for.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOfflineApp, packAll, run } from './support/offline-app.js';

/** A source build of better-sqlite3 alone took 5.6 minutes on the loaded 2-CPU machine. */
const SETUP_TIMEOUT_MS = 1_200_000;
// pnpm on Node 22+ turns on Node's compile cache in the temp directory: not in this test's.
process.env['NODE_DISABLE_COMPILE_CACHE'] = '1';
/** Node 22.13 and later have `node:sqlite` without a flag: the journal needs no package there. */
const HAS_NODE_SQLITE = (() => {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 13);
})();
/** Asked for: better-sqlite3 compiled for this install, not taken from the store's cache. */
const FROM_SOURCE = process.env['STEPBIND_INSTALL_FROM_SOURCE'] === '1';
/**
 * `skipLibCheck: false` checks every declaration file (zod's alone are 109): ~30 s of CPU, minutes
 * of wall time on a loaded 2-CPU machine.
 */
const TSC_TIMEOUT_MS = 300_000;

let dir: string;
/** binding + runtime + testkit + typescript: the loop and the TypeScript check run here. */
let app: string;
/** Install times (ms) of binding + runtime into a fresh app, without and with better-sqlite3. */
const installMs = { runtime: 0, withJournal: 0 };
let journalApp: string;
/** The output of `tsc` in `app` (empty when it compiles), see {@link startTypeCheck}. */
let typeCheck: Promise<string>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stepbind-install-'));
  const tarballs = join(dir, 'tarballs');
  await packAll(tarballs);
  const bare = join(dir, 'bare');
  journalApp = join(dir, 'journal');
  app = join(dir, 'app');
  for (const path of [bare, journalApp, app]) mkdirSync(path);
  // One at a time, the app for the checks first: it warms the store's file cache, so the two timed
  // installs after it compare the packages, not a cold disk.
  await createOfflineApp(app, {
    tarballs,
    stepbind: ['runtime', 'testkit'],
    extra: ['typescript', '@types/node'],
  });
  typeCheck = startTypeCheck(app);
  installMs.runtime = await createOfflineApp(bare, { tarballs, stepbind: ['runtime'] });
  // pnpm reads npm_config_* from its environment, which createOfflineApp passes on.
  const cache = process.env['npm_config_side_effects_cache'];
  if (FROM_SOURCE) process.env['npm_config_side_effects_cache'] = 'false';
  try {
    installMs.withJournal = await createOfflineApp(journalApp, {
      tarballs,
      stepbind: ['runtime'],
      extra: ['better-sqlite3'],
    });
  } finally {
    if (cache === undefined) delete process.env['npm_config_side_effects_cache'];
    else process.env['npm_config_side_effects_cache'] = cache;
  }
  const build = FROM_SOURCE
    ? 'better-sqlite3 compiled from source (side-effects cache off)'
    : "better-sqlite3's native build reused from the store's side-effects cache if this machine built it before (set STEPBIND_INSTALL_FROM_SOURCE=1 to compile from source)";
  console.log(
    `[Node ${process.versions.node}] install of @stepbind/runtime into a fresh app, offline from the pnpm store: ${installMs.runtime} ms alone (journal driver: ${HAS_NODE_SQLITE ? 'node:sqlite, built in' : 'none until better-sqlite3 is added'}), ${installMs.withJournal} ms with better-sqlite3 (${packageCount(bare)} vs ${packageCount(journalApp)} packages; ${build})`,
  );
}, SETUP_TIMEOUT_MS);

afterAll(async () => {
  // The type check may outlive a failed test: wait for its process before removing its files.
  await typeCheck;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
}, TSC_TIMEOUT_MS);

function packageCount(path: string): number {
  return readdirSync(join(path, 'node_modules', '.pnpm')).filter(
    (name) => name !== 'node_modules' && !name.startsWith('lock'),
  ).length;
}

/** Runs a script file of `cwd` with this Node: its stdout. */
async function node(cwd: string, file: string, source: string): Promise<string> {
  writeFileSync(join(cwd, file), source);
  const { stdout } = await run(process.execPath, [file], { cwd });
  return stdout;
}

/**
 * Starts `tsc --noEmit` (strict, `skipLibCheck: false`) in the app over a file importing the public
 * API of all three packages. Started as soon as the app is installed: checking every declaration
 * file is the slowest step, so it runs while the other apps install. Settles to its output.
 */
function startTypeCheck(app: string): Promise<string> {
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        skipLibCheck: false,
        noEmit: true,
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        types: ['node'],
      },
      files: ['check.ts'],
    }),
  );
  writeFileSync(
    join(app, 'check.ts'),
    `import { ErrorCode, isStepbindError, type McpBinding } from '@stepbind/binding';
import { McpRuntime, toToolResult, type McpRuntimeOptions } from '@stepbind/runtime';
import { PgHandle, type PgClient, type PgQueryResult } from '@stepbind/runtime/fleet';
import { stdioServerParams, type ScriptedServerOptions } from '@stepbind/testkit';

const server: ScriptedServerOptions = { scenario: 'normal' };
const options: McpRuntimeOptions = { journal: { path: './journal.db' } };

export async function loop(): Promise<number> {
  const runtime = await McpRuntime.open({ mcpServers: { a: stdioServerParams(server) } }, options);
  try {
    const step: McpBinding = await runtime.captureBinding();
    try {
      return step.tools.length;
    } catch (error) {
      if (isStepbindError(error, ErrorCode.DEPENDENCY_MISSING)) return error.detail.install.length;
      return toToolResult(error).content.length;
    } finally {
      step.release();
    }
  } finally {
    await runtime.close();
  }
}

export async function rows(handle: PgHandle): Promise<PgQueryResult<{ id: number }>> {
  const client: PgClient = handle.client();
  await client.end();
  return handle.query<{ id: number }>('SELECT 1 AS id');
}
`,
  );
  const tsc = join(app, 'node_modules', 'typescript', 'bin', 'tsc');
  return run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app }).then(
    ({ stdout }) => stdout,
    (error: unknown) => String(error),
  );
}

describe('installing the packed packages into a fresh app', () => {
  it('installs the runtime without better-sqlite3 or pg and without building anything', () => {
    const installed = readdirSync(join(dir, 'bare', 'node_modules', '.pnpm'));
    expect(installed.some((name) => name.startsWith('@stepbind+runtime@'))).toBe(true);
    expect(
      installed.filter((name) => /^(better-sqlite3|pg|prebuild-install|node-gyp)@/.test(name)),
    ).toEqual([]);
    expect(installMs.runtime).toBeGreaterThan(0);
    expect(installMs.withJournal).toBeGreaterThan(0);
  });

  it('runs a plain-JS agent loop on this Node: open on a testkit stdio server, capture, call, release, close', async () => {
    const out = await node(
      app,
      'loop.mjs',
      `import { McpRuntime, toToolResult } from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';

const runtime = await McpRuntime.open({
  mcpServers: { a: stdioServerParams({ scenario: 'normal', era: 'legacy' }) },
});
try {
  const step = await runtime.captureBinding();
  try {
    const tools = step.tools.map((tool) => tool.name);
    const { result, receipt } = await step.prepareCall('a__gamma').run({}, {
      // What a loop does with a call that needs the user's approval (here: always yes).
      prepare: (ctx) => {
        if (ctx.approvalRequired) ctx.approve();
      },
    });
    let missing;
    try {
      await step.prepareCall('a__nope').run({});
    } catch (error) {
      missing = toToolResult(error); // what the model is told
    }
    console.log(JSON.stringify({ tools, isError: result.isError === true, server: receipt.server, tool: receipt.tool, missing: missing?.isError === true }));
  } finally {
    step.release();
  }
} finally {
  await runtime.close();
}
`,
    );
    const printed = JSON.parse(out) as {
      tools: string[];
      isError: boolean;
      server: string;
      tool: string;
      missing: boolean;
    };
    expect(printed.tools).toContain('a__gamma');
    expect(printed).toMatchObject({ isError: false, server: 'a', tool: 'gamma', missing: true });
  }, 60_000);

  it(
    'type-checks a strict TypeScript file against the public API of all three packages with skipLibCheck false',
    async () => {
      expect(await typeCheck).toBe('');
    },
    TSC_TIMEOUT_MS,
  );

  /** Opens a journal in `cwd` with `journal` options: the driver in use, or the error. */
  async function openJournal(
    cwd: string,
    journal: Record<string, unknown>,
  ): Promise<{
    driver?: string;
    code?: string;
    detail?: Record<string, string>;
    message?: string;
  }> {
    rmSync(join(cwd, 'journal.db'), { force: true });
    const out = await node(
      cwd,
      'journal.mjs',
      `import { McpRuntime } from '@stepbind/runtime';
try {
  const runtime = await McpRuntime.open({ mcpServers: {} }, { journal: ${JSON.stringify(journal)} });
  const { driver } = runtime.status().journal;
  await runtime.close();
  console.log(JSON.stringify({ driver }));
} catch (error) {
  console.log(JSON.stringify({ code: error.code, detail: error.detail, message: error.message }));
}
`,
    );
    return JSON.parse(out) as Awaited<ReturnType<typeof openJournal>>;
  }

  const missingBetterSqlite3 = (printed: Awaited<ReturnType<typeof openJournal>>): void => {
    expect(printed.code).toBe('DEPENDENCY_MISSING');
    expect(printed.detail).toMatchObject({
      package: 'better-sqlite3',
      install: 'npm install better-sqlite3@^12',
      reason: 'not-installed',
    });
    expect(printed.message).toContain('npm install better-sqlite3@^12');
    expect(printed.message).toContain('journal.db');
  };

  it.runIf(HAS_NODE_SQLITE)(
    'opens a SQLite journal on node:sqlite with no better-sqlite3 installed (Node 22.13+)',
    async () => {
      expect(
        readdirSync(join(app, 'node_modules', '.pnpm')).filter((n) =>
          n.startsWith('better-sqlite3@'),
        ),
      ).toEqual([]);
      expect(await openJournal(app, { path: './journal.db' })).toEqual({ driver: 'node:sqlite' });
      expect(readdirSync(app)).toContain('journal.db');
      // Asking for better-sqlite3 by name still names the package and the install command.
      missingBetterSqlite3(
        await openJournal(app, { path: './journal.db', driver: 'better-sqlite3' }),
      );
      expect(readdirSync(app)).not.toContain('journal.db');
    },
    60_000,
  );

  it.runIf(!HAS_NODE_SQLITE)(
    'fails a journal path without better-sqlite3 with DEPENDENCY_MISSING naming the package and the install command (Node before 22.13)',
    async () => {
      missingBetterSqlite3(await openJournal(app, { path: './journal.db' }));
      expect(readdirSync(app)).not.toContain('journal.db');
    },
    60_000,
  );

  it('opens the same journal on better-sqlite3 once it is installed beside the runtime', async () => {
    expect(
      await openJournal(journalApp, { path: './journal.db', driver: 'better-sqlite3' }),
    ).toEqual({ driver: 'better-sqlite3' });
    expect(await openJournal(journalApp, { path: './journal.db' })).toEqual({
      driver: HAS_NODE_SQLITE ? 'node:sqlite' : 'better-sqlite3',
    });
    expect(readdirSync(journalApp)).toContain('journal.db');
  }, 60_000);
});
