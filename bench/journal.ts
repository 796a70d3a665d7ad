/**
 * bench/journal: sequential `PreparedCall.run` over real stdio with the durable SQLite journal on,
 * versus the same calls with it off (the default in-memory journal), interleaved ABBA in one run
 * (issue 10 target: ≤ 1.3× the time with it off).
 *
 * Sides, each with its own runtime and its own scripted stdio child, every call with a fresh
 * idempotency key unless said otherwise:
 * - off: no `journal` option: the default in-memory journal (the durable journal off);
 * - full: the SQLite journal, `synchronous: 'full'` (the claim written as SENT with an fsync, then
 *   COMPLETED + receipt);
 * - normal: the same with `synchronous: 'normal'` (no fsync per call);
 * - bare: no journal option and no key (what a loop that uses no idempotency pays), for reference.
 *
 * Reported: per-round median latency and ratios to `off`, durable (fsynced) writes and commits per
 * call, and the time spent inside the journal store per call (p50/p99: the latency it adds).
 *
 * Run alone: `npx tsx bench/journal.ts [--strict]`.
 */
import type { JournalStore } from '@stepbind/binding';
import { McpRuntime, openSqliteJournal, type SqliteJournalStore } from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';
import {
  breathe,
  isMain,
  median,
  row,
  runStandalone,
  Scratch,
  trackChild,
  type BenchRow,
} from './support.js';

const SUITE = 'journal';
const ARGS = Object.freeze({ input: 'hello' });

/** Options of {@link runJournalBench}. */
export interface JournalBenchOptions {
  /** Interleaved rounds. @default 20 */
  readonly rounds?: number;
  /** Sequential calls per side per round. @default 200 */
  readonly calls?: number;
}

/** Wraps a store to time every call made on it, and counts per-run totals. */
function timed(store: SqliteJournalStore): { store: JournalStore; spent: () => number } {
  let spent = 0;
  const wrap =
    <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      const t = performance.now();
      try {
        return await fn(...a);
      } finally {
        spent += performance.now() - t;
      }
    };
  return {
    store: {
      location: store.location,
      get: wrap((k: string) => store.get(k)),
      insert: wrap((...a: Parameters<JournalStore['insert']>) => store.insert(...a)),
      update: wrap((...a: Parameters<JournalStore['update']>) => store.update(...a)),
      appendReceipt: wrap((b: Parameters<JournalStore['appendReceipt']>[0]) =>
        store.appendReceipt(b),
      ),
      listRecords: (f) => store.listRecords(f),
      readReceipts: (o) => store.readReceipts(o),
      anchor: () => store.anchor(),
      prune: (o) => store.prune(o),
      close: () => store.close(),
    },
    spent: () => spent,
  };
}

interface Side {
  readonly name: string;
  readonly runtime: McpRuntime;
  readonly sqlite: SqliteJournalStore | undefined;
  readonly spent: () => number;
  readonly keyed: boolean;
  /** Per-call latency (µs) of every measured call. */
  readonly latencies: number[];
  /** Per-call time inside the store (µs) of every measured call. */
  readonly storeUs: number[];
  readonly roundMedians: number[];
  calls: number;
}

async function openSide(
  name: string,
  scratch: Scratch,
  synchronous: 'full' | 'normal' | undefined,
  keyed: boolean,
): Promise<Side> {
  const params = stdioServerParams({ scenario: 'single' });
  const sqlite =
    synchronous === undefined
      ? undefined
      : openSqliteJournal({ path: scratch.path(`${name}.db`), synchronous });
  const timing = sqlite === undefined ? undefined : timed(sqlite);
  const runtime = await McpRuntime.open(
    { mcpServers: { s: { command: params.command, args: params.args, approval: 'none' } } },
    timing === undefined ? {} : { journal: { store: timing.store } },
  );
  for (const pid of runtime.pids()) trackChild(pid);
  return {
    name,
    runtime,
    sqlite,
    spent: timing?.spent ?? (() => 0),
    keyed,
    latencies: [],
    storeUs: [],
    roundMedians: [],
    calls: 0,
  };
}

async function round(side: Side, calls: number, measure: boolean): Promise<void> {
  await using step = await side.runtime.captureBinding();
  const call = step.prepareCall('s__alpha');
  const latencies: number[] = [];
  for (let i = 0; i < calls; i++) {
    const key = side.keyed ? `${side.name}-${side.calls}` : undefined;
    side.calls++;
    const spent0 = side.spent();
    const t = performance.now();
    await call.run(ARGS, key === undefined ? {} : { idempotencyKey: key });
    const us = (performance.now() - t) * 1000;
    latencies.push(us);
    if (measure) {
      side.latencies.push(us);
      side.storeUs.push((side.spent() - spent0) * 1000);
    }
  }
  if (measure) side.roundMedians.push(median(latencies));
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] ?? NaN;
}

