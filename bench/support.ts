/**
 * Shared pieces of the benchmark suites: statistics, result rows and the printed table, catalog
 * fixtures, CPU accounting and bookkeeping of the child processes a suite started.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isProcessAlive, type ServerFixture } from '@stepbind/testkit';

/** min, median and max of a sample. */
export interface Spread {
  readonly min: number;
  readonly median: number;
  readonly max: number;
  readonly n: number;
}

/** The distribution of `values` (the median of an even sample is the mean of the middle two). */
export function spread(values: readonly number[]): Spread {
  if (values.length === 0) return { min: NaN, median: NaN, max: NaN, n: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median =
    sorted.length % 2 === 1
      ? (sorted[mid] as number)
      : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return {
    min: sorted[0] as number,
    median,
    max: sorted[sorted.length - 1] as number,
    n: sorted.length,
  };
}

/** The median of `values`. */
export const median = (values: readonly number[]): number => spread(values).median;

/** A target the median of a row must meet. */
export interface Target {
  readonly op: '<=' | '>=';
  readonly value: number;
}

/** One line of the results table. */
export interface BenchRow {
  readonly suite: string;
  readonly metric: string;
  readonly unit: string;
  readonly min: number;
  readonly median: number;
  readonly max: number;
  /** Sample size behind min/median/max (rounds, refreshes...). */
  readonly n: number;
  readonly target?: Target;
  /** `pass`/`MISS` against the target (judged on the median), `info` without one. */
  readonly verdict: 'pass' | 'MISS' | 'info';
  readonly note?: string;
}

/** Builds a row from a sample; the verdict is judged on the median. */
export function row(
  suite: string,
  metric: string,
  unit: string,
  sample: Spread | readonly number[],
  options: { readonly target?: Target; readonly note?: string } = {},
): BenchRow {
  const s = Array.isArray(sample) ? spread(sample) : (sample as Spread);
  const target = options.target;
  const verdict =
    target === undefined
      ? 'info'
      : (target.op === '<=' ? s.median <= target.value : s.median >= target.value)
        ? 'pass'
        : 'MISS';
  return {
    suite,
    metric,
    unit,
    min: s.min,
    median: s.median,
    max: s.max,
    n: s.n,
    ...(target === undefined ? {} : { target }),
    verdict,
    ...(options.note === undefined ? {} : { note: options.note }),
  };
}

function num(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1000) return value.toFixed(0);
  if (abs >= 100) return value.toFixed(1);
  if (abs >= 10) return value.toFixed(2);
  return value.toFixed(3);
}

/** Renders rows as a fixed-width table (notes follow below it, numbered). */
export function formatTable(rows: readonly BenchRow[]): string {
  const header = ['suite', 'metric', 'min – median – max', 'unit', 'n', 'target', 'verdict'];
  const notes: string[] = [];
  const body = rows.map((r) => {
    let metric = r.metric;
    if (r.note !== undefined) {
      notes.push(r.note);
      metric += ` [${notes.length}]`;
    }
    return [
      r.suite,
      metric,
      `${num(r.min)} – ${num(r.median)} – ${num(r.max)}`,
      r.unit,
      String(r.n),
      r.target === undefined ? '' : `${r.target.op} ${r.target.value}`,
      r.verdict,
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => cells[i]!.length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join(' | ')
      .trimEnd();
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('-|-'), ...body.map(line)];
  if (notes.length > 0) {
    out.push('');
    notes.forEach((note, i) => out.push(`[${i + 1}] ${note}`));
  }
  return out.join('\n');
}

/** Process CPU time (user + system) in microseconds: this process only, never a child. */
export function cpuMicros(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

/** Lets timers, I/O and pending callbacks run (and GC settle) between measured batches. */
export function breathe(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Sleeps without holding the process open. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * A tool definition of a realistic shape: a description, a 3–4 property input schema that differs
 * per tool, read-only/destructive annotations, and an output schema on one tool in ten.
 */
export function benchTool(n: number): Record<string, unknown> {
  return {
    name: `tool_${n}`,
    title: `Tool ${n}`,
    description: `Runs operation ${n} against the workspace and returns a short summary of what changed.`,
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: `Search text for tool ${n}.`, maxLength: 200 },
        limit: { type: 'integer', minimum: 1, maximum: 1000, default: 20 },
        mode: { type: 'string', enum: ['fast', 'exact', `m${n}`] },
        ...(n % 4 === 0 ? { path: { type: 'string' } } : {}),
      },
      required: ['query'],
    },
    ...(n % 10 === 0
      ? {
          outputSchema: {
            type: 'object',
            properties: { summary: { type: 'string' }, changed: { type: 'integer' } },
          },
        }
      : {}),
    annotations: { readOnlyHint: n % 2 === 0, destructiveHint: n % 7 === 0 },
  };
}

/** A one-generation fixture of `tools` tool definitions split evenly over `pages` pages. */
export function catalogFixture(
  tools: number,
  pages: number,
  make: (n: number) => Record<string, unknown> = benchTool,
): ServerFixture {
  const perPage = Math.ceil(tools / pages);
  const out: { tools: Record<string, unknown>[] }[] = [];
  for (let p = 0; p < pages; p++) {
    const list: Record<string, unknown>[] = [];
    for (let n = p * perPage; n < Math.min(tools, (p + 1) * perPage); n++) list.push(make(n));
    out.push({ tools: list });
  }
  return { generations: [{ pages: out }] };
}

/** A temp directory for fixture files, removed by {@link Scratch.dispose}. */
export class Scratch {
  readonly dir = mkdtempSync(join(tmpdir(), 'stepbind-bench-'));

  /** Writes `value` as JSON into the directory and returns the file's path. */
  writeJson(name: string, value: unknown): string {
    const path = join(this.dir, name);
    writeFileSync(path, JSON.stringify(value));
    return path;
  }

  /** The path of `name` inside the directory. */
  path(name: string): string {
    return join(this.dir, name);
  }

  /** Size of a file in bytes. */
  sizeOf(path: string): number {
    return statSync(path).size;
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Pids of every child process the benchmarks started, to prove none outlives the run. */
const childPids = new Set<number>();

/** Records a child process started by a suite. */
export function trackChild(pid: number | null | undefined): void {
  if (typeof pid === 'number') childPids.add(pid);
}

/** Children recorded with {@link trackChild} that are still alive (polls up to `waitMs`). */
export async function liveChildren(waitMs = 2000): Promise<number[]> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const alive = [...childPids].filter((pid) => isProcessAlive(pid));
    if (alive.length === 0 || performance.now() > deadline) return alive;
    await sleep(20);
  }
}

/** Number of children recorded so far. */
export const childCount = (): number => childPids.size;

/** True when the module at `url` is the script node was started with. */
export function isMain(url: string): boolean {
  const script = process.argv[1];
  return script !== undefined && url === pathToFileURL(script).href;
}

/** Runs one suite as a script: prints its table; `--strict` makes a missed target exit 1. */
export async function runStandalone(
  title: string,
  suite: () => Promise<readonly BenchRow[]>,
): Promise<void> {
  const started = performance.now();
  const rows = await suite();
  const alive = await liveChildren();
  process.stdout.write(
    `${title} (${((performance.now() - started) / 1000).toFixed(1)} s, Node ${process.version})\n\n${formatTable(rows)}\n`,
  );
  if (alive.length > 0) {
    process.stdout.write(`child processes still alive: ${alive.join(', ')}\n`);
    process.exitCode = 1;
  }
  if (process.argv.includes('--strict') && rows.some((r) => r.verdict === 'MISS')) {
    process.exitCode = 1;
  }
}
