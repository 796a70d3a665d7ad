/**
 * The task crash property (DESIGN §20.2) with real SIGKILLs: an agent process (tasks/kill-agent.mjs)
 * opens a runtime on a SQLite journal and runs keyed task calls against one long-lived task server
 * (a separate process, Streamable HTTP, counting task creations per key); it is SIGKILLed at a
 * seeded point (before the send, after the task was created, after its id was recorded, during
 * polling, after the result, after recording it). A second agent reopens the journal and runs the
 * same keys twice. The server proves each key created at most one task (duplicates: 0); every key
 * whose task id was recorded resumes and completes; the second pass replays; the chain verifies.
 * `STEPBIND_SEED` replays a campaign, `STEPBIND_RUNS` sets the number of kills.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import {
  propertyRun,
  readTaskEvents,
  spawnTaskHttpServer,
  tempDir,
  type TaskServerEvent,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

const AGENT = fileURLToPath(new URL('./tasks/kill-agent.mjs', import.meta.url));

const KILL_POINTS = [
  'before-send',
  'after-create',
  'after-task-recorded',
  'during-polling',
  'after-result',
  'after-record',
] as const;
type KillPoint = (typeof KILL_POINTS)[number];

interface AgentLine {
  readonly event: string;
  readonly key?: string;
  readonly pass?: number;
  readonly ok?: boolean;
  readonly code?: string;
  readonly reason?: string | null;
  readonly replayed?: boolean;
  readonly text?: string | null;
  readonly taskId?: string | null;
  readonly state?: string | null;
  readonly point?: string;
}

/**
 * Agent processes, each started one run ahead: an agent reads its plan only once its modules are
 * loaded, so the next one loads while the current one runs.
 */
class Agents {
  #spare = Agents.#spawn();

  static #spawn(): ChildProcessWithoutNullStreams {
    return spawn(process.execPath, [AGENT], { stdio: ['pipe', 'pipe', 'pipe'] });
  }

  /** Runs one agent to its end (or its kill) and returns its lines. */
  async run(plan: unknown): Promise<{ lines: AgentLine[]; signal: string | null }> {
    const child = this.#spare;
    this.#spare = Agents.#spawn();
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const closed = new Promise<[number | null, string | null]>((resolve) =>
      child.once('close', (c, s) => resolve([c, s])),
    );
    child.stdin.end(JSON.stringify(plan));
    const [code, signal] = await closed;
    if (signal === null && code !== 0) throw new Error(`agent exited ${String(code)}: ${err}`);
    const lines = out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as AgentLine);
    return { lines, signal };
  }

  /** Ends the spare agent (it has read no plan) and waits for it. */
  async close(): Promise<void> {
    const spare = this.#spare;
    const closed = new Promise<void>((resolve) => spare.once('close', () => resolve()));
    spare.kill('SIGKILL');
    await closed;
  }
}

describe('tasks under SIGKILL (real agent processes, a real task server)', () => {
  it('never creates a key’s task twice, and every key whose task was recorded resumes and completes', async () => {
    const { seed, numRuns } = propertyRun('tasks-kill', 12);
    await using dir = tempDir('tasks-kill');
    const events = dir.file('events.jsonl');
    await using server = await spawnTaskHttpServer({ events, pollIntervalMs: 40 });
    const table = new Map<KillPoint, { kills: number; resumes: number; duplicates: number }>(
      KILL_POINTS.map((p) => [p, { kills: 0, resumes: 0, duplicates: 0 }]),
    );
    let run = 0;
    const agents = new Agents();
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            killKey: fc.integer({ min: 0, max: 1 }),
            ms: fc.integer({ min: 150, max: 400 }),
            delayMs: fc.integer({ min: 0, max: 300 }),
          }),
          async ({ killKey, ms, delayMs }) => {
            const point = KILL_POINTS[run % KILL_POINTS.length] ?? 'before-send';
            const prefix = `r${run++}`;
            const keys = [0, 1].map((i) => ({
              key: `${prefix}:k${i}`,
              args: { key: `${prefix}:k${i}`, ms },
            }));
            const journal = dir.file(`${prefix}.db`);
            const killedKey = keys[killKey]?.key ?? '';
            const first = await agents.run({
              journal,
              url: server.url,
              keys,
              passes: 1,
              kill: { point, key: killedKey, delayMs },
            });
            const killed = first.signal === 'SIGKILL';
            const second = await agents.run({
              journal,
              url: server.url,
              keys,
              passes: 2,
              kill: null,
            });
            const creates = readTaskEvents(events).filter(
              (e): e is Extract<TaskServerEvent, { event: 'create' }> =>
                e.event === 'create' && e.key.startsWith(`${prefix}:`),
            );
            const row = table.get(point);
            if (row !== undefined && killed) row.kills++;
            for (const { key } of keys) {
              const made = creates.filter((e) => e.key === key);
              if (made.length > 1 && row !== undefined) row.duplicates += made.length - 1;
              expect(made.length, `${key}: tasks created (point ${point})`).toBeLessThanOrEqual(1);
              const start = second.lines.find(
                (l) => l.event === 'start' && l.key === key && l.pass === 0,
              );
              const result = second.lines.find(
                (l) => l.event === 'result' && l.key === key && l.pass === 0,
              );
              const replay = second.lines.find(
                (l) => l.event === 'result' && l.key === key && l.pass === 1,
              );
              if (
                start?.taskId !== null &&
                start?.taskId !== undefined &&
                start.state !== 'COMPLETED'
              ) {
                // The task was recorded and its outcome was not: the reopened run resumes it.
                expect(result, `${key} resumes (point ${point})`).toMatchObject({
                  ok: true,
                  replayed: false,
                  text: `done:${key}`,
                  taskId: start.taskId,
                });
                if (row !== undefined) row.resumes++;
              }
              if (result?.ok === true) {
                expect(result.text).toBe(`done:${key}`);
                expect(replay).toMatchObject({ ok: true, replayed: true, text: `done:${key}` });
              } else {
                // Only a kill between the SENT record and the task id's record leaves the outcome
                // unknown (as for any call, DESIGN §13): never a key whose task was recorded.
                expect(result, `${key} (point ${point})`).toMatchObject({
                  ok: false,
                  code: 'OUTCOME_UNKNOWN',
                });
                expect([key, start?.taskId ?? null]).toEqual([killedKey, null]);
                expect(['before-send', 'after-create']).toContain(point);
              }
            }
            expect(second.lines.find((l) => l.event === 'verified')).toEqual({
              event: 'verified',
              ok: true,
            });
          },
        ),
        { seed, numRuns, endOnFailure: true },
      );
    } finally {
      await agents.close();
    }
    console.log(
      `[tasks-kill] seed=${seed}\n| kill point | kills | resumes | duplicates |\n|---|---|---|---|`,
    );
    for (const [point, row] of table) {
      console.log(`| ${point} | ${row.kills} | ${row.resumes} | ${row.duplicates} |`);
    }
    const total = [...table.values()];
    expect(total.reduce((n, r) => n + r.duplicates, 0)).toBe(0);
    expect(total.reduce((n, r) => n + r.resumes, 0)).toBeGreaterThan(0);
  }, 180_000);
});
