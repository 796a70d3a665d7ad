/**
 * bench/snapshot: build a snapshot of 10,000 tools in 100 pages (validation, digests, model names)
 * and report its time as a ratio to `JSON.parse` of the same payload, interleaved in one run.
 * Also reports the first call of a tool whose validator compiles lazily.
 *
 * Run: `npx tsx bench/snapshot.ts`. Target: median ratio ≤ 5.
 */
import { pathToFileURL } from 'node:url';
import { SchemaValidatorCache, createCatalogSnapshot } from '@stepbind/binding';

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
  /** First `validate` of a tool (lazy Ajv compile) and a second call, in microseconds. */
  readonly firstCallUs: number;
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

/** Run the benchmark: `runs` interleaved pairs of JSON.parse and a cold snapshot build. */
export async function runSnapshotBench(runs = 7): Promise<Result> {
  const payload = makePayload();
  const parse = (): { tools: unknown[] }[] => JSON.parse(payload) as { tools: unknown[] }[];
  // Warm-up: JIT both paths once.
  build(
    parse().map((p) => p.tools),
    new SchemaValidatorCache(),
  );

  const parseMs: number[] = [];
  const snapMs: number[] = [];
  const warmMs: number[] = [];
  const ratios: number[] = [];
  let warmCache = new SchemaValidatorCache();
  for (let r = 0; r < runs; r++) {
    let t = performance.now();
    parse();
    const p = performance.now() - t;
    const pages = parse().map((x) => x.tools);
    const cache = new SchemaValidatorCache();
    t = performance.now();
    build(pages, cache);
    const s = performance.now() - t;
    const again = parse().map((x) => x.tools);
    t = performance.now();
    build(again, warmCache);
    warmMs.push(performance.now() - t);
    warmCache = cache;
    parseMs.push(p);
    snapMs.push(s);
    ratios.push(s / p);
    await new Promise((resolve) => setImmediate(resolve));
  }

  const snapshot = build(
    parse().map((x) => x.tools),
    new SchemaValidatorCache(),
  );
  const tool = snapshot.tools[1];
  if (tool === undefined) throw new Error('no tool');
  let t = performance.now();
  tool.inputValidator().validate({ query: 'x', limit: 5 });
  const firstCallUs = (performance.now() - t) * 1000;
  t = performance.now();
  tool.inputValidator().validate({ query: 'y', limit: 6 });
  const secondCallUs = (performance.now() - t) * 1000;

  return {
    tools: TOOLS,
    pages: PAGES,
    payloadBytes: Buffer.byteLength(payload),
    runs,
    jsonParseMs: spread(parseMs),
    snapshotMs: spread(snapMs),
    ratio: spread(ratios),
    warmSnapshotMs: spread(warmMs),
    firstCallUs,
    secondCallUs,
  };
}

const fmt = (s: Spread, digits = 1): string =>
  `${s.min.toFixed(digits)} / ${s.median.toFixed(digits)} / ${s.max.toFixed(digits)}`;

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await runSnapshotBench();
  console.log(
    `snapshot bench: ${r.tools} tools in ${r.pages} pages, ${(r.payloadBytes / 1e6).toFixed(2)} MB, ${r.runs} interleaved runs (min / median / max)`,
  );
  console.log(`  JSON.parse            ${fmt(r.jsonParseMs)} ms`);
  console.log(`  snapshot (cold cache) ${fmt(r.snapshotMs)} ms`);
  console.log(`  ratio snapshot/parse  ${fmt(r.ratio, 2)}  (target ≤ 5)`);
  console.log(`  snapshot (warm cache) ${fmt(r.warmSnapshotMs)} ms`);
  console.log(
    `  first call (lazy compile) ${r.firstCallUs.toFixed(0)} µs, second call ${r.secondCallUs.toFixed(1)} µs`,
  );
}
