/**
 * bench/hard-refresh: `runtime.hardRefresh(server)` while 64 callers keep calling a tool that takes
 * 20 ms on the server (`callDelayMs: 20`). Each caller loops `PreparedCall.run`; a call refused as
 * `STALE_CATALOG` makes it release its binding and re-prepare from a fresh capture. Before each
 * refresh the server moves to the other of two catalog generations (the second rewords one tool),
 * so every refresh swaps the catalog.
 *
 * Per refresh: its completion time (from `hardRefresh()` to resolution: re-list outside the lock,
 * validation, write lock, swap) divided by the longest call that was in flight when it began
 * (target ≤ 2: the writer waits only for the readers admitted before it). Also the longest
 * event-loop stall seen during the refresh, since every call of every server shares that loop.
 *
 * Two scenarios: a 50-tool catalog on an in-memory server (the target), and a 10,000-tool catalog
 * (100 pages) on a stdio child, where the re-list and the snapshot are large.
 *
 * Run alone: `npx tsx bench/hard-refresh.ts [--strict]`.
 */
import { ErrorCode, isStepbindError } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import {
  createInMemoryFleet,
  stdioServerParams,
  type FixtureTrigger,
  type ServerFixture,
} from '@stepbind/testkit';
import {
  benchTool,
  isMain,
  row,
  runStandalone,
  Scratch,
  sleep,
  trackChild,
  type BenchRow,
} from './support.js';

const SUITE = 'hard-refresh';
const CALLERS = 64;
const CALL_DELAY_MS = 20;
const SERVER = 'hr';
const TOOL = 'tool_1';
const ARGS = Object.freeze({ query: 'status' });

/** Options of {@link runHardRefreshBench}. */
export interface HardRefreshBenchOptions {
  /** Hard refreshes measured on the small in-memory catalog. @default 20 */
  readonly refreshes?: number;
  /** Hard refreshes measured on the 10,000-tool stdio catalog. @default 6 */
  readonly largeRefreshes?: number;
}

interface CallRecord {
  readonly start: number;
  readonly end: number;
  readonly stale: boolean;
}

/**
 * Two generations of `tools` tools in `pages` pages; generation 1 rewords the description of the
 * last tool. `flips` triggers make the first-page request of refresh k (the (k+2)th listing: the
 * first is the runtime's open) switch generation before answering, for a child that cannot be
 * steered directly.
 */
function fixture(tools: number, pages: number, flips = 0): ServerFixture {
  const per = Math.ceil(tools / pages);
  const base = Array.from({ length: pages }, (_, p) => ({
    tools: Array.from({ length: Math.min(per, tools - p * per) }, (_, i) => benchTool(p * per + i)),
  }));
  const last = base[pages - 1] as { tools: Record<string, unknown>[] };
  const reworded = { ...last.tools.at(-1), description: 'Reworded in generation 1.' };
  const changed = [...base.slice(0, -1), { tools: [...last.tools.slice(0, -1), reworded] }];
  const triggers: FixtureTrigger[] = Array.from({ length: flips }, (_, k) => ({
    on: { method: 'tools/list', cursor: null, nth: k + 2 },
    setGeneration: (k + 1) % 2,
    stateChange: 'before',
  }));
  return { generations: [{ pages: base }, { pages: changed }], triggers };
}

/** Records the longest gap between 1 ms interval ticks while it runs. */
class LoopGapMonitor {
  #last = performance.now();
  #max = 0;
  readonly #timer = setInterval(() => {
    const now = performance.now();
    this.#max = Math.max(this.#max, now - this.#last);
    this.#last = now;
  }, 1);

  /** Stops after one more timer turn (so a stall just before the stop is still seen). */
  async stop(): Promise<number> {
    await new Promise((resolve) => setTimeout(resolve, 2));
    clearInterval(this.#timer);
    return this.#max;
  }
}

interface ScenarioResult {
  readonly durations: number[];
  readonly longest: number[];
  readonly ratios: number[];
  readonly stale: number[];
  readonly staleWaits: number[];
  readonly loopGaps: number[];
  ok: number;
  refused: number;
}

/**
 * Runs `refreshes` hard refreshes of `runtime`'s server under 64 constant callers; `flip` switches
 * the server to its other catalog generation before each one (or is a no-op when triggers do it).
 */
