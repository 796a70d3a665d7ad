import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { isStepbindError, type StepbindError } from '@stepbind/binding';
import { McpRuntime, type ServerStatus } from '@stepbind/runtime';
import { isProcessAlive } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { eventLog } from './support/events.js';

const entry = fileURLToPath(
  new URL(
    '../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
    import.meta.url,
  ),
);

/** server-everything in streamableHttp mode on `port`, with its console lines. */
interface Everything {
  readonly pid: number;
  /** Resolves with the next stdout/stderr line `test` accepts. */
  line(test: (line: string) => boolean): Promise<string>;
  kill(): Promise<void>;
}

const children: ChildProcessWithoutNullStreams[] = [];
const runtimes: McpRuntime[] = [];

afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.close();
  const pids = children.map((c) => c.pid);
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child.once('close', resolve));
      child.kill('SIGKILL');
      await gone;
    }
  }
  expect(pids.filter((pid) => pid !== undefined && isProcessAlive(pid))).toEqual([]);
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function everything(port: number): Promise<Everything> {
  const child = spawn(process.execPath, [entry, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  const waiters = new Set<{ test: (line: string) => boolean; resolve: (line: string) => void }>();
  const onLine = (line: string): void => {
    for (const waiter of [...waiters]) {
      if (!waiter.test(line)) continue;
      waiters.delete(waiter);
      waiter.resolve(line);
    }
  };
  createInterface({ input: child.stdout }).on('line', onLine);
  createInterface({ input: child.stderr }).on('line', onLine);
  const line = (test: (line: string) => boolean): Promise<string> =>
    new Promise((resolve) => waiters.add({ test, resolve }));
  const listening = line((l) => l.includes(`listening on port ${port}`));
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}`))),
  );
  exited.catch(() => undefined);
  await Promise.race([listening, exited]);
  const pid = child.pid;
  if (pid === undefined) throw new Error('no pid');
  return {
    pid,
    line,
    kill: async () => {
      const gone = new Promise((resolve) => child.once('close', resolve));
      child.kill('SIGKILL');
      await gone;
    },
  };
}

function status(runtime: McpRuntime): ServerStatus {
  const s = runtime.status().servers[0];
  if (s === undefined) throw new Error('no server status');
  return s;
}

describe('server-everything over Streamable HTTP, killed and restarted on the same port', () => {
  it('reconnects on its own, keeps the revision of the unchanged catalog, and fails the call in flight with OUTCOME_UNKNOWN', async () => {
    const port = await freePort();
    const first = await everything(port);
    const log = eventLog();
    const runtime = await McpRuntime.open(
      { mcpServers: { everything: { url: `http://127.0.0.1:${port}/mcp` } } },
      {
        approval: 'none',
        onEvent: log.onEvent,
        reconnect: { initialDelayMs: 20, maxDelayMs: 200, maxAttempts: 100 },
      },
    );
    runtimes.push(runtime);
    await using before = await runtime.captureBinding();
    const tools = before.tools.map((t) => t.name);
    expect(tools).toContain('everything__echo');
    expect(status(runtime)).toMatchObject({ state: 'ready', revision: 1 });

    const posted = first.line((l) => l.includes('Received MCP POST request'));
    const inFlight: Promise<unknown> = before
      .prepareCall('everything__trigger-long-running-operation')
      .run({ duration: 60, steps: 60 })
      .catch((e: unknown) => e);
    await posted;
    const lost = log.next('session-lost');
    await first.kill();
    const error = (await inFlight) as StepbindError;
    expect(isStepbindError(error, 'OUTCOME_UNKNOWN')).toBe(true);
    expect(error.detail['delivery']).toBe('sent');
    await lost;
    expect(status(runtime).state).toMatch(/^(reconnecting|failed)$/);

    const reconnected = log.next('server-reconnected');
    const second = await everything(port);
    expect(await reconnected).toMatchObject({ server: 'everything', changed: false });
    expect(status(runtime)).toMatchObject({ state: 'ready', revision: 1 });

    // The step captured on the killed session is refused, not re-routed to the new server.
    const stale = await before
      .prepareCall('everything__echo')
      .run({ message: 'old step' })
      .catch((e: unknown) => e);
    expect(isStepbindError(stale, 'CONNECTION_CLOSED')).toBe(true);

    await using after = await runtime.captureBinding();
    expect(after.tools.map((t) => t.name)).toEqual(tools);
    const echo = await after.prepareCall('everything__echo').run({ message: 'hello again' });
    expect(JSON.stringify(echo.result.content)).toContain('hello again');
    expect(second.pid).not.toBe(first.pid);
  });

  it('recognises its 400 "No valid session ID provided" for a session it dropped, and hardRefresh reopens the session', async () => {
    const port = await freePort();
    const server = await everything(port);
    const initialized = server.line((l) => l.includes('Session initialized with ID: '));
    const log = eventLog();
    const runtime = await McpRuntime.open(
      { mcpServers: { everything: { url: `http://127.0.0.1:${port}/mcp` } } },
      { approval: 'none', onEvent: log.onEvent, reconnect: { maxAttempts: 0 } },
    );
    runtimes.push(runtime);
    const session = (await initialized).split('Session initialized with ID: ')[1] ?? '';
    // Someone else ends the session (an operator, an expiry): the server forgets it.
    const closed = server.line((l) => l.includes(`Transport closed for session ${session}`));
    const deleted = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: 'DELETE',
      headers: { 'mcp-session-id': session },
    });
    expect(deleted.ok).toBe(true);
    await closed;

    const lost = log.next('session-lost');
    expect(await runtime.hardRefresh('everything')).toBe(false);
    expect(await lost).toMatchObject({ reason: 'session-ended', httpStatus: 400 });
    expect(status(runtime)).toMatchObject({ state: 'ready', revision: 1 });
    await using step = await runtime.captureBinding();
    const sum = await step.prepareCall('everything__get-sum').run({ a: 2, b: 3 });
    expect(JSON.stringify(sum.result.content)).toContain('5');
  });
});
