/**
 * bench/snapshot: build a snapshot of 10,000 tools in 100 pages (validation, digests, model names)
 * and report its time as a ratio to `JSON.parse` of the same payload, interleaved in one run.
 * Also reports the first call of a tool whose validator compiles lazily.
 *
 * Run: `npx tsx bench/snapshot.ts`. Target: median ratio ≤ 5.
 *
 * Method: each run times `JSON.parse` of the payload, then a snapshot built from a fresh parse
 * with a new validator cache (cold), then one from another fresh parse with the previous run's
 * cache (warm). Every snapshot input is freshly parsed, so a build also pays for promoting its
 * input out of the young generation, as it would after a real `tools/list`. Wall time is the
 * headline; CPU time (`process.cpuUsage`, every thread of the process, GC helpers included) and the
 * GC pauses that fall inside each build are reported beside it.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import {
  SchemaValidatorCache,
  createCatalogSnapshot,
  type CatalogSnapshot,
} from '@stepbind/binding/internal';

/** Summary of one distribution, in milliseconds (or a plain ratio). */
export interface Spread {
  readonly min: number;
  readonly median: number;
  readonly max: number;
}

/** What {@link runSnapshotBench} measures. */
export interface Result {
  readonly tools: number;
  readonly pages: number;
  readonly payloadBytes: number;
  readonly runs: number;
  readonly jsonParseMs: Spread;
  /** Cold: a fresh validator cache per run (every distinct schema checked). */
  readonly snapshotMs: Spread;
  /** `snapshotMs / jsonParseMs` per interleaved pair. */
  readonly ratio: Spread;
  /** Warm: the cache of the previous run (a refresh of the same catalog). */
  readonly warmSnapshotMs: Spread;
  /** CPU time of the same `JSON.parse` calls and cold builds, and their ratio per pair. */
  readonly jsonParseCpuMs: Spread;
  readonly snapshotCpuMs: Spread;
  readonly cpuRatio: Spread;
  /** GC pauses that started inside each cold build (part of `snapshotMs`). */
  readonly snapshotGcMs: Spread;
  /**
   * First `validate` of a tool whose validator compiles lazily, in a fresh cache (builds the
   * cache's Ajv instance, then compiles), median over runs, in microseconds.
   */
  readonly firstCallUs: number;
  readonly firstCallUsSpread: Spread;
  /** First `validate` of a second schema in the same cache (compile only), in microseconds. */
  readonly firstCallSameCacheUs: Spread;
  /** Second `validate` of the first tool (compiled), median over runs, in microseconds. */
  readonly secondCallUs: number;
}

const TOOLS = 10_000;
const PAGES = 100;

function makePayload(): string {
  const shared = Array.from({ length: 20 }, (_, k) => ({
    type: 'object',
    properties: {
      path: { type: 'string', description: 'Path of the file, relative to the workspace root.' },
      recursive: { type: 'boolean', default: false },
      [`option_${k}`]: { type: 'integer', minimum: 0, maximum: 100 },
    },
    required: ['path'],
    additionalProperties: false,
  }));
  const pages = [];
  for (let p = 0; p < PAGES; p++) {
    const tools = [];
    for (let i = 0; i < TOOLS / PAGES; i++) {
      const n = p * (TOOLS / PAGES) + i;
      // ~20% of tools share one of 20 schemas; the rest have their own.
      const inputSchema =
        n % 5 === 0
          ? shared[n % 20]
          : {
              type: 'object',
              properties: {
                query: {
                  type: 'string',
                  description: `Search text for tool ${n}.`,
                  maxLength: 200,
                },
                limit: { type: 'integer', minimum: 1, maximum: 1000, default: 20 },
                mode: { type: 'string', enum: ['fast', 'exact', `m${n}`] },
              },
              required: ['query'],
            };
      tools.push({
        name: `tool_${n}.run`,
        title: `Tool ${n}`,
        description: `Runs operation ${n} against the workspace and returns a short summary of what changed.`,
        inputSchema,
        ...(n % 3 === 0
          ? { outputSchema: { type: 'object', properties: { summary: { type: 'string' } } } }
          : {}),
        annotations: { readOnlyHint: n % 2 === 0, destructiveHint: n % 7 === 0 },
      });
    }
    pages.push({ tools, nextCursor: p + 1 < PAGES ? `c${p + 1}` : undefined });
  }
  return JSON.stringify(pages);
}

function spread(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    min: sorted[0] ?? NaN,
    median: sorted[Math.floor(sorted.length / 2)] ?? NaN,
    max: sorted[sorted.length - 1] ?? NaN,
  };
}

function build(pages: readonly (readonly unknown[])[], cache: SchemaValidatorCache) {
  return createCatalogSnapshot({
    identity: { name: 'bench', transportDigest: 'sha256:bench' },
    audience: 'default',
    policyEpoch: 0,
    pages,
    revisionProof: 'unversioned',
    discoveryStartedAt: Date.now(),
    validatorCache: cache,
  });
}

/** Wall and CPU milliseconds of `fn`, and the window it ran in (for GC attribution). */
function measure<T>(fn: () => T): { value: T; ms: number; cpuMs: number; start: number } {
  const cpu = process.cpuUsage();
  const start = performance.now();
  const value = fn();
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { value, ms, cpuMs: (used.user + used.system) / 1000, start };
}

