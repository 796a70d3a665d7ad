/**
 * bench/memory: heap retained by what stepbind keeps (DESIGN §21.3), report only.
 *
 * - **Snapshot**: the heap one 10,000-tool snapshot (100 pages, `benchTool` schemas) retains after
 *   its input pages are dropped, against the byte length of the pages' JSON (target ≤ 3×) and
 *   against the heap of `JSON.parse` of the same JSON (the same-run baseline).
 * - **Hard refresh**: 200 hard refreshes of a 1,000-tool in-memory server, unchanged and changing
 *   (the server alternates between two generations that differ in one tool's description). Before
 *   each refresh a step is captured, one call made, and the step released. Heap after a forced GC
 *   at refresh 10, 100 and 200; the growth per refresh from 10 to 100 (V8 still warming up) and
 *   from 100 to 200 (target: none, ≤ 1 KB of noise).
 * - **Calls**: 100,000 unkeyed calls on one prepared call (in memory), and 100,000 keyed calls with
 *   a fresh key each on the default in-memory journal (capped at 10,000 records and receipts). Heap
 *   retained per call with the step held and after it is released (target ≤ 64 B), and for keyed
 *   calls below the cap (the first 10,000: the records themselves) and above it (calls 10,001 to
 *   100,000, which must not grow the heap).
 *
 * Heap figures are `process.memoryUsage().heapUsed` after `gc()` called until the heap stops
 * shrinking; the in-memory server shares the process, so its heap is counted too.
 *
 * Standalone: `node --expose-gc --import tsx bench/memory.ts [--strict]`. In `pnpm bench` (which
 * runs without `--expose-gc`) {@link runMemoryBench} runs this file in a child process that has it.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { getHeapSpaceStatistics } from 'node:v8';
import { SchemaValidatorCache, createCatalogSnapshot } from '@stepbind/binding/internal';
import { McpRuntime } from '@stepbind/runtime';
import { createInMemoryFleet, type AuditEntry, type ServerFixture } from '@stepbind/testkit';
import {
  catalogFixture,
  spread,
  isMain,
  row,
  runStandalone,
  trackChild,
  type BenchRow,
} from './support.js';

const SUITE = 'memory';
const SERVER = 'mem';
const ROWS_MARKER = 'memory-rows:';

/** Options of {@link runMemoryBench}. */
export interface MemoryBenchOptions {
  /** Tools of the snapshot measured. @default 10000 */
  readonly snapshotTools?: number;
  /** Snapshots built and measured one after another. @default 3 */
  readonly snapshotRuns?: number;
  /** Tools of the hard-refreshed catalog. @default 1000 */
  readonly refreshTools?: number;
  /** Hard refreshes per scenario. @default 100 */
  readonly refreshes?: number;
  /** Calls per call scenario. @default 100000 */
  readonly calls?: number;
}

type Gc = () => void;

/** Bytes used in V8's code spaces (machine code the JIT keeps adding while it warms up). */
function codeSpace(): number {
  return getHeapSpaceStatistics()
    .filter((s) => s.space_name.startsWith('code_'))
    .reduce((sum, s) => sum + s.space_used_size, 0);
}

/** Lets pending promise jobs and timers run, so released objects become unreachable. */
const turn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * `gc()` until the heap stops shrinking (at most 8 times), with a turn of the event loop between
 * collections so that FinalizationRegistry callbacks run (Node's `AbortSignal.timeout` clears its
 * timer in one when the signal is collected); returns `heapUsed`.
 */
async function settledHeap(gc: Gc): Promise<number> {
  let last = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 8; i++) {
    gc();
    await turn();
    const used = process.memoryUsage().heapUsed;
    if (used >= last - 1024) return used;
    last = used;
  }
  return last;
}

interface SnapshotSample {
  readonly jsonBytes: number;
  readonly parseHeap: number;
  readonly snapshotHeap: number;
}

/** Heap of `JSON.parse(json)` and of a snapshot built from a fresh parse, measured separately. */
async function snapshotSample(gc: Gc, pages: number, tools: number): Promise<SnapshotSample> {
  const fixture = catalogFixture(tools, pages);
  const json = JSON.stringify(fixture.generations[0]?.pages);
  const jsonBytes = Buffer.byteLength(json);

  // Held through properties, dropped by writes: this async frame keeps its locals alive.
  const held: { parsed?: unknown; input?: unknown[][] } = {};
  let base = await settledHeap(gc);
  held.parsed = JSON.parse(json);
  const parseHeap = (await settledHeap(gc)) - base;
  held.parsed = undefined;

  base = await settledHeap(gc);
  held.input = (JSON.parse(json) as { tools: unknown[] }[]).map((p) => p.tools);
  const snapshot = createCatalogSnapshot({
    identity: { name: 'bench', transportDigest: 'sha256:bench' },
    audience: 'default',
    policyEpoch: 0,
    pages: held.input,
    revisionProof: 'unversioned',
    discoveryStartedAt: Date.now(),
    validatorCache: new SchemaValidatorCache(),
  });
  held.input = undefined;
  const snapshotHeap = (await settledHeap(gc)) - base;
  if (snapshot.tools.length !== tools) throw new Error(`snapshot has ${snapshot.tools.length}`);
  return { jsonBytes, parseHeap, snapshotHeap };
}

