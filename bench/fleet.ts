/**
 * bench/fleet: the PostgreSQL fleet store (issue 11), on `STEPBIND_PG_URL` or a throwaway local
 * cluster (default settings except `fsync=off`, as the test clusters; loopback).
 *
 * - Revocation propagation: 8 worker processes (`bench/fleet-worker.mjs`: each its own
 *   PostgreSQL connection listening, its own policy view), 1,000 revocations (each followed by a
 *   restore, not measured). Latency per worker: from just before the revoking transaction is sent
 *   to the moment that worker's admission check first refuses the tool (it checks on every applied
 *   change), on the machine's clock (`performance.timeOrigin + now()` in both processes). Goal
 *   p99 < 100 ms (seed bound 30 s).
 * - Admission: the policy check of the hot path (local view) versus the in-memory runtime's
 *   revocation check, per call.
 * - Whole calls with the PostgreSQL store versus none, sequential and 64 in flight, with and
 *   without group commit, and commits per call (`bench/fleet-calls.ts`).
 *
 * Run alone: `npx tsx bench/fleet.ts [revocations]`.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  commitPolicyChange,
  migrateFleetStore,
  PgHandle,
  PolicyView,
} from '@stepbind/runtime/fleet';
import { usePostgres } from '../packages/runtime/test/support/postgres.js';
import { runFleetCallBench } from './fleet-calls.js';
import { isMain, row, runStandalone, spread, type BenchRow } from './support.js';

const SUITE = 'fleet';
const WORKER = fileURLToPath(new URL('./fleet-worker.mjs', import.meta.url));
const TOOLS = Array.from({ length: 7 }, (_, i) => `t${i}`);

/** What a worker process reported after applying one policy version. */
interface Applied {
  readonly v: number;
  readonly t: number;
  readonly refused: readonly string[];
}

/** A worker process of the propagation benchmark (see `bench/fleet-worker.mjs`). */
class WorkerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
  #waiter: ((a: Applied) => boolean) | undefined;

  constructor(url: string, schema: string) {
    this.child = spawn(process.execPath, [WORKER, JSON.stringify({ url, schema, tools: TOOLS })]);
    let stderr = '';
    this.child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
    let onReady: () => void = () => undefined;
    this.ready = Promise.race([
      new Promise<void>((resolve) => (onReady = resolve)),
      this.exited.then(() => {
        throw new Error(`bench worker exited: ${stderr}`);
      }),
    ]);
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const message = JSON.parse(line) as Applied & { ready?: true };
      if (message.ready === true) onReady();
      else if (this.#waiter?.(message) === true) this.#waiter = undefined;
    });
  }

  /** Resolves with the first report that `match` accepts. */
  next(match: (a: Applied) => boolean): Promise<Applied> {
    return new Promise((resolve) => {
      this.#waiter = (a) => {
        if (!match(a)) return false;
        resolve(a);
        return true;
      };
    });
  }

  async close(): Promise<void> {
    this.child.stdin.end();
    await this.exited;
  }
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

/** Runs the fleet benchmarks; empty when no PostgreSQL is available. */
export async function runFleetBench(
  options: { readonly revocations?: number; readonly calls?: number } = {},
): Promise<BenchRow[]> {
  const pg = await usePostgres('bench/fleet.ts');
  if (pg === undefined) return [];
  const revocations = options.revocations ?? 1000;
  try {
    const schema = pg.schema('bench');
    const admin = new PgHandle({ url: pg.url, schema });
    await migrateFleetStore(admin);
    const workers = Array.from({ length: 8 }, () => new WorkerProcess(pg.url, schema));
    const latencies: number[] = [];
    try {
      await Promise.all(workers.map((w) => w.ready));
      for (let i = 0; i < revocations; i++) {
        const tool = TOOLS[i % TOOLS.length]!;
        const refused = workers.map((w) => w.next((a) => a.refused.includes(tool)));
        const t0 = performance.timeOrigin + performance.now();
        await commitPolicyChange(admin, { kind: 'revoke', server: 's', tool });
        for (const a of await Promise.all(refused)) latencies.push(a.t - t0);
        const restored = workers.map((w) => w.next((a) => !a.refused.includes(tool)));
        await commitPolicyChange(admin, { kind: 'restore', server: 's', tool });
        await Promise.all(restored);
      }
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
    // Admission check cost: a local fleet view vs the in-memory runtime's set lookup.
    const viewHandle = new PgHandle({ url: pg.url, schema });
    const view = new PolicyView(viewHandle);
    await view.open();
    const set = new Set(['s\u0000t1']);
    const n = 2_000_000;
    const timeIt = (fn: () => boolean): number => {
      const t = performance.now();
      let hits = 0;
      for (let i = 0; i < n; i++) if (fn()) hits++;
      if (hits < 0) throw new Error('unreachable');
      return ((performance.now() - t) * 1e6) / n;
    };
    const fleetNs: number[] = [];
    const memoryNs: number[] = [];
    for (let r = 0; r < 5; r++) {
      memoryNs.push(timeIt(() => set.has('s\u0000t2')));
      fleetNs.push(timeIt(() => view.isRevoked('s', 't2')));
    }
    await view.close();
    await viewHandle.close();
    // Whole calls, in-memory transports: fleet store (grouped, one commit per write) vs none.
    const callRows = await runFleetCallBench(pg.url, (prefix) => pg.schema(prefix), {
      ...(options.calls === undefined ? {} : { calls: options.calls }),
    });
    await admin.close();
    const sorted = [...latencies].sort((a, b) => a - b);
    const fleetMedian = spread(fleetNs).median;
    const memoryMedian = spread(memoryNs).median;
    return [
      row(SUITE, 'revocation → refusal, p50 (8 worker processes)', 'ms', [percentile(sorted, 50)], {
        note: `${revocations} revocations × 8 worker processes = ${sorted.length} samples; max ${sorted.at(-1)?.toFixed(2)} ms`,
      }),
      row(SUITE, 'revocation → refusal, p99 (8 worker processes)', 'ms', [percentile(sorted, 99)], {
        target: { op: '<=', value: 100 },
      }),
      row(SUITE, 'admission policy check, fleet view', 'ns', fleetNs),
      row(SUITE, 'admission policy check, in-memory', 'ns', memoryNs),
      row(SUITE, 'ratio admission check fleet / in-memory', '×', [fleetMedian / memoryMedian], {
        note: 'the local view: a clock read, a staleness compare and two set lookups; no database access',
      }),
      ...callRows,
    ];
  } finally {
    await pg.stop();
  }
}

if (isMain(import.meta.url)) {
  const n = Number(process.argv[2] ?? 1000);
  await runStandalone('bench/fleet', () => runFleetBench({ revocations: n }));
}
