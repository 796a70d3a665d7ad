/**
 * Kill campaigns for the execution journal (issue 10): an agent-loop child process (agent.mjs) is
 * SIGKILLed at seeded random points and restarted on the same SQLite journal, batch after batch.
 * An independent oracle (its own rules, below) predicts from the observed kill points what every
 * key's state, result and number of arrivals at the server must be; the server's own audit trail
 * counts the arrivals; the receipts chain is verified with `stepbind receipts verify`.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallReceipt, ToolCallResult } from '@stepbind/binding';
import { openSqliteJournal } from '@stepbind/runtime';
import { runCli } from '../../../src/cli/run.js';
import { waitUntilGone } from '../../support/processes.js';
import {
  createScriptedServer,
  readAuditTrail,
  stdioServerParams,
  type AuditEntry,
  type ScriptedServer,
  type ServerFixture,
} from '@stepbind/testkit';
import { WRITE } from '../../support/fixtures.js';

/** Where a child can be killed, in the order a call passes them. */
export const KILL_POINTS = [
  'before-intent',
  'after-intent',
  'before-send',
  'after-send',
  'after-answer',
  'after-record',
] as const;
export type KillPoint = (typeof KILL_POINTS)[number];

const AGENT = fileURLToPath(new URL('./agent.mjs', import.meta.url));

/** Two write tools and one read tool (the server allows `retryReads`). */
export const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            { name: 'w1', inputSchema: { type: 'object' }, annotations: WRITE },
            { name: 'w2', inputSchema: { type: 'object' }, annotations: WRITE },
            { name: 'r1', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
          ],
        },
      ],
    },
  ],
  calls: {
    w1: { text: 'wrote with w1' },
    w2: { structuredContent: { written: true } },
    r1: { text: 'read with r1' },
  },
};
const ANSWERS: Readonly<Record<string, ToolCallResult>> = {
  w1: { content: [{ type: 'text', text: 'wrote with w1' }] },
  w2: {
    content: [{ type: 'text', text: '{"written":true}' }],
    structuredContent: { written: true },
  },
  r1: { content: [{ type: 'text', text: 'read with r1' }] },
};

/** Options of {@link runKillCampaign}. */
export interface KillCampaignOptions {
  /** Kill points to reach in total (each one is a SIGKILLed child). */
  readonly killPoints: number;
  readonly seed: number;
  /** Campaigns run side by side. @default 2 */
  readonly lanes?: number;
  /** One batch in this many talks stdio (the server dies with the agent); the rest Streamable HTTP. @default 6 */
  readonly stdioEvery?: number;
  /** Keys per batch (one journal). @default 8 */
  readonly keysPerBatch?: number;
  /** Kills per batch before the batch is finished with a clean run. @default 10 */
  readonly killsPerBatch?: number;
  /** Called with each finished batch. */
  readonly onBatch?: (batch: BatchReport) => void;
}

/** What one batch (one journal) saw. */
export interface BatchReport {
  readonly lane: number;
  readonly batch: number;
  readonly transport: 'stdio' | 'http';
  readonly kills: readonly { readonly key: string; readonly point: KillPoint }[];
  readonly runs: number;
  readonly states: Readonly<Record<string, string>>;
  readonly arrivals: Readonly<Record<string, number>>;
  /** Every disagreement with the oracle or an invariant; empty when the batch passed. */
  readonly problems: readonly string[];
}

/** The totals of a campaign. */
export interface CampaignReport {
  readonly seed: number;
  readonly killPoints: number;
  readonly byPoint: Readonly<Record<KillPoint, number>>;
  readonly batches: number;
  readonly runs: number;
  readonly keys: number;
  readonly problems: readonly string[];
  readonly seconds: number;
}

/** mulberry32: a small seeded PRNG, so a campaign replays with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export type ChildEvent =
  | { event: 'recovered'; records: [string, string][] }
  | { event: 'open'; pids: number[] }
  | { event: 'start'; key: string; pass: number }
  | { event: 'kill'; key: string; point: KillPoint }
  | {
      event: 'result';
      key: string;
      pass: number;
      ok: true;
      replayed: boolean;
      result: ToolCallResult;
      receipt: CallReceipt;
    }
  | { event: 'result'; key: string; pass: number; ok: false; code: string; delivery: string | null }
  | { event: 'done' };

interface PlannedKey {
  readonly key: string;
  readonly tool: 'w1' | 'w2' | 'r1';
  readonly args: Readonly<Record<string, unknown>>;
}

/**
 * An agent child that is loading its modules and waits for its plan on stdin: a lane starts the
 * next one while the current one runs, so module loading overlaps the previous run.
 */
interface WarmAgent {
  run(plan: unknown): Promise<{ events: ChildEvent[]; killed: boolean }>;
  discard(): Promise<void>;
}

