/**
 * bench/hostile: how long a hostile server can stall the event loop (issue 8). A raw JSON-RPC
 * stdio child (`packages/testkit/test/fixtures/hostile/server.mjs`) serves a tool with
 * `"pattern": "^(a+)+$"` in its input and output schema, answers with output built to trigger it,
 * and serves structured content nested 100,000 levels deep. With a backtracking engine a 40-character
 * argument blocks the loop for hours (13.6 s at 28 characters, doubling per character).
 *
 * Measured per scenario, over real stdio through `McpRuntime`:
 * - the longest event-loop stall: `perf_hooks.monitorEventLoopDelay` (1 ms resolution) and a 1 ms
 *   `setInterval` drift probe (longest gap between ticks minus the interval), both armed around
 *   the calls only, which run one after another with a macrotask turn between them;
 * - the synchronous time of the validation itself (`validate` of the frozen validator).
 * Then, without a server, the regex budget's edge: for adversarial patterns, the longest
 * validation that the budget still lets run (it refuses anything longer).
 *
 * Run: `pnpm build && npx tsx bench/hostile.ts [--rounds N]`. Prints a table; nothing is asserted.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { SchemaValidatorCache, validateTool, type StepbindError } from '@stepbind/binding/internal';
import { McpRuntime } from '@stepbind/runtime';
import {
  COMPILE_BASE_COST,
  COMPILE_UNIT_COST,
  REGEX_BUDGET,
  stepsPerCharacter,
} from '../packages/binding/src/regex/budget.js';
import { planPattern } from '../packages/binding/src/regex/plan.js';

const SERVER = fileURLToPath(
  new URL('../packages/testkit/test/fixtures/hostile/server.mjs', import.meta.url),
);
const REDOS = '^(a+)+$';
const at = process.argv.indexOf('--rounds');
const ROUNDS = at === -1 ? 20 : Number(process.argv[at + 1]);

interface Stall {
  readonly histogramMaxMs: number;
  readonly driftMaxMs: number;
}

/** Runs `fn` with both stall probes armed. */
async function probe(fn: () => Promise<void>): Promise<Stall> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let last = performance.now();
  let drift = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    drift = Math.max(drift, now - last - 1);
    last = now;
  }, 1);
  histogram.enable();
  try {
    await fn();
    // One more tick, so a stall at the very end is seen by the drift probe.
    await new Promise((resolve) => setTimeout(resolve, 5));
  } finally {
    histogram.disable();
    clearInterval(timer);
  }
  return { histogramMaxMs: histogram.max / 1e6, driftMaxMs: drift };
}

/**
 * Awaits a call that must fail with `code`, then yields to the macrotask queue: a refused call does
 * no I/O, and back-to-back refusals would otherwise chain as microtasks and read as one long stall.
 */
async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e as StepbindError,
  );
  await new Promise((resolve) => setImmediate(resolve));
  if (error?.code !== code)
    throw new Error(`expected ${code}, got ${String(error?.code ?? 'success')}`);
}

interface Row {
  readonly scenario: string;
  readonly stall: Stall;
  /** Median and longest synchronous `validate` of the hostile value. */
  readonly validateMs?: { readonly median: number; readonly max: number };
}