/** Microseconds of the first `validate` of `tools[index]`, which must not be compiled yet. */
function firstValidateUs(snapshot: CatalogSnapshot, index: number, args: unknown): number {
  const validator = snapshot.tools[index]?.inputValidator();
  if (validator === undefined) throw new Error(`no tool #${index}`);
  if (validator.compiled) throw new Error(`tool #${index} is already compiled: not a lazy compile`);
  const t = performance.now();
  validator.validate(args);
  return (performance.now() - t) * 1000;
}

/** Run the benchmark: `runs` interleaved rounds of JSON.parse, a cold and a warm snapshot build. */
export async function runSnapshotBench(runs = 7): Promise<Result> {
  const payload = makePayload();
  const parse = (): { tools: unknown[] }[] => JSON.parse(payload) as { tools: unknown[] }[];
  // Warm-up: JIT both paths once (and the validator compiler).
  const warmUp = build(
    parse().map((p) => p.tools),
    new SchemaValidatorCache(),
  );
  warmUp.tools[3]?.inputValidator().validate({ query: 'x' });

  const gcPauses: { start: number; duration: number }[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauses.push({ start: e.startTime, duration: e.duration });
  });
  observer.observe({ entryTypes: ['gc'] });

  const parseMs: number[] = [];
  const parseCpuMs: number[] = [];
  const snapMs: number[] = [];
  const snapCpuMs: number[] = [];
  const windows: { start: number; end: number }[] = [];
  const warmMs: number[] = [];
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  const firstUs: number[] = [];
  const firstSameCacheUs: number[] = [];
  const secondUs: number[] = [];
  let warmCache = new SchemaValidatorCache();
  for (let r = 0; r < runs; r++) {
    // The timed parse's result is dropped at once, as before: only the builds keep a payload alive.
    const p = measure(() => {
      parse();
    });
    const pages = parse().map((x) => x.tools);
    const cache = new SchemaValidatorCache();
    const cold = measure(() => build(pages, cache));
    const again = parse().map((x) => x.tools);
    const warm = measure(() => build(again, warmCache));
    // Lazy compiles, outside the timed builds: tools 1 and 2 have schemas of their own.
    firstUs.push(firstValidateUs(cold.value, 1, { query: 'x', limit: 5 }));
    firstSameCacheUs.push(firstValidateUs(cold.value, 2, { query: 'x', limit: 5 }));
    const t = performance.now();
    cold.value.tools[1]?.inputValidator().validate({ query: 'y', limit: 6 });
    secondUs.push((performance.now() - t) * 1000);

    warmCache = cache;
    parseMs.push(p.ms);
    parseCpuMs.push(p.cpuMs);
    snapMs.push(cold.ms);
    snapCpuMs.push(cold.cpuMs);
    windows.push({ start: cold.start, end: cold.start + cold.ms });
    warmMs.push(warm.ms);
    ratios.push(cold.ms / p.ms);
    cpuRatios.push(cold.cpuMs / p.cpuMs);
    await new Promise((resolve) => setImmediate(resolve));
  }
  // GC entries are delivered asynchronously; let the last ones arrive.
  await new Promise((resolve) => setTimeout(resolve, 20));
  observer.disconnect();
  const gcMs = windows.map((w) =>
    gcPauses
      .filter((g) => g.start >= w.start && g.start < w.end)
      .reduce((sum, g) => sum + g.duration, 0),
  );

  return {
    tools: TOOLS,
    pages: PAGES,
    payloadBytes: Buffer.byteLength(payload),
    runs,
    jsonParseMs: spread(parseMs),
    snapshotMs: spread(snapMs),
    ratio: spread(ratios),
    warmSnapshotMs: spread(warmMs),
    jsonParseCpuMs: spread(parseCpuMs),
    snapshotCpuMs: spread(snapCpuMs),
    cpuRatio: spread(cpuRatios),
    snapshotGcMs: spread(gcMs),
    firstCallUs: spread(firstUs).median,
    firstCallUsSpread: spread(firstUs),
    firstCallSameCacheUs: spread(firstSameCacheUs),
    secondCallUs: spread(secondUs).median,
  };
}

const fmt = (s: Spread, digits = 1): string =>
  `${s.min.toFixed(digits)} / ${s.median.toFixed(digits)} / ${s.max.toFixed(digits)}`;

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await runSnapshotBench();
  console.log(
    `snapshot bench: ${r.tools} tools in ${r.pages} pages, ${(r.payloadBytes / 1e6).toFixed(2)} MB, ${r.runs} interleaved runs (min / median / max)`,
  );
  console.log(`  JSON.parse            ${fmt(r.jsonParseMs)} ms   cpu ${fmt(r.jsonParseCpuMs)} ms`);
  console.log(`  snapshot (cold cache) ${fmt(r.snapshotMs)} ms   cpu ${fmt(r.snapshotCpuMs)} ms`);
  console.log(
    `  ratio snapshot/parse  ${fmt(r.ratio, 2)}  (target ≤ 5)   cpu ${fmt(r.cpuRatio, 2)}`,
  );
  console.log(`  snapshot (warm cache) ${fmt(r.warmSnapshotMs)} ms`);
  console.log(`  GC pauses in cold builds ${fmt(r.snapshotGcMs)} ms`);
  console.log(
    `  first call (lazy compile, fresh cache) ${fmt(r.firstCallUsSpread, 0)} µs; first call of another schema, same cache ${fmt(r.firstCallSameCacheUs, 0)} µs; second call ${r.secondCallUs.toFixed(1)} µs`,
  );
}