/** Two generations of `tools` tools; generation 1 rewords the description of the last tool. */
function refreshFixture(tools: number, pages: number): ServerFixture {
  const base = catalogFixture(tools, pages).generations[0]?.pages as {
    tools: Record<string, unknown>[];
  }[];
  const last = base[base.length - 1] as { tools: Record<string, unknown>[] };
  const reworded = { ...last.tools.at(-1), description: 'Reworded in generation 1.' };
  const changed = [...base.slice(0, -1), { tools: [...last.tools.slice(0, -1), reworded] }];
  return { generations: [{ pages: base }, { pages: changed }] };
}

interface RefreshSample {
  /** Heap after GC at refresh 10, `refreshes` and `2 × refreshes`. */
  readonly at10: number;
  readonly atN: number;
  readonly at2N: number;
  /** Growth per refresh from refresh 10 to `refreshes` (V8 still compiling: code, feedback). */
  readonly perRefresh: number;
  /** Growth per refresh over the next `refreshes` refreshes. */
  readonly perRefreshAfter: number;
  /** The part of {@link perRefreshAfter} in V8's code spaces. */
  readonly codePerRefreshAfter: number;
  readonly swaps: number;
}

/** `2 × refreshes` hard refreshes, each after a captured, used and released step. */
async function refreshScenario(
  gc: Gc,
  tools: number,
  refreshes: number,
  changing: boolean,
): Promise<RefreshSample> {
  const fleet = createInMemoryFleet({
    [SERVER]: { scenario: 'fixture', fixture: refreshFixture(tools, Math.ceil(tools / 100)) },
  });
  let runtime: McpRuntime | undefined;
  try {
    runtime = await McpRuntime.open(fleet.config(), { connect: fleet.connect, approval: 'none' });
    const server = fleet.server(SERVER);
    const marks = new Map<number, number>();
    const codeMarks = new Map<number, number>();
    let swaps = 0;
    for (let i = 1; i <= 2 * refreshes; i++) {
      const binding = await runtime.captureBinding();
      const tool = binding.tools.find((t) => t.name.endsWith('__tool_1'));
      if (tool === undefined) throw new Error('no tool_1 in the catalog');
      await binding.prepareCall(tool.name).run({ query: 'status' });
      binding.release();
      if (changing) server.setGeneration(1 - server.generation);
      if (await runtime.hardRefresh(SERVER)) swaps++;
      (server.audit as AuditEntry[]).length = 0; // the server's own trail, see callScenario
      if (i === 10 || i === refreshes || i === 2 * refreshes) {
        const heap = await settledHeap(gc);
        marks.set(i, heap);
        codeMarks.set(i, codeSpace());
      }
    }
    const at10 = marks.get(10) ?? NaN;
    const atN = marks.get(refreshes) ?? NaN;
    const at2N = marks.get(2 * refreshes) ?? NaN;
    return {
      at10,
      atN,
      at2N,
      perRefresh: (atN - at10) / (refreshes - 10),
      perRefreshAfter: (at2N - atN) / refreshes,
      codePerRefreshAfter:
        ((codeMarks.get(2 * refreshes) ?? NaN) - (codeMarks.get(refreshes) ?? NaN)) / refreshes,
      swaps,
    };
  } finally {
    await runtime?.close();
    await fleet.close();
  }
}

interface CallSample {
  /** Bytes per call with the step still held. */
  readonly held: number;
  /** Bytes per call after the step is released. */
  readonly released: number;
  /** Keyed only: bytes per call over the first `cap` calls, and over the rest. */
  readonly belowCap?: number;
  readonly aboveCap?: number;
}

/**
 * `calls` calls on one prepared call; keyed ones carry a fresh idempotency key each. Keyed calls
 * are also measured at the cap (`cap` calls: the journal full) and at `2 × cap`: the in-memory
 * journal sweeps down to 90 % of its cap whenever it goes over, so the heap above the cap is compared
 * between two points in the same phase of that cycle (multiples of `cap / 10` calls past it).
 */