async function underLoad(
  rt: McpRuntime,
  refreshes: number,
  flip: () => void,
): Promise<ScenarioResult> {
  const probe = await rt.captureBinding();
  const modelName = probe.tools.find((t) => t.name.endsWith(`__${TOOL}`))?.name;
  probe.release();
  if (modelName === undefined) throw new Error(`no ${TOOL} in the catalog`);
  const records: CallRecord[] = [];
  let stop = false;
  let failure: Error | undefined;

  const caller = async (): Promise<void> => {
    while (!stop) {
      const binding = await rt.captureBinding();
      try {
        const call = binding.prepareCall(modelName);
        while (!stop) {
          const start = performance.now();
          try {
            await call.run(ARGS);
            records.push({ start, end: performance.now(), stale: false });
          } catch (error) {
            if (!isStepbindError(error, ErrorCode.STALE_CATALOG)) throw error;
            records.push({ start, end: performance.now(), stale: true });
            break;
          }
        }
      } finally {
        binding.release();
      }
    }
  };
  const callers = Array.from({ length: CALLERS }, () =>
    caller().catch((error: unknown) => {
      failure ??= error instanceof Error ? error : new Error(String(error));
      stop = true;
    }),
  );

  const out: ScenarioResult = {
    durations: [],
    longest: [],
    ratios: [],
    stale: [],
    staleWaits: [],
    loopGaps: [],
    ok: 0,
    refused: 0,
  };
  try {
    await sleep(300); // warm-up under full load
    for (let i = 0; i < refreshes && failure === undefined; i++) {
      // Start at varying phases of the callers' 20 ms cycle.
      await sleep(40 + ((i * 7) % CALL_DELAY_MS));
      flip();
      const before = records.length;
      const monitor = new LoopGapMonitor();
      const t0 = performance.now();
      const changed = await rt.hardRefresh(SERVER);
      const t1 = performance.now();
      out.loopGaps.push(await monitor.stop());
      if (!changed) throw new Error('hard refresh did not swap the catalog');
      // Every call admitted before the writer has finished by t1; take those running at t0.
      const inFlight = records.filter((r) => r.start < t0 && r.end > t0 && !r.stale);
      const maxCall = Math.max(...inFlight.map((r) => r.end - r.start));
      out.durations.push(t1 - t0);
      out.longest.push(maxCall);
      out.ratios.push((t1 - t0) / maxCall);
      await sleep(2 * CALL_DELAY_MS); // let the stale refusals of this refresh land
      const after = records.slice(before);
      out.stale.push(after.filter((r) => r.stale).length);
      // A call that queued behind the writer waits for it, then is refused without being sent.
      out.staleWaits.push(Math.max(0, ...after.filter((r) => r.stale).map((r) => r.end - r.start)));
    }
  } finally {
    stop = true;
    await Promise.all(callers);
  }
  if (failure !== undefined) throw failure;
  out.ok = records.filter((r) => !r.stale).length;
  out.refused = records.length - out.ok;
  return out;
}

async function small(refreshes: number): Promise<ScenarioResult> {
  const fleet = createInMemoryFleet({
    [SERVER]: { scenario: 'fixture', fixture: fixture(50, 2), callDelayMs: CALL_DELAY_MS },
  });
  let runtime: McpRuntime | undefined;
  try {
    runtime = await McpRuntime.open(fleet.config(), { connect: fleet.connect, approval: 'none' });
    const server = fleet.server(SERVER);
    return await underLoad(runtime, refreshes, () => server.setGeneration(1 - server.generation));
  } finally {
    await runtime?.close();
    await fleet.close();
  }
}

async function large(refreshes: number): Promise<ScenarioResult> {
  const scratch = new Scratch();
  let runtime: McpRuntime | undefined;
  try {
    const fixturePath = scratch.writeJson('hard-refresh.json', fixture(10_000, 100, refreshes));
    const params = stdioServerParams({
      scenario: 'fixture',
      fixturePath,
      callDelayMs: CALL_DELAY_MS,
    });
    runtime = await McpRuntime.open({
      mcpServers: { [SERVER]: { command: params.command, args: params.args, approval: 'none' } },
    });
    for (const pid of runtime.pids()) trackChild(pid);
    return await underLoad(runtime, refreshes, () => undefined);
  } finally {
    await runtime?.close();
    scratch.dispose();
  }
}

function rows(label: string, r: ScenarioResult, target: boolean, note: string): BenchRow[] {
  return [
    row(SUITE, `${label}: hard refresh completion`, 'ms', r.durations),
    row(SUITE, `${label}: longest call in flight at its start`, 'ms', r.longest),
    row(SUITE, `${label}: ratio refresh / longest in-flight call`, '×', r.ratios, {
      ...(target ? { target: { op: '<=', value: 2 } } : {}),
      note: `${note} ${CALLERS} constant callers, tool call ${CALL_DELAY_MS} ms on the server; ${r.ok} calls succeeded, ${r.refused} were refused STALE_CATALOG and re-prepared from a fresh capture, no other failure.`,
    }),
    row(SUITE, `${label}: STALE_CATALOG refusals per refresh`, 'calls', r.stale),
    row(SUITE, `${label}: longest wait of a call refused as stale`, 'ms', r.staleWaits),
    row(SUITE, `${label}: longest event-loop stall during refresh`, 'ms', r.loopGaps),
  ];
}

/** Runs the suite and returns its rows. */
export async function runHardRefreshBench(
  options: HardRefreshBenchOptions = {},
): Promise<BenchRow[]> {
  const refreshes = options.refreshes ?? 20;
  const largeRefreshes = options.largeRefreshes ?? 6;
  const s = await small(refreshes);
  const l = await large(largeRefreshes);
  return [
    ...rows(
      '50 tools',
      s,
      true,
      `${refreshes} hard refreshes of a 50-tool catalog (2 pages, in-memory server) under`,
    ),
    ...rows(
      '10k tools',
      l,
      false,
      `${largeRefreshes} hard refreshes of a 10,000-tool catalog (100 pages, stdio child) under`,
    ),
  ];
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/hard-refresh', () => runHardRefreshBench());
}