async function stdioScenarios(length: number): Promise<Row[]> {
  const runtime = await McpRuntime.open({
    mcpServers: {
      h: {
        command: process.execPath,
        args: [SERVER, '--length', String(length)],
        approval: 'none',
      },
    },
  });
  try {
    const step = await runtime.captureBinding();
    const hostile = 'a'.repeat(length) + '!';
    const redos = step.prepareCall('h__redos');
    const rows: Row[] = [];
    // Warm up (first compile of each validator), outside the probes.
    await expectCode(redos.run({ s: hostile }), 'INVALID_ARGUMENTS');
    await expectCode(redos.run({ s: 'aaa' }), 'INVALID_TOOL_OUTPUT');
    const input = redos.descriptor.inputValidator();
    const output = redos.descriptor.outputValidator();
    const time = (fn: () => unknown): { median: number; max: number } => {
      const ms: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        const t = performance.now();
        fn();
        ms.push(performance.now() - t);
      }
      ms.sort((a, b) => a - b);
      return { median: ms[ms.length >> 1] ?? NaN, max: ms[ms.length - 1] ?? NaN };
    };
    rows.push({
      scenario: `input: ${length}-char hostile argument (INVALID_ARGUMENTS)`,
      stall: await probe(async () => {
        for (let i = 0; i < ROUNDS; i++)
          await expectCode(redos.run({ s: hostile }), 'INVALID_ARGUMENTS');
      }),
      validateMs: time(() => input.validate({ s: hostile })),
    });
    rows.push({
      scenario: `output: server's ${length}-char hostile structuredContent (INVALID_TOOL_OUTPUT)`,
      stall: await probe(async () => {
        for (let i = 0; i < ROUNDS; i++)
          await expectCode(redos.run({ s: 'aaa' }), 'INVALID_TOOL_OUTPUT');
      }),
      validateMs: time(() => output?.validate({ s: hostile })),
    });
    if (length === 40) {
      const deep = step.prepareCall('h__deep');
      rows.push({
        scenario: '100,000-level structuredContent, no output schema (INVALID_TOOL_OUTPUT)',
        stall: await probe(async () => {
          for (let i = 0; i < 5; i++) await expectCode(deep.run({}), 'INVALID_TOOL_OUTPUT');
        }),
      });
    }
    step.release();
    return rows;
  } finally {
    await runtime.close();
  }
}

/** The longest validation the regex budget still allows, for adversarial patterns. */
function budgetEdge(): { readonly pattern: string; readonly chars: number; readonly ms: number }[] {
  const patterns = [
    '\\p{L}{1000}',
    '\\p{L}{500}',
    '\\p{L}{500}\\p{N}',
    '[\\s\\S]*\\p{L}{900}!',
    '.{500}x',
    '[a-z]{500}',
    REDOS,
    '^[a-z]+$',
  ];
  const out = [];
  for (const pattern of patterns) {
    const plan = planPattern(pattern);
    if (!plan.enforced) continue;
    const chars =
      Math.floor(
        (REGEX_BUDGET - COMPILE_BASE_COST - COMPILE_UNIT_COST * plan.size) /
          stepsPerCharacter(plan.size),
      ) - 1;
    let worst = 0;
    for (const s of ['x'.repeat(chars), 'a'.repeat(chars - 1) + '!']) {
      // A fresh cache each time: the first validation also compiles.
      const cache = new SchemaValidatorCache();
      const tool = validateTool(
        {
          name: 't',
          inputSchema: { type: 'object', properties: { s: { type: 'string', pattern } } },
        },
        { server: 'bench', validatorCache: cache },
      );
      const v = cache.getValidator(tool.inputSchema.digest);
      for (let i = 0; i < 3; i++) {
        const t = performance.now();
        v.validate({ s });
        worst = Math.max(worst, performance.now() - t);
      }
      if (v.validate({ s: s + 'xxx' }).ok) throw new Error(`budget did not refuse ${pattern}`);
    }
    out.push({ pattern, chars, ms: worst });
  }
  return out;
}

const rows: Row[] = [];
for (const length of [40, 10_000, 100_000]) rows.push(...(await stdioScenarios(length)));
const f = (n: number | undefined): string => (n === undefined ? '—' : n.toFixed(2));
console.log(`bench/hostile — Node ${process.version}, ${ROUNDS} calls per scenario\n`);
console.log(
  'scenario | longest stall, histogram (ms) | longest stall, drift probe (ms) | validate median / max (ms)',
);
console.log('---|---|---|---');
for (const r of rows) {
  const v = r.validateMs === undefined ? '—' : `${f(r.validateMs.median)} / ${f(r.validateMs.max)}`;
  console.log(`${r.scenario} | ${f(r.stall.histogramMaxMs)} | ${f(r.stall.driftMaxMs)} | ${v}`);
}
console.log(
  `\nregex budget edge (${REGEX_BUDGET} steps per validation; first validation compiles)\n`,
);
console.log('pattern | longest string allowed | longest validation (ms)');
console.log('---|---|---');
for (const e of budgetEdge()) console.log(`${JSON.stringify(e.pattern)} | ${e.chars} | ${f(e.ms)}`);
