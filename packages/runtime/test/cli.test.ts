import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../src/cli/run.js';
import {
  hostileServerParams,
  isProcessAlive,
  readAuditTrail,
  readHostilePids,
  runningProcesses,
  stdioServerParams,
  tempAuditPath,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntilGone } from './support/processes.js';
import { auditEntry, fileState } from './support/audit.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-cli-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeConfig(
  name: string,
  servers: Record<string, ScriptedServerOptions | Record<string, unknown>>,
): Promise<string> {
  const mcpServers: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(servers)) {
    mcpServers[key] =
      'scenario' in value ? stdioServerParams(value as ScriptedServerOptions) : value;
  }
  const path = join(dir, `${name}.json`);
  await writeFile(path, JSON.stringify({ mcpServers }));
  return path;
}

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(args, {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
  });
  return { code, out, err };
}

describe('stepbind catalog', () => {
  it('prints exactly the documented JSON and exits 1 when one server fails', async () => {
    const config = await writeConfig('mixed', {
      normal: { scenario: 'normal' },
      looping: { scenario: 'cycle' },
    });
    const { code, out } = await cli(['catalog', '--config', config, '--json']);
    expect(code).toBe(1);
    const report = JSON.parse(out) as { servers: unknown[] };
    expect(report.servers).toEqual([
      expect.objectContaining({
        name: 'normal',
        ok: true,
        tools: ['alpha', 'beta', 'gamma'],
        pageSizes: [1, 0, 2],
      }),
      {
        name: 'looping',
        ok: false,
        error: { code: 'CURSOR_REPEATED', message: expect.stringContaining('looping') },
      },
    ]);
    expect(Object.keys(report)).toEqual(['servers']);
  });

  it('reports state, generation, page root and per-tool digests and effect classes', async () => {
    const config = await writeConfig('snap', {
      plain: { scenario: 'normal' },
      proven: { scenario: 'revision-consistent' },
    });
    const { code, out } = await cli(['catalog', '--config', config, '--json']);
    expect(code).toBe(0);
    const [plain, proven] = (JSON.parse(out) as { servers: Record<string, unknown>[] }).servers;
    expect(plain).toMatchObject({
      state: 'UNVERSIONED_OBSERVATION',
      generation: 1,
      sourceRevision: null,
    });
    expect(plain?.['pageRoot']).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(plain?.['descriptors']).toEqual([
      {
        name: 'alpha',
        modelName: 'plain__alpha',
        descriptorDigest: expect.stringMatching(/^sha256:/),
        effectClass: 'unknown',
      },
      expect.objectContaining({ name: 'beta' }),
      expect.objectContaining({ name: 'gamma' }),
    ]);
    expect(proven).toMatchObject({ state: 'ELIGIBLE', generation: 1, sourceRevision: 'rev-1' });
  });

  it('exits 0 and prints counts, page sizes, state and each tool with its effect class for humans', async () => {
    const config = await writeConfig('good', {
      normal: { scenario: 'normal' },
      solo: { scenario: 'single' },
    });
    const { code, out } = await cli(['catalog', '--config', config]);
    expect(code).toBe(0);
    expect(out).toContain('normal: 3 tools in 3 pages (sizes 1, 0, 2)');
    expect(out).toContain('UNVERSIONED_OBSERVATION, generation 1');
    expect(out).toContain(
      '    TOOL   EFFECT   MODEL NAME\n    alpha  unknown  normal__alpha\n    beta   unknown  normal__beta\n',
    );
    expect(out).toContain('solo: 2 tools in 1 page (sizes 2)');
  });

  it('reports a server that cannot start with SERVER_START_FAILED and its stderr', async () => {
    const config = await writeConfig('broken', {
      broken: {
        command: process.execPath,
        args: ['-e', 'console.error("boom: no such db"); process.exit(4)'],
      },
    });
    const { code, out } = await cli(['catalog', '--config', config, '--json']);
    expect(code).toBe(1);
    const report = JSON.parse(out) as { servers: { error: { code: string; message: string } }[] };
    expect(report.servers[0]?.error.code).toBe('SERVER_START_FAILED');
    expect(report.servers[0]?.error.message).toContain('boom: no such db');
  });

  it('reports what the runtime publishes: the tools filter applies, a failed required server does not hide the others, no journal is written', async () => {
    const path = join(dir, 'runtime-view.json');
    const journal = join(dir, 'runtime-view.db');
    await writeFile(
      path,
      JSON.stringify({
        journal: { path: journal },
        mcpServers: {
          filtered: { ...stdioServerParams({ scenario: 'normal' }), tools: { deny: ['beta'] } },
          looping: { ...stdioServerParams({ scenario: 'cycle' }), required: true },
        },
      }),
    );
    const { code, out } = await cli(['catalog', '--config', path, '--json']);
    expect(code).toBe(1);
    const [filtered, looping] = (JSON.parse(out) as { servers: Record<string, unknown>[] }).servers;
    expect(filtered).toMatchObject({ ok: true, tools: ['alpha', 'gamma'], generation: 1 });
    expect(looping).toMatchObject({ ok: false, error: { code: 'CURSOR_REPEATED' } });
    expect(existsSync(journal)).toBe(false);
  });

  it('rejects a config with an unknown key, naming its JSON path, with exit code 2', async () => {
    const config = await writeConfig('typo', { x: { command: 'node', argz: [] } });
    const { code, err } = await cli(['catalog', '--config', config]);
    expect(code).toBe(2);
    expect(err).toContain('INVALID_CONFIG');
    expect(err).toContain('$.mcpServers.x.argz');
  });

  it('prints usage and exits 2 without a configuration', async () => {
    const { code, err } = await cli(['catalog']);
    expect(code).toBe(2);
    expect(err).toContain('the configuration file is required: give CONFIG or --config FILE');
    expect(err).toContain('Usage: stepbind catalog CONFIG [--json]');
  });

  it('closes every server and exits 130 on Ctrl-C, leaving no child process', async () => {
    const auditPath = tempAuditPath('cli-sigint');
    const pidFile = join(dir, 'sigint-pids.jsonl');
    const config = await writeConfig('slow', {
      slow: { scenario: 'normal', pageDelayMs: 60_000, auditPath },
      // Started through sh, deaf to stdin's end and to SIGTERM, with a grandchild deaf to SIGTERM
      // holding stdout, and never answering tools/list: only SIGKILL to its group ends it.
      wrapped: {
        ...hostileServerParams({
          wrapper: 'sh',
          ignoreSigterm: true,
          ignoreStdinEnd: true,
          grandchild: { ignoreSigterm: true },
          replies: { 'tools/list': { kind: 'silent' } },
          pidFile,
        }),
      },
    });
    const child = spawn(process.execPath, [CLI, 'catalog', '--config', config], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    await auditEntry(auditPath, (e) => e.method === 'tools/list');
    const pids = async (): Promise<number | undefined> => {
      const { length } = await readHostilePids(pidFile);
      return length >= 2 ? length : undefined;
    };
    expect(await fileState(pidFile, pids, 'both hostile pids')).toBe(2);
    const serverPid = (await readAuditTrail(auditPath))[0]?.pid;
    expect(serverPid).toBeGreaterThan(0);
    const hostile = await readHostilePids(pidFile);
    const groups = [serverPid ?? 0, hostile[0]?.ppid ?? 0];
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    await waitUntilGone(serverPid ?? 0);
    expect(isProcessAlive(serverPid ?? 0)).toBe(false);
    const left = (await runningProcesses()).filter((p) => groups.includes(p.pgid));
    expect(left.map((p) => `${p.pid} ${p.args.slice(0, 50)}`)).toEqual([]);
    await rm(auditPath, { force: true });
  });

  it('exits by itself after its report when a server runs through sh -c with a grandchild holding stdout', async () => {
    const pidFile = join(dir, 'wrapped-pids.jsonl');
    const config = await writeConfig('wrapped', {
      wrapped: {
        ...hostileServerParams({ wrapper: 'sh', grandchild: { ignoreSigterm: false }, pidFile }),
      },
    });
    const child = spawn(process.execPath, [CLI, 'catalog', '--config', config], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    // If a pipe or process kept the CLI alive, this would wait until the test's timeout.
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    expect(out).toContain('wrapped: 1 tool in 1 page');
    const hostile = await readHostilePids(pidFile);
    expect(hostile.map((p) => p.role).sort()).toEqual(['grandchild', 'server']);
    const pgid = hostile[0]?.ppid ?? 0;
    expect((await runningProcesses()).filter((p) => p.pgid === pgid)).toEqual([]);
  });
});
