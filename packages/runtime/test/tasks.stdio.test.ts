/**
 * Tasks (MCP 2025-11-25 task-augmented tools/call, DESIGN §20.2) against the testkit's task server
 * in a real child process, through the real SDK client: created, polled at the server's interval,
 * result fetched, failures typed, abort → tasks/cancel, the journal's task id and resume.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpRuntime, type McpRuntimeOptions } from '@stepbind/runtime';
import {
  readTaskEvents,
  spawnTaskHttpServer,
  taskServerParams,
  tempDir,
  untilTaskEvent,
  type TaskServerEvent,
  type TaskServerOptions,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { failure } from './support/errors.js';
import { trackRuntimes } from './support/runtimes.js';
import { within } from './support/wait.js';

const { runtimes } = trackRuntimes();

async function openTasks(
  events: string,
  server: TaskServerOptions = {},
  options: McpRuntimeOptions = {},
): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    { mcpServers: { t: taskServerParams({ events, ...server }) } },
    { approval: 'none', ...options },
  );
  runtimes.push(runtime);
  return runtime;
}

const ofKind = <K extends TaskServerEvent['event']>(
  events: readonly TaskServerEvent[],
  kind: K,
): Extract<TaskServerEvent, { event: K }>[] =>
  events.filter((e): e is Extract<TaskServerEvent, { event: K }> => e.event === kind);

describe('task-augmented tools/call (2025-11-25), real stdio server', () => {
  it('runs a task-required tool as a task: one create, tasks/get until completed, tasks/result, and the receipt names the task', async () => {
    using dir = tempDir('tasks');
    const events = dir.file('events.jsonl');
    const runtime = await openTasks(events);
    await using step = await runtime.captureBinding();

    const outcome = await step.prepareCall('t__slow_job').run({ key: 'a', polls: 3 });

    expect(outcome.result.content).toEqual([{ type: 'text', text: 'done:a' }]);
    const seen = readTaskEvents(events);
    const created = ofKind(seen, 'create');
    expect(ofKind(seen, 'call')).toEqual([
      { event: 'call', tool: 'slow_job', key: 'a', task: true },
    ]);
    expect(created).toHaveLength(1);
    expect(ofKind(seen, 'get').map((e) => e.taskId)).toEqual(Array(3).fill(created[0]?.taskId));
    expect(ofKind(seen, 'result')).toHaveLength(1);
    expect(outcome.receipt.taskId).toBe(created[0]?.taskId);
  });

  it('waits the poll interval the server suggests between polls, and at least 50 ms when it suggests less', async () => {
    using dir = tempDir('tasks');
    for (const [pollIntervalMs, floor] of [
      [120, 120],
      [5, 50],
    ] as const) {
      const events = dir.file(`events-${pollIntervalMs}.jsonl`);
      const runtime = await openTasks(events, { pollIntervalMs });
      await using step = await runtime.captureBinding();

      await step.prepareCall('t__slow_job').run({ key: 'p', polls: 4 });

      // Server-side receive times: each poll is sent only after the previous answer plus the wait,
      // so every gap is at least the wait, however slow the machine (a lower bound, not a timing).
      const gets = ofKind(readTaskEvents(events), 'get').map((e) => e.at);
      expect(gets).toHaveLength(4);
      const gaps = gets.slice(1).map((at, i) => at - (gets[i] ?? 0));
      for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(floor);
    }
  });

  it('runs an optional tool as a task only when run with { task: true }', async () => {
    using dir = tempDir('tasks');
    const events = dir.file('events.jsonl');
    const runtime = await openTasks(events);
    await using step = await runtime.captureBinding();

    const plain = await step.prepareCall('t__maybe_job').run({ key: 'plain' });
    const asTask = await step
      .prepareCall('t__maybe_job')
      .run({ key: 'task', polls: 1 }, { task: { ttlMs: 30_000 } });

    expect(ofKind(readTaskEvents(events), 'call').map((e) => [e.key, e.task])).toEqual([
      ['plain', false],
      ['task', true],
    ]);
    expect(plain.receipt.taskId).toBeUndefined();
    expect(asTask.receipt.taskId).toEqual(expect.any(String));
  });

  it('refuses a task-required tool on a server without the tasks capability, not sent, and runs an optional one as a plain call', async () => {
    using dir = tempDir('tasks');
    const events = dir.file('events.jsonl');
    const runtime = await openTasks(events, { tasks: false });
    await using step = await runtime.captureBinding();

    const refused = await failure(step.prepareCall('t__slow_job').run({ key: 'r' }));
    const plain = await step.prepareCall('t__maybe_job').run({ key: 'o' }, { task: true });

    expect(refused.code).toBe('SERVER_ERROR');
    expect(refused.detail).toMatchObject({ reason: 'tasks-unsupported', delivery: 'not-sent' });
    expect(refused.message).toContain('slow_job');
    expect(plain.receipt.taskId).toBeUndefined();
    expect(ofKind(readTaskEvents(events), 'call').map((e) => [e.key, e.task])).toEqual([
      ['o', false],
    ]);
  });

  it('maps a failed task to SERVER_ERROR with taskStatus failed, delivery sent', async () => {
    using dir = tempDir('tasks');
    const runtime = await openTasks(dir.file('events.jsonl'));
    await using step = await runtime.captureBinding();

    const failed = await failure(step.prepareCall('t__slow_job').run({ key: 'f', fail: true }));

    expect(failed.code).toBe('SERVER_ERROR');
    expect(failed.detail).toMatchObject({
      taskStatus: 'failed',
      delivery: 'sent',
      taskId: expect.any(String),
    });
  });

  it('sends tasks/cancel when the caller aborts while the task runs, and fails ABORTED (sent)', async () => {
    using dir = tempDir('tasks');
    const events = dir.file('events.jsonl');
    const runtime = await openTasks(events);
    await using step = await runtime.captureBinding();
    const controller = new AbortController();

    const running = failure(
      step.prepareCall('t__slow_job').run({ key: 'c', hold: true }, { signal: controller.signal }),
    );
    await within(
      untilTaskEvent(events, (e) => e.event === 'get'),
      'a tasks/get',
    );
    controller.abort();
    const aborted = await running;

    const created = ofKind(readTaskEvents(events), 'create');
    expect(aborted.code).toBe('ABORTED');
    expect(aborted.detail).toMatchObject({ delivery: 'sent', taskId: created[0]?.taskId });
    expect(ofKind(readTaskEvents(events), 'cancel')).toEqual([
      { event: 'cancel', taskId: created[0]?.taskId },
    ]);
  });
});

describe('tasks and the SQLite journal', () => {
  it('records the task id on the SENT record as soon as the task is created, before it completes', async () => {
    using dir = tempDir('tasks');
    const events = dir.file('events.jsonl');
    const runtime = await openTasks(events, {}, { journal: { path: join(dir.path, 'j.db') } });
    await using step = await runtime.captureBinding();
    const controller = new AbortController();

    const running = failure(
      step
        .prepareCall('t__slow_job')
        .run({ key: 'k', hold: true }, { idempotencyKey: 'k', signal: controller.signal }),
    );
    await within(
      untilTaskEvent(events, (e) => e.event === 'get'),
      'a tasks/get',
    );
    const record = await runtime.journal.get('k');
    controller.abort();
    await running;

    expect(record?.state).toBe('SENT');
    expect(record?.taskId).toBe(ofKind(readTaskEvents(events), 'create')[0]?.taskId);
  });

  it('resumes polling the recorded task after a restart instead of sending again, then replays; a task the server forgot is OUTCOME_UNKNOWN', async () => {
    using dir = tempDir('tasks');
    const events = dir.file('events.jsonl');
    const journal = join(dir.path, 'j.db');
    await using server = await spawnTaskHttpServer({ events });
    const open = async (url: string): Promise<McpRuntime> => {
      const runtime = await McpRuntime.open(
        { mcpServers: { t: { url } } },
        { approval: 'none', journal: { path: journal } },
      );
      runtimes.push(runtime);
      return runtime;
    };

    // The call outlives its timeout: the task is left running and the key is OUTCOME_UNKNOWN.
    const first = await open(server.url);
    const timedOut = await first
      .captureBinding()
      .then((step) =>
        failure(
          step
            .prepareCall('t__slow_job')
            .run({ key: 'r', polls: 6 }, { idempotencyKey: 'r', timeoutMs: 150 }),
        ),
      );
    await first.close();
    const second = await open(server.url);
    const resumedStep = await second.captureBinding();
    const resumed = await resumedStep
      .prepareCall('t__slow_job')
      .run({ key: 'r', polls: 6 }, { idempotencyKey: 'r' });
    const replay = await resumedStep
      .prepareCall('t__slow_job')
      .run({ key: 'r', polls: 6 }, { idempotencyKey: 'r' });
    resumedStep.release();

    const created = ofKind(readTaskEvents(events), 'create');
    expect(timedOut.code).toBe('TIMEOUT');
    expect(timedOut.detail).toMatchObject({ delivery: 'sent', taskId: created[0]?.taskId });
    expect(created).toHaveLength(1);
    expect(resumed).toMatchObject({ replayed: false, receipt: { taskId: created[0]?.taskId } });
    expect(resumed.result.content).toEqual([{ type: 'text', text: 'done:r' }]);
    expect(replay.replayed).toBe(true);
    expect((await second.journal.get('r'))?.state).toBe('COMPLETED');

    // A second key's task, then a server that forgot every task (a new process).
    const forgetful = await second
      .captureBinding()
      .then((step) =>
        failure(
          step
            .prepareCall('t__slow_job')
            .run({ key: 'g', hold: true }, { idempotencyKey: 'g', timeoutMs: 150 }),
        ),
      );
    expect(forgetful.code).toBe('TIMEOUT');
    await second.close();
    await server.close();
    await using restarted = await spawnTaskHttpServer({ events });
    const third = await open(restarted.url);
    await using thirdStep = await third.captureBinding();
    const unknown = await failure(
      thirdStep.prepareCall('t__slow_job').run({ key: 'g', hold: true }, { idempotencyKey: 'g' }),
    );

    expect(unknown.code).toBe('OUTCOME_UNKNOWN');
    expect(unknown.detail).toMatchObject({ delivery: 'sent', reason: 'task-unknown' });
    expect(ofKind(readTaskEvents(events), 'create').map((e) => e.key)).toEqual(['r', 'g']);
    expect((await third.journal.get('g'))?.state).toBe('OUTCOME_UNKNOWN');
  });
});

describe('tasks against @modelcontextprotocol/server-everything (stdio)', () => {
  it('runs its task-required simulate-research-query as a task and returns the report, the receipt naming the task', async () => {
    const entry = fileURLToPath(
      new URL(
        '../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
        import.meta.url,
      ),
    );
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          everything: { command: process.execPath, args: [entry, 'stdio'], approval: 'none' },
        },
      },
      {},
    );
    runtimes.push(runtime);
    await using step = await runtime.captureBinding();

    const outcome = await step
      .prepareCall('everything__simulate-research-query')
      .run({ topic: 'tasks' });

    expect(outcome.receipt.taskId).toEqual(expect.any(String));
    expect(JSON.stringify(outcome.result.content)).toContain('tasks');
    expect(outcome.result.isError).not.toBe(true);
  });
});