async function callScenario(
  gc: Gc,
  calls: number,
  keyed: boolean,
  yieldEvery = 0,
  cap = 10_000,
): Promise<CallSample> {
  const fleet = createInMemoryFleet({ [SERVER]: { scenario: 'single' } });
  let runtime: McpRuntime | undefined;
  try {
    runtime = await McpRuntime.open(fleet.config(), { connect: fleet.connect, approval: 'none' });
    let binding: Awaited<ReturnType<McpRuntime['captureBinding']>> | undefined =
      await runtime.captureBinding();
    const tool = binding.tools.find((t) => t.name.endsWith('__alpha'));
    if (tool === undefined) throw new Error('no alpha tool in the single scenario');
    const call = binding.prepareCall(tool.name);
    const args = { input: 'hello' };
    // The scripted server keeps an audit entry per message it receives (it shares this process);
    // emptied as the calls go, so that only what the client side keeps is measured.
    const audit = fleet.server(SERVER).audit as AuditEntry[];
    const measureHeap = async (): Promise<number> => {
      await turn();
      audit.length = 0;
      return await settledHeap(gc);
    };
    // Warm-up outside the measurement: JIT, lazy validator compile, first-use caches.
    for (let i = 0; i < 1000; i++) await call.run(args);
    const before = await measureHeap();
    const marks = new Map<number, number>();
    for (let i = 1; i <= calls; i++) {
      await call.run(args, keyed ? { idempotencyKey: `turn-${i}:call_${i}` } : {});
      if (audit.length >= 1000) audit.length = 0;
      if (yieldEvery > 0 && i % yieldEvery === 0) await turn();
      if (keyed && (i === cap || i === 2 * cap)) marks.set(i, await measureHeap());
    }
    const held = await measureHeap();
    binding.release();
    binding = undefined;
    const released = await measureHeap();
    const atCap = marks.get(cap) ?? NaN;
    return {
      held: (held - before) / calls,
      released: (released - before) / calls,
      ...(keyed
        ? {
            belowCap: (atCap - before) / cap,
            aboveCap:
              calls > 2 * cap ? (held - (marks.get(2 * cap) ?? NaN)) / (calls - 2 * cap) : NaN,
          }
        : {}),
    };
  } finally {
    await runtime?.close();
    await fleet.close();
  }
}