/** Runs the suite and returns its rows. */
export async function runJournalBench(options: JournalBenchOptions = {}): Promise<BenchRow[]> {
  const rounds = options.rounds ?? 20;
  const calls = options.calls ?? 200;
  const scratch = new Scratch();
  const sides: Side[] = [];
  try {
    sides.push(await openSide('off', scratch, undefined, true));
    sides.push(await openSide('full', scratch, 'full', true));
    sides.push(await openSide('normal', scratch, 'normal', true));
    sides.push(await openSide('bare', scratch, undefined, false));
    const [off, full, normal, bare] = sides as [Side, Side, Side, Side];
    // Warm-up: JIT every path, fill the page cache.
    for (const side of sides) await round(side, calls, false);
    const before = {
      full: full.sqlite?.durableWrites ?? 0,
      fullCommits: full.sqlite?.commits ?? 0,
    };
    const beforeNormal = {
      durable: normal.sqlite?.durableWrites ?? 0,
      commits: normal.sqlite?.commits ?? 0,
    };
    const measuredFrom = { full: full.calls, normal: normal.calls };
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [off, full, normal, bare] : [bare, normal, full, off];
      for (const side of order) {
        await round(side, calls, true);
        await breathe();
      }
    }
    const perCall = (side: Side, from: number, durable: number, commits: number) => {
      const n = side.calls - from;
      return {
        durable: ((side.sqlite?.durableWrites ?? 0) - durable) / n,
        commits: ((side.sqlite?.commits ?? 0) - commits) / n,
      };
    };
    const fullWrites = perCall(full, measuredFrom.full, before.full, before.fullCommits);
    const normalWrites = perCall(
      normal,
      measuredFrom.normal,
      beforeNormal.durable,
      beforeNormal.commits,
    );
    const ratioTo = (base: Side) => (side: Side) =>
      side.roundMedians.map((m, i) => m / (base.roundMedians[i] as number));
    const ratio = ratioTo(off);
    const note = `stdio, one scripted child per side; ${rounds} interleaved rounds × ${calls} sequential calls per side (ratio of per-round median latencies). Every side but bare gives each call a fresh idempotency key; off = the default in-memory journal, full/normal = the SQLite journal; bare = no key at all.`;
    return [
      row(SUITE, 'seq latency, no key, no journal option (bare)', 'µs', bare.roundMedians),
      row(SUITE, 'seq latency, journal off (in memory)', 'µs', off.roundMedians),
      row(SUITE, "seq latency, SQLite synchronous 'full'", 'µs', full.roundMedians),
      row(SUITE, "seq latency, SQLite synchronous 'normal'", 'µs', normal.roundMedians),
      row(SUITE, "ratio SQLite 'full' / off", '×', ratio(full), {
        target: { op: '<=', value: 1.3 },
        note,
      }),
      row(SUITE, "ratio SQLite 'normal' / off", '×', ratio(normal), {
        target: { op: '<=', value: 1.3 },
      }),
      row(SUITE, "ratio SQLite 'full' / bare", '×', ratioTo(bare)(full)),
      row(SUITE, "ratio SQLite 'normal' / bare", '×', ratioTo(bare)(normal)),
      row(SUITE, 'ratio off (in-memory keys) / bare', '×', ratioTo(bare)(off)),
      row(SUITE, "durable (fsynced) writes per call, 'full'", 'writes', [fullWrites.durable]),
      row(SUITE, "commits per call, 'full'", 'commits', [fullWrites.commits]),
      row(SUITE, "durable (fsynced) writes per call, 'normal'", 'writes', [normalWrites.durable]),
      row(SUITE, "journal store time per call p50, 'full'", 'µs', [percentile(full.storeUs, 0.5)]),
      row(
        SUITE,
        "journal store time per call p99, 'full'",
        'µs',
        [percentile(full.storeUs, 0.99)],
        {
          note: 'Time spent inside the journal store per call: the latency the journal adds.',
        },
      ),
      row(SUITE, "journal store time per call p50, 'normal'", 'µs', [
        percentile(normal.storeUs, 0.5),
      ]),
      row(SUITE, "journal store time per call p99, 'normal'", 'µs', [
        percentile(normal.storeUs, 0.99),
      ]),
      row(SUITE, "p99 latency added, 'full' − off", 'µs', [
        percentile(full.latencies, 0.99) - percentile(off.latencies, 0.99),
      ]),
      row(SUITE, "p99 latency added, 'normal' − off", 'µs', [
        percentile(normal.latencies, 0.99) - percentile(off.latencies, 0.99),
      ]),
    ];
  } finally {
    for (const side of sides) await side.runtime.close();
    scratch.dispose();
  }
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/journal', () => runJournalBench());
}
