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
 * Then 64 calls in flight (issue 20, DESIGN §21.1): throughput of keyed calls with the SQLite
 * journal (`full`, `normal`, and `full` with one commit per write: the store behind a queue that
 * lets one write in at a time, i.e. without group commit) against unkeyed calls, interleaved per
 * round; fsyncs per call; and one fsync of this machine, measured in the same run, for the
 * sequential target (`full` within 1.1× of an unkeyed call plus one fsync). A fifth side runs keyed
 * calls over a store that keeps nothing (bench/null-store.ts): the ceiling of any real store.
 *
 * Run alone: `npx tsx bench/journal.ts [--strict]`.
 */
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import type { JournalStore } from '@stepbind/binding';
import { McpRuntime, openSqliteJournal, type SqliteJournalStore } from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';
import { nullJournalStore } from './null-store.js';
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
  /** Interleaved rounds of the 64-in-flight half. @default 6 */
  readonly concurrentRounds?: number;
  /** Calls per side per round of the 64-in-flight half. @default 640 */
  readonly concurrentCalls?: number;
}

/**
 * Wraps a store to time every call made on it, and counts per-run totals. `oneAtATime`: its writes
 * enter the store one after another (each its own commit), as before group commit.
 */
function timed(
  store: SqliteJournalStore,
  oneAtATime = false,
): { store: JournalStore; spent: () => number } {
  let spent = 0;
  let queue: Promise<unknown> = Promise.resolve();
  const wrap =
    <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      const t = performance.now();
      try {
        if (!oneAtATime) return await fn(...a);
        const mine = queue.then(() => fn(...a));
        queue = mine.catch(() => undefined);
        return await mine;
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
  synchronous: 'full' | 'normal' | 'nothing' | undefined,
  keyed: boolean,
  oneAtATime = false,
): Promise<Side> {
  const params = stdioServerParams({ scenario: 'single' });
  const sqlite =
    synchronous === undefined || synchronous === 'nothing'
      ? undefined
      : openSqliteJournal({ path: scratch.path(`${name}.db`), synchronous });
  const timing = sqlite === undefined ? undefined : timed(sqlite, oneAtATime);
  // 'nothing': a store that keeps nothing (bench/null-store.ts), the ceiling of any real store.
  const store = synchronous === 'nothing' ? nullJournalStore() : timing?.store;
  const runtime = await McpRuntime.open(
    { mcpServers: { s: { command: params.command, args: params.args, approval: 'none' } } },
    store === undefined ? {} : { journal: { store } },
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

/** `total` calls with `inFlight` running at once; returns calls per second. */
async function concurrentRound(side: Side, total: number, inFlight: number): Promise<number> {
  await using step = await side.runtime.captureBinding();
  const call = step.prepareCall('s__alpha');
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < total) {
      next++;
      const key = side.keyed ? `${side.name}-${side.calls}` : undefined;
      side.calls++;
      await call.run(ARGS, key === undefined ? {} : { idempotencyKey: key });
    }
  };
  const t = performance.now();
  await Promise.all(Array.from({ length: inFlight }, lane));
  return total / ((performance.now() - t) / 1000);
}

/** Median time (µs) of one fsync of a 4 KiB write on this machine's scratch disk. */
function fsyncMicros(scratch: Scratch, samples = 200): number {
  const fd = openSync(scratch.path('fsync.probe'), 'w');
  const block = Buffer.alloc(4096, 1);
  const times: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      writeSync(fd, block, 0, block.length, (i % 16) * 4096);
      const t = performance.now();
      fsyncSync(fd);
      times.push((performance.now() - t) * 1000);
    }
  } finally {
    closeSync(fd);
  }
  return median(times);
}

