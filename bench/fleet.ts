/**
 * bench/fleet: the PostgreSQL fleet store (issue 11), on `STEPBIND_PG_URL` or a throwaway local
 * cluster (default settings except `fsync=off`, as the test clusters; loopback).
 *
 * - Revocation propagation: 8 workers (each its own PostgreSQL connection listening, its own
 *   policy view; in this process), 1,000 revocations (each followed by a restore, not measured).
 *   Latency per worker: from just before the revoking transaction is sent to the moment that
 *   worker's admission check first refuses the tool (it checks on every applied change). Goal
 *   p99 < 100 ms (seed bound 30 s).
 * - Admission: the policy check of the hot path (local view) versus the in-memory runtime's
 *   revocation check, per call; and whole sequential `PreparedCall.run` over in-memory transports
 *   with the PostgreSQL store (every run's receipt is a transaction) versus the in-memory default.
 *
 * Run alone: `npx tsx bench/fleet.ts [revocations]`.
 */
import { McpRuntime } from '@stepbind/runtime';
import {
  commitPolicyChange,
  migrateFleetStore,
  PgHandle,
  PolicyView,
} from '@stepbind/runtime/fleet';
import { createInMemoryFleet } from '@stepbind/testkit';
import { usePostgres } from '../packages/runtime/test/fleet/support.js';
import { isMain, row, runStandalone, spread, type BenchRow } from './support.js';

const SUITE = 'fleet';

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
  const calls = options.calls ?? 300;
  try {
    const schema = pg.schema('bench');
    const admin = new PgHandle({ url: pg.url, schema });
    await migrateFleetStore(admin);
    const workers = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const handle = new PgHandle({ url: pg.url, schema });
        const w = {
          handle,
          view: undefined as PolicyView | undefined,
          onApplied: (_v: number) => undefined as void,
        };
        w.view = new PolicyView(handle, { onApplied: (p) => w.onApplied(p.version) });
        await w.view.open();
        return w;
      }),
    );
    const latencies: number[] = [];
    for (let i = 0; i < revocations; i++) {
      const tool = `t${i % 7}`;
      let t0 = 0;
      const refused = workers.map(
        (w) =>
          new Promise<number>((resolve) => {
            w.onApplied = () => {
              // The worker's admission check, as a call arriving now would run it.
              if (w.view!.isRevoked('s', tool)) resolve(performance.now() - t0);
            };
          }),
      );
      t0 = performance.now();
      await commitPolicyChange(admin, { kind: 'revoke', server: 's', tool });
      latencies.push(...(await Promise.all(refused)));
      const restored = workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            w.onApplied = () => {
              if (!w.view!.isRevoked('s', tool)) resolve();
            };
          }),
      );
      await commitPolicyChange(admin, { kind: 'restore', server: 's', tool });
      await Promise.all(restored);
    }
    // Admission check cost: local fleet view vs the in-memory runtime's set lookup.
    const view = workers[0]!.view!;
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
    for (const w of workers) {
      await w.view!.close();
      await w.handle.close();
    }
    // Whole sequential calls, in-memory transports: fleet store vs the in-memory default.
    const run = async (withStore: boolean): Promise<number[]> => {
      const fleet = createInMemoryFleet({
        s: {
          scenario: 'fixture',
          fixture: {
            generations: [
              {
                pages: [
                  {
                    tools: [
                      {
                        name: 'echo',
                        inputSchema: { type: 'object' },
                        annotations: { readOnlyHint: true },
                      },
                    ],
                  },
                ],
              },
            ],
          },
        },
      });
      const runtime = await McpRuntime.open(fleet.config(), {
        connect: fleet.connect,
        approval: 'none',
        ...(withStore ? { store: { url: pg.url, schema: pg.schema('calls') } } : {}),
      });
      try {
        await using step = await runtime.captureBinding();
        const call = step.prepareCall('s__echo');
        const out: number[] = [];
        for (let i = 0; i < calls; i++) {
          const t = performance.now();
          await call.run({});
          out.push((performance.now() - t) * 1000);
        }
        return out;
      } finally {
        await runtime.close();
        await fleet.close();
      }
    };
    const memRounds: number[] = [];
    const pgRounds: number[] = [];
    for (let r = 0; r < 4; r++) {
      memRounds.push(spread(await run(false)).median);
      pgRounds.push(spread(await run(true)).median);
    }
    await admin.close();
    const sorted = [...latencies].sort((a, b) => a - b);
    const fleetMedian = spread(fleetNs).median;
    const memoryMedian = spread(memoryNs).median;
    return [
      row(SUITE, 'revocation → refusal, p50 (8 workers)', 'ms', [percentile(sorted, 50)], {
        note: `${revocations} revocations × 8 workers = ${sorted.length} samples; max ${sorted.at(-1)?.toFixed(2)} ms`,
      }),
      row(SUITE, 'revocation → refusal, p99 (8 workers)', 'ms', [percentile(sorted, 99)], {
        target: { op: '<=', value: 100 },
      }),
      row(SUITE, 'admission policy check, fleet view', 'ns', fleetNs),
      row(SUITE, 'admission policy check, in-memory', 'ns', memoryNs),
      row(SUITE, 'ratio admission check fleet / in-memory', '×', [fleetMedian / memoryMedian], {
        note: 'the local view: a clock read, a staleness compare and two set lookups; no database access',
      }),
      row(SUITE, 'sequential run, in-memory store', 'µs', memRounds),
      row(SUITE, 'sequential run, PostgreSQL store', 'µs', pgRounds, {
        note: 'every run appends its receipt in one PostgreSQL transaction (the policy check itself reads no database)',
      }),
      row(SUITE, 'ratio sequential run PG / in-memory', '×', [
        spread(pgRounds).median / spread(memRounds).median,
      ]),
    ];
  } finally {
    await pg.stop();
  }
}

if (isMain(import.meta.url)) {
  const n = Number(process.argv[2] ?? 1000);
  await runStandalone('bench/fleet', () => runFleetBench({ revocations: n }));
}
