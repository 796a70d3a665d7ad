import { McpRuntime, type McpRuntimeOptions, type ServerStatus } from '@stepbind/runtime';
import {
  isProcessAlive,
  spawnHttpServer,
  type HttpServerOptions,
  type HttpServerProcess,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { eventLog, type EventLog } from './support/events.js';
import { failure } from './support/errors.js';

const servers: HttpServerProcess[] = [];
const runtimes: McpRuntime[] = [];

afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.close();
  const pids = servers.map((s) => s.pid);
  for (const server of servers.splice(0)) await server.close();
  expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
});

async function serve(
  options: ScriptedServerOptions,
  http: HttpServerOptions = {},
): Promise<HttpServerProcess> {
  const server = await spawnHttpServer(options, http);
  servers.push(server);
  return server;
}

/** Fast, bounded backoff so a restart is picked up within a few attempts. */
const QUICK: McpRuntimeOptions['reconnect'] = {
  initialDelayMs: 20,
  maxDelayMs: 200,
  maxAttempts: 100,
};

async function open(
  url: string,
  options: McpRuntimeOptions = {},
): Promise<{ runtime: McpRuntime; log: EventLog }> {
  const log = eventLog();
  const runtime = await McpRuntime.open(
    { mcpServers: { web: { url } } },
    // Session loss is the subject here, not approvals: these tools run without one.
    { approval: 'none', reconnect: QUICK, ...options, onEvent: log.onEvent },
  );
  runtimes.push(runtime);
  return { runtime, log };
}

function web(runtime: McpRuntime): ServerStatus {
  const status = runtime.status().servers.find((s) => s.name === 'web');
  if (status === undefined) throw new Error('no status for web');
  return status;
}

const calls = (server: HttpServerProcess): string[] =>
  server.events.flatMap((e) =>
    e.event === 'message' && e.method === 'tools/call' ? [e.tool ?? ''] : [],
  );

