import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpRuntime, parseConfig } from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';
import { discoverCatalogs } from '../../runtime/src/cli/catalog.js';
import {
  hostileServerParams,
  readHostilePids,
  runningProcesses,
  startHostileHttpServer,
  type HostileHttpServer,
  type HostileServerOptions,
} from '@stepbind/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { failure } from './support/errors.js';

// Issue 8, "Safe at the boundary": one scenario per item, each through real child processes that
// misbehave in ways the SDK's own server would prevent (testkit's raw JSON-RPC hostile servers),
// each ending with a `ps` check that nothing of theirs is left running.

const HOST = fileURLToPath(new URL('./fixtures/hosts/open-close.mjs', import.meta.url));
let dir: string;
let files = 0;
const cleanups: (() => Promise<void>)[] = [];
const pidFiles: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-hostile-'));
});
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
  // Whatever the test did, every process group it started must be gone.
  const left = (await Promise.all(pidFiles.splice(0).map((f) => groupLeftovers(f)))).flat();
  expect(left, 'hostile processes left running after the test').toEqual([]);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function pidFile(): string {
  const path = join(dir, `pids-${++files}.jsonl`);
  pidFiles.push(path);
  return path;
}

/**
 * Running processes in the process groups of the servers recorded in `path`, or with a recorded
 * pid and a hostile command line. They are killed once listed, so a failing test leaves nothing.
 */
async function groupLeftovers(path: string): Promise<string[]> {
  const recorded = await readHostilePids(path);
  const pgids = new Set(recorded.flatMap((p) => (p.pgid === undefined ? [] : [p.pgid])));
  const pids = new Set(recorded.map((p) => p.pid));
  const found = (await runningProcesses()).filter(
    (p) => pgids.has(p.pgid) || (pids.has(p.pid) && /hostile/.test(p.args)),
  );
  for (const p of found) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  return found.map((p) => `${p.pid} ${p.stat} ${p.args.slice(0, 60)}`);
}

/**
 * A stdio server entry: hostile options (recording its pids) plus config keys. These scenarios are
 * about the transport, not approvals: their tools run without one.
 */
function stdio(options: HostileServerOptions, extra: Record<string, unknown> = {}) {
  return {
    ...hostileServerParams({ pidFile: pidFile(), ...options }),
    approval: 'none',
    ...extra,
  };
}

async function http(
  options: Parameters<typeof startHostileHttpServer>[0],
): Promise<HostileHttpServer> {
  const server = await startHostileHttpServer(options);
  cleanups.push(() => server.close());
  return server;
}

