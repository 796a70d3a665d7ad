/**
 * A real PostgreSQL for the fleet tests: `STEPBIND_PG_URL` when set, else a throwaway cluster of
 * this machine's PostgreSQL (`initdb` in a temp directory, a free port on 127.0.0.1; as the
 * `postgres` user when running as root), stopped and removed by `stop()`. Without either, the
 * suite is skipped with a printed reason; `STEPBIND_REQUIRE_PG=1` (CI) makes that a failure.
 * Each test file takes its own schema, so files run in parallel on one server.
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';

/** A PostgreSQL server the tests may use. */
export interface TestPostgres {
  /** Connection URL without a schema. */
  readonly url: string;
  /** True for a cluster these tests started (it can be restarted and stopped). */
  readonly local: boolean;
  /** A fresh schema name (created by the store's migrations, dropped by `stop`). */
  schema(prefix?: string): string;
  /** `pg_ctl restart` (local clusters only); resolves when the server accepts connections. */
  restart(): Promise<void>;
  /**
   * Freezes this cluster (local clusters only): `SIGSTOP` to its postmaster (from its own
   * `postmaster.pid`) and that postmaster's children, nothing else. Returns the thaw (`SIGCONT`
   * to exactly those); `stop()` and process exit thaw too.
   */
  freeze(): () => void;
  /** Drops the schemas it handed out (shared server) or stops and removes the cluster. */
  stop(): Promise<void>;
}

function findBin(name: string): string | undefined {
  const dirs: string[] = [];
  try {
    dirs.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim());
  } catch {
    // No pg_config: try PATH and the Debian layout.
  }
  dirs.push('/usr/lib/postgresql/15/bin', '/usr/local/bin', '/usr/bin');
  for (const dir of dirs) if (existsSync(join(dir, name))) return join(dir, name);
  return undefined;
}

function run(cmd: string, args: readonly string[], asPostgres: boolean): Promise<string> {
  const [file, argv] = asPostgres
    ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]]
    : [cmd, args];
  return new Promise((resolve, reject) => {
    execFile(file, argv as string[], { encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${cmd} ${args.join(' ')} failed: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function startCluster(): Promise<TestPostgres | string> {
  const initdb = findBin('initdb');
  const pgCtl = findBin('pg_ctl');
  if (initdb === undefined || pgCtl === undefined) {
    return 'neither STEPBIND_PG_URL is set nor a local initdb/pg_ctl found';
  }
  const asPostgres = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'stepbind-pg-'));
  const data = join(dir, 'data');
  if (asPostgres) {
    // The test run's private TMPDIR is 0700: the postgres user may pass through it (not list it).
    const parent = tmpdir();
    if (basename(parent).startsWith('stepbind-test-run-'))
      chmodSync(parent, statSync(parent).mode | 0o011);
    chownSync(dir, uidOf('postgres'), gidOf('postgres'));
  }
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200`;
  const start = (): Promise<string> =>
    run(pgCtl, ['-D', data, '-o', opts, '-l', join(dir, 'log'), '-w', 'start'], asPostgres);
  try {
    await run(initdb, ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'], asPostgres);
    await start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let stopped = false;
  const frozen: number[] = [];
  const thaw = (): void => {
    for (const pid of frozen.splice(0)) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Gone already.
      }
    }
  };
  // A safety net for a run that ends without its afterAll (an interrupted worker): no cluster
  // and no directory outlive the process.
  const onExit = (): void => {
    thaw();
    if (stopped) return;
    stopped = true;
    try {
      const args = ['-D', data, '-m', 'immediate', '-w', 'stop'];
      if (asPostgres)
        execFileSync('runuser', ['-u', 'postgres', '--', pgCtl, ...args], { stdio: 'ignore' });
      else execFileSync(pgCtl, args, { stdio: 'ignore' });
    } catch {
      // Already stopped.
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  return {
    url,
    local: true,
    schema: (prefix = 't') => `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`,
    restart: async () => {
      await run(pgCtl, ['-D', data, '-m', 'fast', '-w', 'stop'], asPostgres);
      await start();
    },
    freeze: () => {
      const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (!Number.isSafeInteger(postmaster) || postmaster <= 1) throw new Error('no postmaster');
      const pids = [postmaster, ...childrenOf(postmaster)];
      for (const pid of pids) process.kill(pid, 'SIGSTOP');
      frozen.push(...pids);
      return thaw;
    },
    stop: async () => {
      thaw();
      if (stopped) return;
      stopped = true;
      process.off('exit', onExit);
      await run(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop'], asPostgres).catch(() => '');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The pids whose parent is `parent` (from /proc: this cluster's backends and helpers). */
function childrenOf(parent: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Field 4 (ppid) follows the command name in parentheses, which may hold spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) pids.push(Number(entry));
    } catch {
      // Exited meanwhile.
    }
  }
  return pids;
}

function uidOf(user: string): number {
  return Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
}

function gidOf(user: string): number {
  return Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim());
}

function shared(url: string): TestPostgres {
  const handed: string[] = [];
  return {
    url,
    local: false,
    schema: (prefix = 't') => {
      const name = `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
      handed.push(name);
      return name;
    },
    restart: () => Promise.reject(new Error('cannot restart a server given by STEPBIND_PG_URL')),
    freeze: () => {
      throw new Error('cannot freeze a server given by STEPBIND_PG_URL');
    },
    stop: async () => {
      if (handed.length === 0) return;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        for (const name of handed.splice(0))
          await client.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * The server for one test file, or `undefined` (skip) with the reason printed. `local: true`
 * forces a throwaway cluster (tests that restart the server).
 *
 * @throws when `STEPBIND_REQUIRE_PG=1` and no server is available.
 */
export async function usePostgres(
  file: string,
  options: { readonly local?: boolean } = {},
): Promise<TestPostgres | undefined> {
  const url = process.env['STEPBIND_PG_URL'];
  const result =
    url !== undefined && url !== '' && options.local !== true ? shared(url) : await startCluster();
  if (typeof result !== 'string') return result;
  const message = `[stepbind] PostgreSQL suite SKIPPED in ${file}: ${result}. Set STEPBIND_PG_URL or install PostgreSQL (initdb) to run it.`;
  if (process.env['STEPBIND_REQUIRE_PG'] === '1')
    throw new Error(message.replace('SKIPPED', 'REQUIRED but unavailable'));
  console.warn(message);
  return undefined;
}
