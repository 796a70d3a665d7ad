/**
 * `pnpm bench`: every benchmark suite in one process and one run, so that every ratio compares
 * stepbind with the bare SDK measured under the same conditions. Prints one table, writes
 * `bench/results/latest.json` and exits 0 whatever the verdicts; `--strict` exits 1 when a target is
 * missed. A suite that crashes, or a child process left alive, always exits 1.
 *
 * Usage: `pnpm bench [--strict] [suite...]` with suites among capture, call, hard-refresh,
 * enumerate, snapshot, journal, journal-floor, fleet, era, startup, search, resources, memory
 * (default: all; fleet needs PostgreSQL, see bench/fleet.ts; memory runs in a child process started
 * with `--expose-gc`).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCallBench } from './call.js';
import { runCaptureBench } from './capture.js';
import { runResourcesBench } from './resources.js';
import { runEnumerateBench } from './enumerate.js';
import { runEraBench } from './era.js';
import { runHardRefreshBench } from './hard-refresh.js';
import { runJournalBench } from './journal.js';
import { runJournalFloorBench } from './journal-floor.js';
import { runMemoryBench } from './memory.js';
import { runSearchBench } from './search.js';
import { runFleetBench } from './fleet.js';
import { runStartupBench } from './startup.js';
import { childCount, formatTable, liveChildren, row, type BenchRow } from './support.js';

/** The rows of bench/snapshot (owned by its own module), when that module offers its runner. */
async function snapshotRows(): Promise<BenchRow[]> {
  const mod = await import('./snapshot.js');
  if (typeof mod.runSnapshotBench !== 'function') return [];
  const r = await mod.runSnapshotBench();
  const n = r.runs;
  const suite = 'snapshot';
  return [
    row(suite, 'JSON.parse of the 10k-tool payload', 'ms', { ...r.jsonParseMs, n }),
    row(suite, 'snapshot, cold validator cache', 'ms', { ...r.snapshotMs, n }),
    row(
      suite,
      'ratio snapshot / JSON.parse',
      '×',
      { ...r.ratio, n },
      {
        target: { op: '<=', value: 5 },
        note: `bench/snapshot.ts: ${r.tools} tools in ${r.pages} pages, ${(r.payloadBytes / 1e6).toFixed(2)} MB, ${n} interleaved runs.`,
      },
    ),
    row(suite, 'snapshot, warm validator cache', 'ms', { ...r.warmSnapshotMs, n }),
    row(suite, 'first validate (lazy compile)', 'µs', [r.firstCallUs]),
    row(suite, 'second validate', 'µs', [r.secondCallUs]),
  ];
}

const SUITES: Readonly<Record<string, () => Promise<readonly BenchRow[]>>> = {
  capture: () => runCaptureBench(),
  call: () => runCallBench(),
  'hard-refresh': () => runHardRefreshBench(),
  enumerate: () => runEnumerateBench(),
  snapshot: snapshotRows,
  journal: () => runJournalBench(),
  'journal-floor': () => runJournalFloorBench(),
  fleet: () => runFleetBench(),
  era: () => runEraBench(),
  startup: () => runStartupBench(),
  search: () => runSearchBench(),
  resources: () => runResourcesBench(),
  memory: () => runMemoryBench(),
};

const args = process.argv.slice(2);
const strict = args.includes('--strict');
const wanted = args.filter((a) => !a.startsWith('--'));
const unknown = wanted.filter((name) => !(name in SUITES));
if (unknown.length > 0) {
  process.stderr.write(
    `unknown suite(s): ${unknown.join(', ')}; choose from ${Object.keys(SUITES).join(', ')}\n`,
  );
  process.exit(2);
}
const selected = wanted.length > 0 ? wanted : Object.keys(SUITES);

const startedAt = new Date();
const t0 = performance.now();
const rows: BenchRow[] = [];
const errors: { suite: string; message: string }[] = [];
const timings: Record<string, number> = {};
for (const name of selected) {
  const suite = SUITES[name];
  if (suite === undefined) continue;
  process.stderr.write(`bench: ${name}…\n`);
  const started = performance.now();
  try {
    rows.push(...(await suite()));
  } catch (error) {
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    errors.push({ suite: name, message });
    process.stderr.write(`bench: ${name} failed: ${message}\n`);
  }
  timings[name] = (performance.now() - started) / 1000;
}
const alive = await liveChildren();
const seconds = (performance.now() - t0) / 1000;

const cpu = cpus()[0]?.model ?? 'unknown CPU';
process.stdout.write(
  `stepbind benchmarks — ${startedAt.toISOString()}, Node ${process.version}, ${cpus().length} × ${cpu}, ${seconds.toFixed(0)} s (${Object.entries(
    timings,
  )
    .map(([name, s]) => `${name} ${s.toFixed(0)} s`)
    .join(', ')})\n` +
    'Ratios are stepbind / bare SDK v1 measured in this run, interleaved; verdicts judge the median.\n\n' +
    `${formatTable(rows)}\n\n`,
);
const missed = rows.filter((r) => r.verdict === 'MISS');
process.stdout.write(
  `${rows.filter((r) => r.verdict === 'pass').length} target(s) met, ${missed.length} missed${
    missed.length > 0 ? `: ${missed.map((r) => `${r.suite}/${r.metric}`).join('; ')}` : ''
  }. Child processes started: ${childCount()}, still alive: ${alive.length}.\n`,
);

const resultsPath = join(dirname(fileURLToPath(import.meta.url)), 'results', 'latest.json');
mkdirSync(dirname(resultsPath), { recursive: true });
writeFileSync(
  resultsPath,
  `${JSON.stringify(
    {
      startedAt: startedAt.toISOString(),
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      cpus: cpus().length,
      cpuModel: cpu,
      seconds,
      suiteSeconds: timings,
      strict,
      rows,
      errors,
      childProcesses: { started: childCount(), alive },
    },
    null,
    2,
  )}\n`,
);
process.stdout.write(`Results: ${resultsPath}\n`);

if (errors.length > 0 || alive.length > 0 || (strict && missed.length > 0)) process.exitCode = 1;