describe('1. process trees: nothing outlives close(), and the host can exit', () => {
  it('a host process exits on its own after closing a runtime whose sh-wrapped server has a grandchild that holds stdout and ignores SIGTERM', async () => {
    const pids = pidFile();
    const config = {
      mcpServers: {
        wrapped: stdio({
          wrapper: 'sh',
          ignoreSigterm: true,
          ignoreStdinEnd: true,
          grandchild: { ignoreSigterm: true },
          pidFile: pids,
        }),
      },
    };
    const host = spawn(process.execPath, [HOST, JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    host.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    // If stepbind left a pipe, handle, timer or process behind, this waits for the test timeout.
    const code = await new Promise<number | null>((resolve) => host.on('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    const { pids: reported } = JSON.parse(out) as { pids: number[] };
    const recorded = await readHostilePids(pids);
    const server = recorded.find((p) => p.role === 'server');
    expect(reported).toEqual([server?.ppid]);
    expect(server?.pgid).toBe(server?.ppid);
    expect(await groupLeftovers(pids)).toEqual([]);
  });

  it('McpRuntime.close() ends every process group, including one whose server already left a grandchild behind', async () => {
    const a = pidFile();
    const b = pidFile();
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          stubborn: stdio({
            wrapper: 'sh',
            ignoreSigterm: true,
            ignoreStdinEnd: true,
            grandchild: { ignoreSigterm: true },
            pidFile: a,
          }),
          npxlike: stdio({ grandchild: { ignoreSigterm: false }, pidFile: b }),
        },
      },
      {
        connect: (name, cfg, o) =>
          connectServer(name, cfg, { signal: o.signal, closeGraceMs: 200 }),
      },
    );
    expect(runtime.pids()).toHaveLength(2);
    const groups = new Set(
      [...(await readHostilePids(a)), ...(await readHostilePids(b))].map((p) => p.pgid),
    );
    const members = (await runningProcesses()).filter((p) => groups.has(p.pgid));
    expect(members).toHaveLength(5);
    await runtime.close();
    expect([...(await groupLeftovers(a)), ...(await groupLeftovers(b))]).toEqual([]);
  });
});

describe('7. oversized messages: MESSAGE_TOO_LARGE names the limit and the config key', () => {
  it('a tools/list over the SDK-sized default limit (10 MiB) fails discovery with MESSAGE_TOO_LARGE, not CONNECTION_CLOSED', async () => {
    const [report] = await discoverCatalogs(
      parseConfig({
        mcpServers: {
          big: stdio({ replies: { 'tools/list': { kind: 'oversized', bytes: 11 * 1024 * 1024 } } }),
        },
      }),
    );
    expect(report?.ok).toBe(false);
    const error = report?.ok === false ? report.error : undefined;
    expect(error?.code).toBe('MESSAGE_TOO_LARGE');
    expect(error?.detail).toMatchObject({
      server: 'big',
      method: 'tools/list',
      limit: 10_485_760,
      configKey: '$.mcpServers.big.maxMessageBytes',
    });
  });

  it('a prepared tools/call whose result is over maxMessageBytes fails with MESSAGE_TOO_LARGE, and so does the next call on that closed connection', async () => {
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          big: stdio(
            { replies: { 'tools/call': { kind: 'oversized', bytes: 100_000 } } },
            { maxMessageBytes: 32_768 },
          ),
        },
      },
      {
        connect: (name, cfg, o) =>
          connectServer(name, cfg, { signal: o.signal, closeGraceMs: 200 }),
      },
    );
    cleanups.push(() => runtime.close());
    const binding = await runtime.captureBinding();
    const error = await failure(binding.prepareCall('big__echo').run({}, { timeoutMs: 600_000 }));
    expect(error.code).toBe('MESSAGE_TOO_LARGE');
    expect(error.detail).toMatchObject({ server: 'big', tool: 'echo', limit: 32_768 });
    const again = await failure(binding.prepareCall('big__echo').run({}));
    expect(again.code).toBe('MESSAGE_TOO_LARGE');
    binding.release();
  });

  it.each(['json', 'sse'] as const)(
    'over HTTP (%s), a response body over maxMessageBytes fails its request with MESSAGE_TOO_LARGE and the session goes on',
    async (mode) => {
      const server = await http({
        http: mode,
        replies: { 'tools/call': { kind: 'oversized', bytes: 100_000 } },
      });
      const config = parseConfig({
        mcpServers: { web: { url: server.url, maxMessageBytes: 32_768 } },
      }).servers.get('web');
      if (config === undefined) throw new Error('no config');
      const connection = await connectServer('web', config);
      cleanups.push(() => connection.close());
      const error = await failure(connection.callTool('echo', {}, { timeoutMs: 600_000 }));
      expect(error.code).toBe('MESSAGE_TOO_LARGE');
      expect(error.detail).toMatchObject({
        server: 'web',
        tool: 'echo',
        limit: 32_768,
        configKey: '$.mcpServers.web.maxMessageBytes',
      });
      const list = (await connection.listPage({
        cursor: undefined,
        timeoutMs: 600_000,
        signal: new AbortController().signal,
      })) as { tools: unknown[] };
      expect(list.tools).toHaveLength(1);
    },
  );
});

describe('7. malformed responses fail the request they answer at once', () => {
  it('a tools/list answered with both result and error fails discovery at once with MALFORMED_MESSAGE', async () => {
    const [report] = await discoverCatalogs(
      parseConfig({
        mcpServers: {
          // A request timeout this long would fail the test by vitest's timeout if it waited.
          both: stdio(
            { replies: { 'tools/list': { kind: 'both-result-and-error' } } },
            { requestTimeoutMs: 600_000 },
          ),
        },
      }),
    );
    const error = report?.ok === false ? report.error : undefined;
    expect(error?.code).toBe('MALFORMED_MESSAGE');
    expect(error?.detail).toMatchObject({
      server: 'both',
      method: 'tools/list',
      reason: 'carries both "result" and "error"',
    });
  });

  it.each([
    ['json', 'both-result-and-error', 'carries both "result" and "error"'],
    ['sse', 'both-result-and-error', 'carries both "result" and "error"'],
    ['sse', 'neither-result-nor-error', 'carries neither "result" nor "error"'],
  ] as const)(
    'over HTTP (%s), %s for a tools/call fails it at once with MALFORMED_MESSAGE',
    async (mode, kind, reason) => {
      const server = await http({ http: mode, replies: { 'tools/call': { kind } } });
      const config = parseConfig({ mcpServers: { web: { url: server.url } } }).servers.get('web');
      if (config === undefined) throw new Error('no config');
      const connection = await connectServer('web', config);
      cleanups.push(() => connection.close());
      const error = await failure(connection.callTool('echo', {}, { timeoutMs: 600_000 }));
      expect(error.code).toBe('MALFORMED_MESSAGE');
      expect(error.detail).toEqual({ server: 'web', method: 'tools/call', tool: 'echo', reason });
    },
  );
});

describe('10. a missing cwd is named in its error', () => {
  it('McpRuntime.open reports the missing cwd with its config path, not "spawn node ENOENT ... check the command"', async () => {
    const missing = join(dir, 'gone');
    const error = await failure(
      McpRuntime.open({
        mcpServers: { files: { command: process.execPath, args: ['-e', ''], cwd: missing } },
      }),
    );
    expect(error.code).toBe('REQUIRED_SERVERS_FAILED');
    expect(error.message).toContain('files: SERVER_START_FAILED');
    expect(error.message).toContain(`working directory ${missing} does not exist`);
    expect(error.message).toContain('$.mcpServers.files.cwd');
    expect(error.message).not.toMatch(/ENOENT|check the command/i);
  });
});