/** Runs the suite in this process; needs `gc` (node `--expose-gc`). */
async function measure(gc: Gc, options: MemoryBenchOptions): Promise<BenchRow[]> {
  const env = (name: string): number | undefined =>
    process.env[name] === undefined ? undefined : Number(process.env[name]);
  const tools = options.snapshotTools ?? env('MEMORY_BENCH_TOOLS') ?? 10_000;
  const runs = options.snapshotRuns ?? 3;
  const refreshTools = options.refreshTools ?? 1000;
  const refreshes = options.refreshes ?? env('MEMORY_BENCH_REFRESHES') ?? 100;
  const calls = options.calls ?? env('MEMORY_BENCH_CALLS') ?? 100_000;

  const snaps: SnapshotSample[] = [];
  for (let r = 0; r < runs; r++)
    snaps.push(await snapshotSample(gc, Math.ceil(tools / 100), tools));
  const jsonBytes = snaps[0]?.jsonBytes ?? NaN;
  const snapshotPerTool = spread(snaps.map((x) => x.snapshotHeap / tools)).median;
  const unchanged = await refreshScenario(gc, refreshTools, refreshes, false);
  const changing = await refreshScenario(gc, refreshTools, refreshes, true);
  const unkeyed = await callScenario(gc, calls, false);
  const keyed = await callScenario(gc, calls, true);
  const keyedYielding = await callScenario(gc, calls, true, 1000);

  const kb = (b: number): string => `${(b / 1024).toFixed(0)} KB`;
  return [
    row(
      SUITE,
      'snapshot heap / tool JSON bytes',
      '×',
      snaps.map((s) => s.snapshotHeap / s.jsonBytes),
      {
        target: { op: '<=', value: 3 },
        note: `${tools} tools in ${Math.ceil(tools / 100)} pages (benchTool schemas), ${(jsonBytes / 1e6).toFixed(2)} MB of JSON; heap retained by the snapshot (validator cache included, nothing compiled) after its input pages are dropped, ${runs} builds.`,
      },
    ),
    row(
      SUITE,
      'snapshot heap / JSON.parse heap',
      '×',
      snaps.map((s) => s.snapshotHeap / s.parseHeap),
    ),
    row(
      SUITE,
      'snapshot heap per tool',
      'B',
      snaps.map((s) => s.snapshotHeap / tools),
    ),
    row(
      SUITE,
      'JSON.parse heap per tool',
      'B',
      snaps.map((s) => s.parseHeap / tools),
    ),
    ...(
      [
        ['unchanged', unchanged, ''],
        ['changing', changing, ", one tool's description edited before each refresh"],
      ] as const
    ).flatMap(([label, r, how]) => [
      row(
        SUITE,
        `${label} catalog: heap growth per hard refresh, refreshes 10 to ${refreshes}`,
        'B',
        [r.perRefresh],
        {
          note: `${2 * refreshes} hard refreshes of a ${refreshTools}-tool in-memory catalog${how}, each after a captured, used and released step; ${r.swaps} swapped the catalog. Heap after GC at refresh 10: ${kb(r.at10)}, at ${refreshes}: ${kb(r.atN)}, at ${2 * refreshes}: ${kb(r.at2N)}. Early growth is V8 warming up (code, feedback vectors, hidden classes; see DESIGN §21.3).`,
        },
      ),
      row(
        SUITE,
        `${label} catalog: heap growth per hard refresh, refreshes ${refreshes} to ${2 * refreshes}`,
        'B',
        [r.perRefreshAfter],
        {
          note: `of which ${r.codePerRefreshAfter.toFixed(0)} B per refresh in V8's code spaces.`,
        },
      ),
      row(
        SUITE,
        `${label} catalog: heap growth per hard refresh / one snapshot's heap, refreshes ${refreshes} to ${2 * refreshes}`,
        '×',
        [r.perRefreshAfter / (snapshotPerTool * refreshTools)],
        {
          target: { op: '<=', value: 0.01 },
          note: `one ${refreshTools}-tool snapshot ≈ ${kb(snapshotPerTool * refreshTools)} (the median heap per tool above); a snapshot kept per refresh would read 1. Exact retention is checked by packages/runtime/test/memory-retention.test.ts.`,
        },
      ),
    ]),
    row(SUITE, 'unkeyed calls: retained per call, step held', 'B', [unkeyed.held], {
      target: { op: '<=', value: 64 },
      note: `${calls} sequential unkeyed calls on one prepared call, in-memory server in this process.`,
    }),
    row(SUITE, 'unkeyed calls: retained per call, step released', 'B', [unkeyed.released], {
      target: { op: '<=', value: 64 },
    }),
    row(
      SUITE,
      'keyed calls: retained per call below the journal cap',
      'B',
      [keyed.belowCap ?? NaN],
      {
        note: `${calls} keyed calls (a fresh key each) on the default in-memory journal, capped at 10,000 records and receipts: the first 10,000 calls are kept by design; above the cap: the heap growth from call 20,000 to the last, divided by the calls. The in-memory loop never yields to the event loop, so Node's AbortSignal.timeout timers (two per keyed call, cleared by a FinalizationRegistry callback once the signal is collected) wait until it does.`,
      },
    ),
    row(
      SUITE,
      'keyed calls: retained per call above the journal cap',
      'B',
      [keyed.aboveCap ?? NaN],
      { target: { op: '<=', value: 64 } },
    ),
    row(SUITE, 'keyed calls: retained per call, step held', 'B', [keyed.held]),
    row(SUITE, 'keyed calls: retained per call, step released', 'B', [keyed.released]),
    row(
      SUITE,
      'keyed calls, yielding: retained per call above the journal cap',
      'B',
      [keyedYielding.aboveCap ?? NaN],
      {
        target: { op: '<=', value: 64 },
        note: 'The same keyed calls with a turn of the event loop every 1,000 calls (as any I/O gives a real transport), so that finalization callbacks run.',
      },
    ),
    row(SUITE, 'keyed calls, yielding: retained per call below the journal cap', 'B', [
      keyedYielding.belowCap ?? NaN,
    ]),
    row(SUITE, 'keyed calls, yielding: retained per call, step released', 'B', [
      keyedYielding.released,
    ]),
  ];
}

/** Runs this file under `node --expose-gc --import tsx` and returns the rows it prints. */
function inChild(): Promise<BenchRow[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), '--rows'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    trackChild(child.pid);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = out.split('\n').find((l) => l.startsWith(ROWS_MARKER));
      if (code !== 0 || line === undefined) {
        reject(new Error(`bench/memory child exited ${code}: ${out.slice(-2000)}`));
        return;
      }
      resolve(JSON.parse(line.slice(ROWS_MARKER.length)) as BenchRow[]);
    });
  });
}

/**
 * Runs the suite and returns its rows: in this process when it has `gc` (`--expose-gc`), else in a
 * child process started with it.
 */
export async function runMemoryBench(options: MemoryBenchOptions = {}): Promise<BenchRow[]> {
  const gc = (globalThis as { gc?: Gc }).gc;
  if (gc === undefined) return inChild();
  return measure(gc, options);
}

if (isMain(import.meta.url)) {
  if (process.argv.includes('--rows')) {
    const rows = await runMemoryBench();
    process.stdout.write(`${ROWS_MARKER}${JSON.stringify(rows)}\n`);
  } else {
    await runStandalone('bench/memory', () => runMemoryBench());
  }
}