function warmAgent(): WarmAgent {
  const child = spawn(process.execPath, [AGENT], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  // A plan written to an agent that died early must not crash the harness; the exit reports it.
  child.stdin.on('error', () => undefined);
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    async run(plan) {
      child.stdin.end(JSON.stringify(plan));
      // A hang guard, not a time limit: on a loaded 2-CPU machine (two test workers) one agent's
      // start, calls and close have taken most of a minute.
      let hung = false;
      const watchdog = setTimeout(() => {
        hung = true;
        child.kill('SIGKILL');
      }, 180_000);
      const { code, signal } = await exited;
      clearTimeout(watchdog);
      const events = out
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as ChildEvent);
      const killed = signal === 'SIGKILL' && events.some((e) => e.event === 'kill');
      if (!killed && (code !== 0 || !events.some((e) => e.event === 'done'))) {
        throw new Error(
          `agent child failed${hung ? ' (hung: killed after 180 s)' : ''} (code ${code}, signal ${signal}):\n${err}\n${out}`,
        );
      }
      // A stdio server outlives its agent briefly: it reads what was written, then sees EOF.
      for (const e of events)
        if (e.event === 'open') for (const pid of e.pids) await waitUntilGone(pid);
      return { events, killed };
    },
    async discard() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs plans one after the other, each in a fresh agent process loaded while the last one ran. */
export class AgentLane {
  #next: WarmAgent = warmAgent();
  async run(plan: unknown): Promise<{ events: ChildEvent[]; killed: boolean }> {
    const agent = this.#next;
    this.#next = warmAgent();
    return agent.run(plan);
  }
  close(): Promise<void> {
    return this.#next.discard();
  }
}

/** A scripted server per MCP session behind one loopback Streamable HTTP endpoint. */
async function startHttpServer(): Promise<{
  readonly url: string;
  audit(): AuditEntry[];
  close(): Promise<void>;
}> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const servers: ScriptedServer[] = [];
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const id = req.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? sessions.get(id) : undefined;
    if (transport === undefined) {
      if (typeof id === 'string') {
        res.writeHead(404).end();
        return;
      }
      const scripted = createScriptedServer({ scenario: 'fixture', fixture: FIXTURE });
      servers.push(scripted);
      const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid: string): void => {
          sessions.set(sid, created);
        },
      });
      await scripted.server.connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res);
  };
  const http = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    audit: () => servers.flatMap((s) => [...s.audit]),
    close: async () => {
      await Promise.all(servers.map((s) => s.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

type OState = 'none' | 'NOT_SENT' | 'COMPLETED' | 'OUTCOME_UNKNOWN';
interface OKey {
  state: OState;
  arrivals: number;
  original: { result: ToolCallResult; receipt: CallReceipt | undefined } | undefined;
}

/**
 * The oracle: what the issue promises, as plain rules over what was observed. A key that may be
 * run (never used, NOT_SENT, or a read whose outcome is unknown) and completes is COMPLETED with
 * one more arrival; a kill before anything durable changes nothing, after the INTENT leaves
 * NOT_SENT, after the SENT record (sent or not, answered or not) leaves OUTCOME_UNKNOWN, after the
 * outcome was recorded leaves COMPLETED. A COMPLETED key replays its first result and receipt; a
 * write key whose outcome is unknown is refused and never reaches the server again.
 */
class Oracle {
  readonly keys = new Map<string, OKey>();
  readonly problems: string[] = [];
  constructor(readonly planned: readonly PlannedKey[]) {
    for (const p of planned)
      this.keys.set(p.key, { state: 'none', arrivals: 0, original: undefined });
  }

  #runnable(key: string): boolean {
    const k = this.#get(key);
    return (
      k.state === 'none' ||
      k.state === 'NOT_SENT' ||
      (k.state === 'OUTCOME_UNKNOWN' && this.#tool(key) === 'r1')
    );
  }

  #tool(key: string): string {
    return this.planned.find((p) => p.key === key)?.tool ?? '?';
  }

  #get(key: string): OKey {
    const k = this.keys.get(key);
    if (k === undefined) throw new Error(`oracle: unknown key ${key}`);
    return k;
  }

  /** What recovery must report when a child starts after `kill`. */
  expectedRecovery(
    kill: { key: string; point: KillPoint } | undefined,
    runnable: boolean,
  ): [string, string][] {
    if (kill === undefined || !runnable) return [];
    switch (kill.point) {
      case 'after-intent':
        return [[kill.key, 'NOT_SENT']];
      case 'before-send':
      case 'after-send':
      case 'after-answer':
        return [[kill.key, 'OUTCOME_UNKNOWN']];
      case 'before-intent':
      case 'after-record':
        return [];
    }
  }

  kill(key: string, point: KillPoint): boolean {
    const k = this.#get(key);
    const runnable = this.#runnable(key);
    if (!runnable) {
      if (point !== 'before-intent') {
        this.problems.push(
          `${key} (${k.state}) reached ${point}: a replayed or refused key must not write`,
        );
      }
      return false;
    }
    switch (point) {
      case 'before-intent':
        break;
      case 'after-intent':
        k.state = 'NOT_SENT';
        break;
      case 'before-send':
        k.state = 'OUTCOME_UNKNOWN';
        break;
      case 'after-send':
      case 'after-answer':
        k.state = 'OUTCOME_UNKNOWN';
        k.arrivals++;
        break;
      case 'after-record':
        k.state = 'COMPLETED';
        k.arrivals++;
        k.original = { result: ANSWERS[this.#tool(key)] as ToolCallResult, receipt: undefined };
        break;
    }
    return true;
  }

  result(e: Extract<ChildEvent, { event: 'result' }>): void {
    const k = this.#get(e.key);
    const where = `${e.key} (${k.state}, pass ${e.pass})`;
    if (this.#runnable(e.key)) {
      if (!e.ok || e.replayed) {
        this.problems.push(
          `${where}: expected a fresh run, got ${JSON.stringify(e).slice(0, 200)}`,
        );
        return;
      }
      k.state = 'COMPLETED';
      k.arrivals++;
      k.original = { result: e.result, receipt: e.receipt };
      if (!same(e.result, ANSWERS[this.#tool(e.key)])) this.problems.push(`${where}: wrong result`);
      return;
    }
    if (k.state === 'COMPLETED') {
      if (!e.ok || !e.replayed) {
        this.problems.push(`${where}: expected a replay, got ${JSON.stringify(e).slice(0, 200)}`);
        return;
      }
      const original = k.original;
      if (original !== undefined && !same(e.result, original.result)) {
        this.problems.push(`${where}: the replayed result differs from the original`);
      }
      if (original?.receipt !== undefined && !same(e.receipt, original.receipt)) {
        this.problems.push(`${where}: the replayed receipt differs from the original`);
      }
      // The first replay after an after-record kill fixes the receipt later replays must equal.
      if (original !== undefined && original.receipt === undefined) {
        k.original = { result: original.result, receipt: e.receipt };
      }
      return;
    }
    if (e.ok || e.code !== 'OUTCOME_UNKNOWN') {
      this.problems.push(
        `${where}: expected OUTCOME_UNKNOWN, got ${JSON.stringify(e).slice(0, 200)}`,
      );
    }
  }
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

async function runBatch(
  agents: AgentLane,
  lane: number,
  batch: number,
  transport: 'stdio' | 'http',
  random: () => number,
  budget: { left: number },
  options: Required<Pick<KillCampaignOptions, 'keysPerBatch' | 'killsPerBatch'>>,
  http: { url: string; audit(): AuditEntry[] } | undefined,
): Promise<BatchReport> {
  const dir = mkdtempSync(join(tmpdir(), 'stepbind-kill-'));
  try {
    const journal = join(dir, 'journal.db');
    const auditPath = join(dir, 'audit.jsonl');
    const server =
      transport === 'http' && http !== undefined
        ? { url: http.url }
        : (({ command, args }) => ({ command, args }))(
            stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }),
          );
    const prefix = `l${lane}b${batch}`;
    const tools = ['w1', 'w2', 'r1'] as const;
    const keys: PlannedKey[] = Array.from({ length: options.keysPerBatch }, (_, i) => {
      const key = `${prefix}-k${i}`;
      return { key, tool: tools[i % 3] as PlannedKey['tool'], args: { key, n: i } };
    });
    const oracle = new Oracle(keys);
    const kills: { key: string; point: KillPoint }[] = [];
    let runs = 0;
    let last: { key: string; point: KillPoint } | undefined;
    let lastRunnable = false;
    const play = (events: readonly ChildEvent[]): void => {
      for (const e of events) {
        if (e.event === 'recovered') {
          const expected = oracle.expectedRecovery(last, lastRunnable);
          if (!same(e.records, expected)) {
            oracle.problems.push(
              `recovery after ${JSON.stringify(last)} listed ${JSON.stringify(e.records)}, expected ${JSON.stringify(expected)}`,
            );
          }
        } else if (e.event === 'kill') {
          kills.push({ key: e.key, point: e.point });
          lastRunnable = oracle.kill(e.key, e.point);
          last = { key: e.key, point: e.point };
        } else if (e.event === 'result') {
          oracle.result(e);
        }
      }
    };
    const base = { journal, server, keys };
    while (kills.length < options.killsPerBatch && budget.left > 0) {
      const point = KILL_POINTS[Math.floor(random() * KILL_POINTS.length)] as KillPoint;
      const nth = 1 + Math.floor(random() * 3);
      budget.left--;
      const { events, killed } = await agents.run({ ...base, passes: 1, kill: { point, nth } });
      runs++;
      play(events);
      if (!killed) {
        // Fewer than `nth` occurrences: the run finished every key, nothing to recover next.
        budget.left++;
        last = undefined;
        break;
      }
    }
    // A clean run finishes every key that may still run; its second pass replays all of them.
    const final = await agents.run({ ...base, passes: 2, kill: null });
    runs++;
    play(final.events);
    if (final.killed) oracle.problems.push('the final run was killed');
    // Check the journal itself, the server's audit trail and the receipts chain.
    const store = openSqliteJournal({ path: journal, readOnly: true });
    const states: Record<string, string> = {};
    try {
      for (const record of await store.listRecords()) states[record.key] = record.state;
    } finally {
      await store.close();
    }
    const audit =
      transport === 'http' && http !== undefined ? http.audit() : await readAuditTrail(auditPath);
    const arrivals: Record<string, number> = {};
    for (const entry of audit) {
      const key = entry.method === 'tools/call' ? entry.arguments?.['key'] : undefined;
      if (typeof key === 'string' && key.startsWith(`${prefix}-`))
        arrivals[key] = (arrivals[key] ?? 0) + 1;
    }
    for (const p of keys) {
      const o = oracle.keys.get(p.key);
      if (o === undefined) continue;
      const expected = o.state === 'none' ? undefined : o.state;
      if (states[p.key] !== expected) {
        oracle.problems.push(`${p.key}: journal says ${states[p.key]}, oracle ${expected}`);
      }
      if (!['COMPLETED', 'OUTCOME_UNKNOWN'].includes(states[p.key] ?? '')) {
        oracle.problems.push(
          `${p.key}: ended in ${states[p.key]}, not COMPLETED or OUTCOME_UNKNOWN`,
        );
      }
      const reached = arrivals[p.key] ?? 0;
      if (reached !== o.arrivals) {
        oracle.problems.push(`${p.key}: reached the server ${reached} times, oracle ${o.arrivals}`);
      }
      if (p.tool !== 'r1' && reached > 1) {
        oracle.problems.push(`${p.key}: a write key reached the server ${reached} times`);
      }
    }
    let verifyOut = '';
    const verified = await runCli(['receipts', 'verify', '--journal', journal], {
      stdout: (t) => (verifyOut += t),
      stderr: (t) => (verifyOut += t),
    });
    if (verified !== 0) oracle.problems.push(`receipts verify exited ${verified}: ${verifyOut}`);
    return { lane, batch, transport, kills, runs, states, arrivals, problems: oracle.problems };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs kill batches on `lanes` lanes until `killPoints` children were SIGKILLed. Never throws for
 * a disagreement: the report lists every problem (the caller asserts there are none).
 */
export async function runKillCampaign(options: KillCampaignOptions): Promise<CampaignReport> {
  const started = performance.now();
  const lanes = options.lanes ?? 2;
  const stdioEvery = options.stdioEvery ?? 6;
  const budget = { left: options.killPoints };
  const reports: BatchReport[] = [];
  const laneRuns = Array.from({ length: lanes }, async (_, lane) => {
    const random = prng(options.seed + lane * 7919);
    const http = await startHttpServer();
    const agents = new AgentLane();
    try {
      for (let batch = 0; budget.left > 0; batch++) {
        const transport = (batch + lane) % stdioEvery === stdioEvery - 1 ? 'stdio' : 'http';
        const report = await runBatch(
          agents,
          lane,
          batch,
          transport,
          random,
          budget,
          {
            keysPerBatch: options.keysPerBatch ?? 8,
            killsPerBatch: options.killsPerBatch ?? 10,
          },
          http,
        );
        reports.push(report);
        options.onBatch?.(report);
      }
    } finally {
      await agents.close();
      await http.close();
    }
  });
  await Promise.all(laneRuns);
  const byPoint = Object.fromEntries(KILL_POINTS.map((p) => [p, 0])) as Record<KillPoint, number>;
  for (const r of reports) for (const k of r.kills) byPoint[k.point]++;
  return {
    seed: options.seed,
    killPoints: reports.reduce((n, r) => n + r.kills.length, 0),
    byPoint,
    batches: reports.length,
    runs: reports.reduce((n, r) => n + r.runs, 0),
    keys: reports.reduce((n, r) => n + Object.keys(r.states).length, 0),
    problems: reports.flatMap((r) =>
      r.problems.map((p) => `lane ${r.lane} batch ${r.batch} (${r.transport}): ${p}`),
    ),
    seconds: (performance.now() - started) / 1000,
  };
}