describe('a Streamable HTTP server that is killed and restarted on the same port', () => {
  it('is reported as reconnecting at once, then ready on a new session with the same revision when the catalog is unchanged', async () => {
    const first = await serve({ scenario: 'single' });
    const { runtime, log } = await open(first.url);
    await using before = await runtime.captureBinding();
    await before.prepareCall('web__alpha').run({});
    expect(web(runtime)).toMatchObject({ state: 'ready', generation: 1, revision: 1 });

    const lost = log.next('session-lost');
    await first.kill();
    expect(await lost).toMatchObject({ server: 'web' });
    const down = web(runtime);
    expect(down.state).toBe('reconnecting');
    expect(down.error).toMatchObject({ code: 'CONNECTION_CLOSED' });
    expect(down.error?.message).toMatch(/HTTP session ended/);
    expect(runtime.status().liveConnections).toBe(0);

    const reconnected = log.next('server-reconnected');
    const second = await serve({ scenario: 'single' }, { port: first.port });
    expect(await reconnected).toMatchObject({ server: 'web', changed: false, revision: 1 });
    expect(web(runtime)).toMatchObject({ state: 'ready', generation: 1, revision: 1 });
    expect(web(runtime).error).toBeUndefined();
    expect(log.events.some((e) => e.type === 'catalog-swapped')).toBe(false);
    // Reconnected in the background: nothing is left for the next capture to rebuild.
    expect(runtime.dirty).toBe(false);
    const rebuilds = runtime.rebuilds;

    // The step captured on the lost session is refused and never re-routed to the new one.
    const stale = await failure(before.prepareCall('web__beta').run({}));
    expect(stale.code).toBe('CONNECTION_CLOSED');
    expect(calls(second)).toEqual([]);

    await using after = await runtime.captureBinding();
    const { receipt } = await after.prepareCall('web__beta').run({});
    expect(receipt).toMatchObject({ server: 'web', revision: 1, outcome: 'ok' });
    expect(runtime.rebuilds).toBe(rebuilds);
    expect(calls(second)).toEqual(['beta']);
    expect(runtime.status()).toMatchObject({ liveConnections: 1, dirty: false });
  });

  it('moves the revision when the restarted server serves another catalog, so an earlier step is stale', async () => {
    const serverInfo = { name: 'web', version: '1.0.0' };
    const first = await serve({ scenario: 'single', serverInfo });
    const { runtime, log } = await open(first.url);
    await using before = await runtime.captureBinding();
    expect(before.tools.map((t) => t.name)).toEqual(['web__alpha', 'web__beta']);

    const lost = log.next('session-lost');
    await first.kill();
    await lost;
    const swapped = log.next('catalog-swapped');
    const reconnected = log.next('server-reconnected');
    const second = await serve({ scenario: 'normal', serverInfo }, { port: first.port });
    expect(await swapped).toMatchObject({ server: 'web', cause: 'reconnect', revision: 2 });
    expect(await reconnected).toMatchObject({ changed: true, revision: 2, generation: 2 });
    expect(web(runtime)).toMatchObject({ state: 'ready', revision: 2, generation: 2, tools: 3 });

    const stale = await failure(before.prepareCall('web__alpha').run({}));
    expect(stale.code).toBe('STALE_CATALOG');
    expect(calls(second)).toEqual([]);

    await using after = await runtime.captureBinding();
    expect(after.tools.map((t) => t.name)).toEqual(['web__alpha', 'web__beta', 'web__gamma']);
    await after.prepareCall('web__gamma').run({});
    expect(calls(second)).toEqual(['gamma']);
  });

  it('refuses a restarted server with another identity until acceptIdentityChange', async () => {
    const first = await serve({ scenario: 'single', serverInfo: { name: 'web', version: '1' } });
    const { runtime, log } = await open(first.url);
    const lost = log.next('session-lost');
    await first.kill();
    await lost;
    const conflict = log.next('reconnect-failed', (e) => e.error.code === 'PUBLISH_CONFLICT');
    await serve(
      { scenario: 'single', serverInfo: { name: 'web', version: '2' } },
      { port: first.port },
    );
    const refused = await conflict;
    expect(refused.error.message).toMatch(/acceptIdentityChange\("web"\)/);
    // Retrying cannot help until the caller decides: the background stops at once.
    expect(refused.nextDelayMs).toBeUndefined();
    expect(web(runtime).state).toBe('failed');

    runtime.acceptIdentityChange('web');
    await using step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toEqual(['web__alpha', 'web__beta']);
    expect(web(runtime).state).toBe('ready');
  });

  it('fails a call in flight with OUTCOME_UNKNOWN as soon as the server dies, and never sends it again', async () => {
    const first = await serve({ scenario: 'single', callDelayMs: 120_000 });
    const { runtime, log } = await open(first.url);
    await using step = await runtime.captureBinding();
    const inFlight = failure(step.prepareCall('web__alpha').run({}));
    await first.waitFor((e) => e.event === 'message' && e.method === 'tools/call');

    const lost = log.next('session-lost');
    await first.kill();
    const error = await inFlight;
    expect(error.code).toBe('OUTCOME_UNKNOWN');
    expect(error.detail).toMatchObject({ server: 'web', tool: 'alpha', delivery: 'sent' });
    expect(error.message).toMatch(/may or may not have run/);
    await lost;

    const reconnected = log.next('server-reconnected');
    const second = await serve({ scenario: 'single' }, { port: first.port });
    await reconnected;
    await using next = await runtime.captureBinding();
    expect(next.tools.map((t) => t.name)).toEqual(['web__alpha', 'web__beta']);
    expect(calls(second)).toEqual([]);
  });

  it('keeps retrying with bounded backoff while the server is down and reports every failed attempt', async () => {
    const first = await serve({ scenario: 'single' });
    const { runtime, log } = await open(first.url, {
      reconnect: { initialDelayMs: 5, maxDelayMs: 40, maxAttempts: 100 },
    });
    const lost = log.next('session-lost');
    await first.kill();
    await lost;
    const failures = await log.first('reconnect-failed', 5);
    expect(failures.map((f) => f.nextDelayMs)).toEqual([5, 10, 20, 40, 40]);
    expect(failures.every((f) => f.error.code === 'SERVER_START_FAILED')).toBe(true);
    const down = web(runtime);
    expect(down.state).toBe('reconnecting');
    expect(down.reconnectAttempts).toBeGreaterThanOrEqual(5);
    expect(down.error?.message).toMatch(/Last reconnect attempt: SERVER_START_FAILED/);
    // A capture meanwhile fails with a typed error and publishes nothing.
    const refused = await failure(runtime.captureBinding());
    expect(refused.code).toBe('REQUIRED_SERVERS_FAILED');

    const reconnected = log.next('server-reconnected');
    await serve({ scenario: 'single' }, { port: first.port });
    await reconnected;
    expect(web(runtime)).toMatchObject({ state: 'ready', revision: 1 });
  });

  it('stops after maxAttempts and says so; the next capture reconnects', async () => {
    const first = await serve({ scenario: 'single' });
    const { runtime, log } = await open(first.url, {
      reconnect: { initialDelayMs: 1, maxDelayMs: 1, maxAttempts: 2 },
    });
    const lost = log.next('session-lost');
    await first.kill();
    await lost;
    const [last] = await log.first('reconnect-failed', 1, (e) => e.nextDelayMs === undefined);
    expect(last?.attempt).toBe(2);
    expect(web(runtime)).toMatchObject({ state: 'failed', reconnectAttempts: 2 });
    expect(web(runtime).error?.message).toMatch(/Gave up after 2 attempts/);
    expect(runtime.dirty).toBe(true);

    await serve({ scenario: 'single' }, { port: first.port });
    await using step = await runtime.captureBinding();
    expect(step.tools.map((t) => t.name)).toEqual(['web__alpha', 'web__beta']);
    expect(web(runtime)).toMatchObject({ state: 'ready', revision: 1 });
  });

  it('leaves an optional server out of new steps, saying why, while it reconnects', async () => {
    const main = await serve({ scenario: 'single' });
    const extra = await serve({ scenario: 'normal' });
    const log = eventLog();
    const runtime = await McpRuntime.open(
      { mcpServers: { main: { url: main.url }, extra: { url: extra.url, required: false } } },
      { approval: 'none', onEvent: log.onEvent, optionalGraceMs: 20_000, reconnect: QUICK },
    );
    runtimes.push(runtime);
    await using before = await runtime.captureBinding();
    expect(before.servers.map((s) => [s.name, s.bound])).toEqual([
      ['main', true],
      ['extra', true],
    ]);
    const lost = log.next('session-lost', (e) => e.server === 'extra');
    await extra.kill();
    await lost;

    await using during = await runtime.captureBinding();
    expect(during.servers.find((s) => s.name === 'extra')).toMatchObject({
      bound: false,
      reason: 'closed',
    });
    expect(during.tools.map((t) => t.name)).toEqual(['main__alpha', 'main__beta']);
    await during.prepareCall('main__alpha').run({});
    const state = runtime.status().servers.find((s) => s.name === 'extra')?.state;
    expect(state).toBe('reconnecting');

    const reconnected = log.next('server-reconnected', (e) => e.server === 'extra');
    await serve({ scenario: 'normal' }, { port: extra.port });
    await reconnected;
    await using after = await runtime.captureBinding();
    expect(after.servers.every((s) => s.bound)).toBe(true);
    expect(after.tools.map((t) => t.name)).toContain('extra__gamma');
  });

  it('leaves no process, session or timer behind when closed while reconnecting', async () => {
    const timers = (): number =>
      process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const first = await serve({ scenario: 'single' });
    const before = timers();
    const { runtime, log } = await open(first.url, {
      reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 5 },
    });
    const lost = log.next('session-lost');
    await first.kill();
    await lost;
    // The next attempt is a minute away: its timer is pending now and must go with close().
    const [failed] = await log.first('reconnect-failed', 1);
    expect(failed?.nextDelayMs).toBe(60_000);
    expect(timers()).toBeGreaterThan(before);
    await runtime.close();
    expect(runtime.status()).toMatchObject({ closed: true, liveConnections: 0 });
    expect(timers()).toBeLessThanOrEqual(before);
  });
});

