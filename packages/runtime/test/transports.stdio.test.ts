import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStepbindError } from '@stepbind/binding';
import { parseConfig, type ServerConfig, type Connection } from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';
import {
  hostileServerParams,
  processGroupMembers,
  readHostilePids,
  runningProcesses,
  type HostileServerOptions,
} from '@stepbind/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { failure } from './support/errors.js';

// The stdio transport against raw JSON-RPC children (testkit's hostile servers): process groups,
// bounded framing, malformed responses, spawn errors. Every check of leftovers asks `ps`.

let dir: string;
let files = 0;
const open = new Set<Connection>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-transport-'));
});
afterEach(async () => {
  await Promise.all([...open].map((c) => c.close()));
  open.clear();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function config(name: string, entry: Record<string, unknown>): ServerConfig {
  const server = parseConfig({ mcpServers: { [name]: entry } }).servers.get(name);
  if (server === undefined) throw new Error('no server');
  return server;
}

function pidFile(): string {
  return join(dir, `pids-${++files}.jsonl`);
}

async function connect(
  name: string,
  options: HostileServerOptions,
  extra: Record<string, unknown> = {},
): Promise<Connection> {
  const connection = await connectServer(
    name,
    config(name, { ...hostileServerParams(options), ...extra }),
    { closeGraceMs: 200 },
  );
  open.add(connection);
  return connection;
}

/**
 * Running processes that are a hostile server or its grandchild, by group or by recorded pid. Any
 * found are killed after being listed, so that a failing test leaves nothing behind.
 */
async function leftovers(pgid: number | undefined, pids: readonly number[]): Promise<string[]> {
  const found = (await runningProcesses()).filter(
    (p) => (p.pgid === pgid || pids.includes(p.pid)) && /hostile/.test(p.args),
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

const page = (timeoutMs = 600_000) => ({
  cursor: undefined,
  timeoutMs,
  signal: new AbortController().signal,
});

describe('stdio process groups', () => {
  it('close() ends a sh -c wrapper, its server and a grandchild that ignores SIGTERM, escalating to SIGKILL for the whole group', async () => {
    const pids = pidFile();
    const connection = await connect('wrapped', {
      wrapper: 'sh',
      ignoreSigterm: true,
      ignoreStdinEnd: true,
      grandchild: { ignoreSigterm: true },
      pidFile: pids,
    });
    const pgid = connection.pid ?? 0;
    const recorded = await readHostilePids(pids);
    const members = await processGroupMembers(pgid);
    expect(members.map((m) => m.pid).sort()).toEqual([pgid, ...recorded.map((p) => p.pid)].sort());
    expect(recorded.find((p) => p.role === 'server')?.ppid).toBe(pgid);

    await connection.close();

    expect(
      await leftovers(
        pgid,
        recorded.map((p) => p.pid),
      ),
      'processes of the group left after close()',
    ).toEqual([]);
  });

  it('close() ends a grandchild that still holds stdout after the server itself exited', async () => {
    const pids = pidFile();
    const connection = await connect('npx-like', {
      grandchild: { ignoreSigterm: false },
      pidFile: pids,
    });
    const pgid = connection.pid ?? 0;
    expect(await processGroupMembers(pgid)).toHaveLength(2);
    await connection.close();
    const recorded = (await readHostilePids(pids)).map((p) => p.pid);
    expect(await leftovers(pgid, recorded)).toEqual([]);
  });

  it('a start that fails (initialize never answered) ends the whole group before it rejects', async () => {
    const pids = pidFile();
    const error = await failure(
      connectServer(
        'mute',
        config('mute', {
          ...hostileServerParams({
            wrapper: 'sh',
            ignoreSigterm: true,
            grandchild: { ignoreSigterm: true },
            replies: { initialize: { kind: 'silent' } },
            pidFile: pids,
          }),
        }),
        // Long enough for sh, the server and its grandchild to start and record their pids on a
        // loaded machine (at 1 s a slow start was killed before the grandchild existed).
        { timeoutMs: 5_000, closeGraceMs: 200 },
      ),
    );
    expect(error.code).toBe('TIMEOUT');
    const recorded = await readHostilePids(pids);
    expect(recorded.map((p) => p.role).sort()).toEqual(['grandchild', 'server']);
    const pgid = recorded.find((p) => p.role === 'server')?.ppid;
    expect(
      await leftovers(
        pgid,
        recorded.map((p) => p.pid),
      ),
    ).toEqual([]);
  });

  it('the session ends when the server exits, and the leftovers of its group are ended too', async () => {
    const pids = pidFile();
    const connection = await connect('crashy', {
      wrapper: 'sh',
      grandchild: { ignoreSigterm: true },
      pidFile: pids,
    });
    const closed = new Promise<void>((resolve) => connection.onClose(resolve));
    const server = (await readHostilePids(pids)).find((p) => p.role === 'server');
    process.kill(server?.pid ?? 0, 'SIGKILL');
    await closed;
    const error = await failure(connection.listPage(page()));
    expect(error.code).toBe('CONNECTION_CLOSED');
    await connection.close();
    const recorded = (await readHostilePids(pids)).map((p) => p.pid);
    expect(await leftovers(connection.pid, recorded)).toEqual([]);
  });
});

describe('stdio spawn errors name the config key at fault', () => {
  it('a missing cwd is named as cwd with its config path, not blamed on the command', async () => {
    const missing = join(dir, 'no-such-dir');
    const error = await failure(
      connectServer('files', config('files', { command: process.execPath, cwd: missing })),
    );
    expect(error.code).toBe('SERVER_START_FAILED');
    expect(error.detail).toMatchObject({
      server: 'files',
      cwd: missing,
      configPath: '$.mcpServers.files.cwd',
      reason: 'cwd',
    });
    expect(error.message).toContain(`working directory ${missing} does not exist`);
    expect(error.message).not.toMatch(/check the command/i);
  });

  it('a cwd that is a file is named as cwd', async () => {
    const file = join(dir, 'a-file');
    await writeFile(file, '');
    const error = await failure(
      connectServer('files', config('files', { command: process.execPath, cwd: file })),
    );
    expect(error.detail['configPath']).toBe('$.mcpServers.files.cwd');
    expect(error.message).toContain('is not a directory');
  });

  it('a missing command is named as command', async () => {
    const error = await failure(
      connectServer('ghost', config('ghost', { command: 'stepbind-no-such-command', cwd: dir })),
    );
    expect(error.code).toBe('SERVER_START_FAILED');
    expect(error.detail).toMatchObject({
      configPath: '$.mcpServers.ghost.command',
      command: 'stepbind-no-such-command',
      reason: 'command',
    });
    expect(error.message).toContain('"stepbind-no-such-command" was not found');
  });
});

describe('stdio message limits', () => {
  it('a tools/list line over maxMessageBytes fails with MESSAGE_TOO_LARGE naming the limit and config key, and closes the connection and its group', async () => {
    const connection = await connect(
      'big-list',
      { replies: { 'tools/list': { kind: 'oversized', bytes: 200_000 } } },
      { maxMessageBytes: 65_536 },
    );
    const closed = new Promise<void>((resolve) => connection.onClose(resolve));
    const error = await failure(connection.listPage(page()));
    expect(error.code).toBe('MESSAGE_TOO_LARGE');
    expect(error.detail).toEqual({
      server: 'big-list',
      method: 'tools/list',
      limit: 65_536,
      configKey: '$.mcpServers["big-list"].maxMessageBytes',
    });
    expect(error.message).toContain('65536-byte limit');
    expect(error.message).toContain('$.mcpServers["big-list"].maxMessageBytes');
    await closed;
    // The fault is remembered: a later request reports it too, not CONNECTION_CLOSED.
    const later = await failure(connection.callTool('echo', {}, { timeoutMs: 600_000 }));
    expect(later.code).toBe('MESSAGE_TOO_LARGE');
    expect(later.detail).toMatchObject({ tool: 'echo', method: 'tools/call' });
    expect(connection.fault?.code).toBe('MESSAGE_TOO_LARGE');
    await connection.close();
    expect(await leftovers(connection.pid, [])).toEqual([]);
  });

  it('messages under the limit pass, also when they arrive in many chunks', async () => {
    const connection = await connect(
      'roomy',
      { replies: { 'tools/list': { kind: 'oversized', bytes: 200_000 } } },
      { maxMessageBytes: 300_000 },
    );
    const result = (await connection.listPage(page())) as { tools: { name: string }[] };
    expect(result.tools.map((t) => t.name)).toEqual(['echo']);
  });

  it('a tools/call over the default limit (10 MiB, the SDK buffer size) fails with MESSAGE_TOO_LARGE', async () => {
    const connection = await connect('huge', {
      replies: { 'tools/call': { kind: 'oversized', bytes: 11 * 1024 * 1024 } },
    });
    const error = await failure(connection.callTool('echo', {}, { timeoutMs: 600_000 }));
    expect(error.code).toBe('MESSAGE_TOO_LARGE');
    expect(error.detail).toMatchObject({ limit: 10 * 1024 * 1024, tool: 'echo' });
  });

  it('an oversized initialize response fails the start with MESSAGE_TOO_LARGE', async () => {
    const error = await failure(
      connectServer(
        'loud',
        config('loud', {
          ...hostileServerParams({ replies: { initialize: { kind: 'oversized', bytes: 5_000 } } }),
          maxMessageBytes: 2_048,
        }),
        { closeGraceMs: 200 },
      ),
    );
    expect(error.code).toBe('MESSAGE_TOO_LARGE');
    expect(error.detail).toMatchObject({ method: 'initialize', limit: 2_048 });
  });
});

describe('stdio malformed responses fail their request at once', () => {
  it.each([
    ['both-result-and-error', 'carries both "result" and "error"'],
    ['neither-result-nor-error', 'carries neither "result" nor "error"'],
  ] as const)(
    '%s for a tools/call gives MALFORMED_MESSAGE, and the session goes on',
    async (kind, reason) => {
      const connection = await connect(kind, { replies: { 'tools/call': { kind } } });
      // A timeout this long would fail the test by vitest's timeout: the rejection must come at once.
      const error = await failure(connection.callTool('echo', {}, { timeoutMs: 600_000 }));
      expect(error.code).toBe('MALFORMED_MESSAGE');
      expect(error.detail).toEqual({ server: kind, method: 'tools/call', tool: 'echo', reason });
      expect(error.message).toContain(
        `tools/call on server "${kind}" (tool "echo") failed at once`,
      );
      const list = (await connection.listPage(page())) as { tools: unknown[] };
      expect(list.tools).toHaveLength(1);
    },
  );

  it('a response with an invalid id fails the requests in flight with MALFORMED_MESSAGE', async () => {
    const connection = await connect('ids', {
      replies: { 'tools/list': { kind: 'invalid-id', id: null } },
    });
    const error = await failure(connection.listPage(page()));
    expect(error.code).toBe('MALFORMED_MESSAGE');
    expect(error.detail['reason']).toMatch(/invalid id null.*cannot be matched/);
  });

  it('a line that is not JSON is reported as MALFORMED_MESSAGE naming the server', async () => {
    const connection = await connect('chatty', { replies: { 'tools/call': { kind: 'not-json' } } });
    const reported = new Promise<Error>((resolve) => connection.onError(resolve));
    const call = connection.callTool('echo', {}, { timeoutMs: 600_000 });
    const error = await reported;
    expect(isStepbindError(error, 'MALFORMED_MESSAGE')).toBe(true);
    expect(error.message).toContain('server "chatty"');
    expect(error.message).toContain('is not JSON');
    await connection.close();
    // The call was written and never answered: closing makes its outcome unknown.
    const closed = await failure(call);
    expect(closed.code).toBe('OUTCOME_UNKNOWN');
    expect(closed.detail['delivery']).toBe('sent');
  });
});