/** The 64-in-flight half of the suite (issue 20): keyed throughput against unkeyed, interleaved. */
async function runConcurrent(
  scratch: Scratch,
  sides: Side[],
  rounds: number,
  total: number,
): Promise<BenchRow[]> {
  const IN_FLIGHT = 64;
  const bare = await openSide('c-bare', scratch, undefined, false);
  sides.push(bare);
  const full = await openSide('c-full', scratch, 'full', true);
  sides.push(full);
  const normal = await openSide('c-normal', scratch, 'normal', true);
  sides.push(normal);
  const serial = await openSide('c-full-serial', scratch, 'full', true, true);
  sides.push(serial);
  const nothing = await openSide('c-nothing', scratch, 'nothing', true);
  sides.push(nothing);
  const all = [bare, full, normal, serial, nothing];
  const rates = new Map<Side, number[]>(all.map((side) => [side, []]));
  for (const side of all) await concurrentRound(side, total, IN_FLIGHT);
  const fsyncsBefore = { full: full.sqlite?.fsyncs ?? 0, serial: serial.sqlite?.fsyncs ?? 0 };
  const callsBefore = { full: full.calls, serial: serial.calls };
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? all : [...all].reverse();
    for (const side of order) {
      rates.get(side)?.push(await concurrentRound(side, total, IN_FLIGHT));
      await breathe();
    }
  }
  const rate = (side: Side): number[] => rates.get(side) ?? [];
  const ratio = (side: Side): number[] => rate(side).map((v, i) => v / (rate(bare)[i] as number));
  const perCall = (side: Side, fsyncs: number, calls: number): number =>
    ((side.sqlite?.fsyncs ?? 0) - fsyncs) / (side.calls - calls);
  const note = `stdio, ${IN_FLIGHT} calls in flight, ${rounds} interleaved rounds × ${total} calls per side; keyed sides give each call a fresh key. "one commit per write": the same store with its writes let in one at a time (no group commit).`;
  return [
    row(SUITE, `${IN_FLIGHT} in flight, unkeyed (bare)`, 'calls/s', rate(bare)),
    row(SUITE, `${IN_FLIGHT} in flight, keyed, SQLite 'full'`, 'calls/s', rate(full)),
    row(SUITE, `${IN_FLIGHT} in flight, keyed, SQLite 'normal'`, 'calls/s', rate(normal)),
    row(
      SUITE,
      `${IN_FLIGHT} in flight, keyed, 'full', one commit per write`,
      'calls/s',
      rate(serial),
    ),
    row(SUITE, `${IN_FLIGHT} in flight ratio 'full' / unkeyed`, '×', ratio(full), {
      target: { op: '>=', value: 0.8 },
      note,
    }),
    row(SUITE, `${IN_FLIGHT} in flight ratio 'normal' / unkeyed`, '×', ratio(normal)),
    row(
      SUITE,
      `${IN_FLIGHT} in flight ratio keyed, store keeping nothing / unkeyed`,
      '×',
      ratio(nothing),
      {
        note: 'A store that keeps nothing (bench/null-store.ts): the journal rules and keyed call path alone, the ceiling of any real store.',
      },
    ),
    row(
      SUITE,
      `${IN_FLIGHT} in flight ratio 'full', one commit per write / unkeyed`,
      '×',
      ratio(serial),
    ),
    row(SUITE, `${IN_FLIGHT} in flight fsyncs per call, 'full'`, 'fsyncs', [
      perCall(full, fsyncsBefore.full, callsBefore.full),
    ]),
    row(SUITE, `${IN_FLIGHT} in flight fsyncs per call, 'full', one commit per write`, 'fsyncs', [
      perCall(serial, fsyncsBefore.serial, callsBefore.serial),
    ]),
    row(SUITE, `${IN_FLIGHT} in flight largest group, 'full'`, 'writes', [
      full.sqlite?.largestGroup ?? 0,
    ]),
  ];
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
    // One fsync of this machine, in this run: the floor of a durable keyed call's extra latency.
    const fsyncUs = fsyncMicros(scratch);
    const overFsync = full.roundMedians.map(
      (m, i) => m / ((bare.roundMedians[i] as number) + fsyncUs),
    );
    const concurrent = await runConcurrent(
      scratch,
      sides,
      options.concurrentRounds ?? 6,
      options.concurrentCalls ?? 640,
    );
    const sequential: BenchRow[] = [
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
      row(SUITE, "ratio SQLite 'normal' / bare", '×', ratioTo(bare)(normal), {
        target: { op: '<=', value: 1.15 },
      }),
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
      row(SUITE, 'one fsync of a 4 KiB write (this machine, this run)', 'µs', [fsyncUs]),
      row(SUITE, "ratio SQLite 'full' / (bare + one fsync)", '×', overFsync, {
        target: { op: '<=', value: 1.1 },
        note: 'Sequential: a durable keyed call against an unkeyed one plus the fsync it must wait for.',
      }),
    ];
    return [...sequential, ...concurrent];
  } finally {
    for (const side of sides) await side.runtime.close();
    scratch.dispose();
  }
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/journal', () => runJournalBench());
}