describe('a Streamable HTTP server that forgets the session while it keeps running', () => {
  it('answers 404: the call is refused as not sent, and the next step runs on a new session', async () => {
    const server = await serve({ scenario: 'single' });
    const { runtime, log } = await open(server.url);
    await using before = await runtime.captureBinding();
    expect(await server.forgetSessions()).toBe(1);

    const lost = log.next('session-lost');
    const reconnected = log.next('server-reconnected');
    const refused = await failure(before.prepareCall('web__alpha').run({}));
    expect(refused.code).toBe('CONNECTION_CLOSED');
    expect(refused.detail).toMatchObject({
      delivery: 'not-sent',
      reason: 'session-ended',
      httpStatus: 404,
    });
    expect(await lost).toMatchObject({ reason: 'session-ended', httpStatus: 404 });
    await reconnected;
    expect(server.events.some((e) => e.event === 'unknown-session')).toBe(true);
    // The refused request never reached a scripted server.
    expect(calls(server)).toEqual([]);

    await using after = await runtime.captureBinding();
    await after.prepareCall('web__alpha').run({});
    expect(calls(server)).toEqual(['alpha']);
    expect(web(runtime)).toMatchObject({ state: 'ready', revision: 1, generation: 1 });
  });

  it('does not mistake a 404 for an unsupported GET stream for a lost session', async () => {
    const server = await serve({ scenario: 'single' }, { getNotFound: true });
    const { runtime, log } = await open(server.url);
    // The GET's 404 makes the runtime ask with a ping, which the live session answers.
    await server.waitFor((e) => e.event === 'message' && e.method === 'ping');
    await using step = await runtime.captureBinding();
    await step.prepareCall('web__alpha').run({});
    expect(calls(server)).toEqual(['alpha']);
    expect(log.events.some((e) => e.type === 'session-lost')).toBe(false);
    expect(web(runtime)).toMatchObject({ state: 'ready', revision: 1 });
  });

  it('answers 400 "No valid session ID provided": hardRefresh reopens the session instead of failing', async () => {
    const server = await serve({ scenario: 'single' }, { unknownSession: 400 });
    const { runtime, log } = await open(server.url, { reconnect: { maxAttempts: 0 } });
    await server.forgetSessions();
    const lost = log.next('session-lost');
    expect(await runtime.hardRefresh('web')).toBe(false);
    expect(await lost).toMatchObject({ reason: 'session-ended', httpStatus: 400 });
    expect(web(runtime)).toMatchObject({ state: 'ready', revision: 1 });
    await using step = await runtime.captureBinding();
    await step.prepareCall('web__beta').run({});
    expect(calls(server)).toEqual(['beta']);
  });

  it('answers 400: a dirty refresh reopens the session (no REQUIRED_SERVERS_FAILED)', async () => {
    const server = await serve({ scenario: 'single' }, { unknownSession: 400 });
    const { runtime } = await open(server.url, { reconnect: { maxAttempts: 0 } });
    await server.forgetSessions();
    runtime.markDirty('test');
    expect(await runtime.refreshIfDirty()).toBe(true);
    expect(web(runtime)).toMatchObject({ state: 'ready', revision: 1 });
    await using step = await runtime.captureBinding();
    await step.prepareCall('web__alpha').run({});
    expect(calls(server)).toEqual(['alpha']);
  });

  it('says "failed" rather than "reconnecting" when background reconnects are off', async () => {
    const server = await serve({ scenario: 'single' });
    const { runtime, log } = await open(server.url, { reconnect: { maxAttempts: 0 } });
    await using step = await runtime.captureBinding();
    await server.forgetSessions();
    const lost = log.next('session-lost');
    await failure(step.prepareCall('web__alpha').run({}));
    await lost;
    expect(web(runtime)).toMatchObject({ state: 'failed', reconnectAttempts: 0 });
    expect(web(runtime).error?.message).toMatch(/404/);
    await using next = await runtime.captureBinding();
    expect(next.servers.every((s) => s.bound)).toBe(true);
    expect(web(runtime).state).toBe('ready');
  });
});
