/**
 * bench/call: `PreparedCall.run` versus the bare SDK `client.callTool`, against the same scripted
 * server type, first over the in-memory pair and then over real stdio (one child per side).
 *
 * - In-memory, sequential: per round, the median latency of each side and their ratio
 *   (target: median ratio ≤ 1.15). The bare baseline is its own `Client` connected the same way.
 * - In-memory, 64 concurrent callers: throughput ratio stepbind / bare (target ≥ 0.9).
 * - stdio, sequential: latency ratio (issue 20 target ≤ 1.10), client CPU µs per call (this
 *   process's `process.cpuUsage`, the child is not counted; DESIGN §12 target ≤ 190 µs) and its
 *   ratio to the bare SDK's in the same rounds (issue 20 target ≤ 1.0).
 * - stdio, 64 in flight: throughput ratio (target ≥ 0.95).
 *
 * Every measurement alternates the two sides (ABBA), in the same process and run.
 *
 * Run alone: `npx tsx bench/call.ts [--strict]`.
 */
import {
  CatalogSlot,
  createBinding,
  type BoundServer,
  type BoundTool,
  type PreparedCall,
} from '@stepbind/binding/internal';
import { McpRuntime } from '@stepbind/runtime';
import {
  connectInMemory,
  createInMemoryFleet,
  stdioServerParams,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { Client, StdioClientTransport } from './sdk.js';
import {
  breathe,
  cpuMicros,
  isMain,
  median,
  row,
  runStandalone,
  trackChild,
  type BenchRow,
} from './support.js';

const SUITE = 'call';
const TOOL = 'alpha';
const ARGS = Object.freeze({ input: 'hello' });
const CONCURRENCY = 64;

/** Options of {@link runCallBench}. */
export interface CallBenchOptions {
  /** Interleaved rounds of sequential calls. @default 30 */
  readonly sequentialRounds?: number;
  /** Sequential calls per side per round (in-memory; stdio does half). @default 600 */
  readonly sequentialCalls?: number;
  /** Interleaved rounds with 64 callers. @default 60 */
  readonly concurrentRounds?: number;
  /** Calls per caller per concurrent round (in-memory; stdio does half). @default 16 */
  readonly callsPerCaller?: number;
}

/** One way to make the call under test. */
type Caller = () => Promise<unknown>;

interface SequentialSample {
  /** Median latency of one call in the batch, µs. */
  readonly medianUs: number;
  /** Process CPU per call, µs. */
  readonly cpuUs: number;
}

async function sequential(call: Caller, count: number): Promise<SequentialSample> {
  const latencies = new Array<number>(count);
  const cpu0 = cpuMicros();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    await call();
    latencies[i] = (performance.now() - t) * 1000;
  }
  const cpuUs = (cpuMicros() - cpu0) / count;
  return { medianUs: median(latencies), cpuUs };
}

interface ConcurrentSample {
  /** Calls per second. */
  readonly throughput: number;
  /** Process CPU per call, µs. */
  readonly cpuUs: number;
}

async function concurrent(call: Caller, perCaller: number): Promise<ConcurrentSample> {
  const cpu0 = cpuMicros();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = 0; i < perCaller; i++) await call();
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const calls = CONCURRENCY * perCaller;
  return { throughput: calls / seconds, cpuUs: (cpuMicros() - cpu0) / calls };
}

/** Runs `a` then `b` on even rounds and `b` then `a` on odd ones. */
async function interleaved<T>(
  rounds: number,
  a: () => Promise<T>,
  b: () => Promise<T>,
): Promise<{ a: T[]; b: T[] }> {
  const out = { a: [] as T[], b: [] as T[] };
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      out.a.push(await a());
      await breathe();
      out.b.push(await b());
    } else {
      out.b.push(await b());
      await breathe();
      out.a.push(await a());
    }
    await breathe();
  }
  return out;
}

/** The model name of `tool` in a runtime's binding, and a prepared call of it. */
async function prepare(runtime: McpRuntime): Promise<{ call: PreparedCall; release: () => void }> {
  const binding = await runtime.captureBinding();
  const tool = binding.tools.find((t) => t.name.endsWith(`__${TOOL}`));
  if (tool === undefined)
    throw new Error(`no ${TOOL} tool in ${binding.tools.map((t) => t.name).join(', ')}`);
  return { call: binding.prepareCall(tool.name), release: () => binding.release() };
}

function compare(
  transport: string,
  rounds: {
    seq: { a: SequentialSample[]; b: SequentialSample[] };
    conc: { a: ConcurrentSample[]; b: ConcurrentSample[] };
  },
  targets: { seqRatio?: number; cpuUs?: number; cpuRatio?: number; throughput: number },
  note: string,
): BenchRow[] {
  const { seq, conc } = rounds;
  const seqRatios = seq.a.map((s, i) => s.medianUs / (seq.b[i] as SequentialSample).medianUs);
  const cpuRatios = seq.a.map((s, i) => s.cpuUs / (seq.b[i] as SequentialSample).cpuUs);
  const tputRatios = conc.a.map(
    (s, i) => s.throughput / (conc.b[i] as ConcurrentSample).throughput,
  );
  const cpuLabel = transport === 'stdio' ? 'client CPU' : 'process CPU (client+server)';
  return [
    row(
      SUITE,
      `${transport} seq latency, PreparedCall.run`,
      'µs',
      seq.a.map((s) => s.medianUs),
    ),
    row(
      SUITE,
      `${transport} seq latency, bare callTool`,
      'µs',
      seq.b.map((s) => s.medianUs),
    ),
    row(SUITE, `${transport} seq latency ratio`, '×', seqRatios, {
      ...(targets.seqRatio === undefined ? {} : { target: { op: '<=', value: targets.seqRatio } }),
      note,
    }),
    row(
      SUITE,
      `${transport} seq ${cpuLabel}/call, PreparedCall.run`,
      'µs',
      seq.a.map((s) => s.cpuUs),
      targets.cpuUs === undefined ? {} : { target: { op: '<=', value: targets.cpuUs } },
    ),
    row(
      SUITE,
      `${transport} seq ${cpuLabel}/call, bare callTool`,
      'µs',
      seq.b.map((s) => s.cpuUs),
    ),
    row(
      SUITE,
      `${transport} seq ${cpuLabel} ratio`,
      '×',
      cpuRatios,
      targets.cpuRatio === undefined ? {} : { target: { op: '<=', value: targets.cpuRatio } },
    ),
    row(
      SUITE,
      `${transport} 64 in flight, PreparedCall.run`,
      'calls/s',
      conc.a.map((s) => s.throughput),
    ),
    row(
      SUITE,
      `${transport} 64 in flight, bare callTool`,
      'calls/s',
      conc.b.map((s) => s.throughput),
    ),
    row(SUITE, `${transport} 64 in flight throughput ratio`, '×', tputRatios, {
      target: { op: '>=', value: targets.throughput },
    }),
    row(
      SUITE,
      `${transport} 64 in flight ${cpuLabel}/call ratio`,
      '×',
      conc.a.map((s, i) => s.cpuUs / (conc.b[i] as ConcurrentSample).cpuUs),
    ),
  ];
}

async function measurePair(
  stepbind: Caller,
  bare: Caller,
  o: Required<CallBenchOptions>,
): Promise<{
  seq: { a: SequentialSample[]; b: SequentialSample[] };
  conc: { a: ConcurrentSample[]; b: ConcurrentSample[] };
}> {
  // Warm-up: JIT both paths, sequential and concurrent.
  await sequential(stepbind, o.sequentialCalls);
  await sequential(bare, o.sequentialCalls);
  await concurrent(stepbind, o.callsPerCaller);
  await concurrent(bare, o.callsPerCaller);
  const seq = await interleaved(
    o.sequentialRounds,
    () => sequential(stepbind, o.sequentialCalls),
    () => sequential(bare, o.sequentialCalls),
  );
  const conc = await interleaved(
    o.concurrentRounds,
    () => concurrent(stepbind, o.callsPerCaller),
    () => concurrent(bare, o.callsPerCaller),
  );
  return { seq, conc };
}

const SERVER: ScriptedServerOptions = { scenario: 'single' };

async function inMemory(o: Required<CallBenchOptions>): Promise<BenchRow[]> {
  const fleet = createInMemoryFleet({ s: SERVER });
  const bare = await connectInMemory(SERVER);
  let runtime: McpRuntime | undefined;
  let prepared: Awaited<ReturnType<typeof prepare>> | undefined;
  try {
    runtime = await McpRuntime.open(fleet.config(), { connect: fleet.connect, approval: 'none' });
    prepared = await prepare(runtime);
    const call = prepared.call;
    const rounds = await measurePair(
      () => call.run(ARGS),
      () => bare.client.callTool({ name: TOOL, arguments: ARGS }),
      o,
    );
    const overhead = await ownOverhead(runtime, 10, 20_000);
    const rows = compare(
      'in-memory',
      rounds,
      { seqRatio: 1.15, throughput: 0.9 },
      `in-memory: ${o.sequentialRounds} interleaved rounds × ${o.sequentialCalls} sequential calls per side (ratio of per-round median latencies); ${o.concurrentRounds} rounds × ${CONCURRENCY} callers × ${o.callsPerCaller} calls. Server and client share this process, so CPU includes the server. Bare side: testkit connectInMemory (its own SDK Client over InMemoryTransport).`,
    );
    return [overhead, ...rows];
  } finally {
    prepared?.release();
    await runtime?.close();
    await fleet.close();
    await bare.close();
  }
}

/**
 * stepbind's own cost per `PreparedCall.run`: the runtime's published catalog bound to a caller
 * that answers at once, versus awaiting that caller directly.
 */
async function ownOverhead(runtime: McpRuntime, rounds: number, calls: number): Promise<BenchRow> {
  const catalog = runtime.registry.current('s', 'default');
  if (catalog === undefined) throw new Error('no published catalog for server s');
  const result = Object.freeze({ content: [{ type: 'text' as const, text: 'ok' }] });
  const caller = { closed: false, callTool: async () => result };
  const slot = new CatalogSlot('s', catalog);
  const server: BoundServer = {
    name: 's',
    slot,
    catalog,
    revision: slot.revision,
    caller,
    callTimeoutMs: 60_000,
    approval: 'none',
  };
  const byModelName = new Map<string, BoundTool>();
  for (const descriptor of catalog.tools) {
    byModelName.set(descriptor.modelName, { modelName: descriptor.modelName, server, descriptor });
  }
  const binding = createBinding(
    { tools: [], byModelName, servers: [server], leftOut: [] },
    { stepId: 'overhead', policy: { policyEpoch: 0, isRevoked: () => false } },
  );
  const descriptor = catalog.tools.find((t) => t.name === TOOL);
  if (descriptor === undefined) throw new Error(`no ${TOOL}`);
  const call = binding.prepareCall(descriptor.modelName);
  const direct = () => caller.callTool();
  const perCall = async (fn: Caller): Promise<number> => {
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) await fn();
    return ((performance.now() - t0) * 1000) / calls;
  };
  try {
    await perCall(() => call.run(ARGS));
    await perCall(direct);
    const extra = await interleaved(
      rounds,
      () => perCall(() => call.run(ARGS)),
      () => perCall(direct),
    );
    return row(
      SUITE,
      'PreparedCall.run own cost (no-op caller)',
      'µs',
      extra.a.map((a, i) => a - (extra.b[i] as number)),
      {
        note: `Lock, revision check, admission, Ajv argument validation, receipt; ${rounds} rounds × ${calls} calls against a caller that resolves at once, minus awaiting that caller directly.`,
      },
    );
  } finally {
    binding.release();
  }
}

async function stdio(o: Required<CallBenchOptions>): Promise<BenchRow[]> {
  const params = stdioServerParams(SERVER);
  const transport = new StdioClientTransport({ ...params, stderr: 'inherit' });
  const client = new Client({ name: 'bare-sdk-bench', version: '0.0.0' });
  let runtime: McpRuntime | undefined;
  let prepared: Awaited<ReturnType<typeof prepare>> | undefined;
  try {
    await client.connect(transport);
    trackChild(transport.pid);
    runtime = await McpRuntime.open({
      mcpServers: { s: { command: params.command, args: params.args, approval: 'none' } },
    });
    for (const pid of runtime.pids()) trackChild(pid);
    prepared = await prepare(runtime);
    const call = prepared.call;
    const rounds = await measurePair(
      () => call.run(ARGS),
      () => client.callTool({ name: TOOL, arguments: ARGS }),
      o,
    );
    return compare(
      'stdio',
      rounds,
      { seqRatio: 1.1, cpuUs: 190, cpuRatio: 1, throughput: 0.95 },
      `stdio: one scripted child per side; ${o.sequentialRounds} interleaved rounds × ${o.sequentialCalls} sequential calls; ${o.concurrentRounds} rounds × ${CONCURRENCY} callers × ${o.callsPerCaller} calls. Client CPU = process.cpuUsage of the bench process (children excluded).`,
    );
  } finally {
    prepared?.release();
    await runtime?.close();
    await client.close();
  }
}

/** Runs the suite and returns its rows. */
export async function runCallBench(options: CallBenchOptions = {}): Promise<BenchRow[]> {
  const o: Required<CallBenchOptions> = {
    sequentialRounds: options.sequentialRounds ?? 30,
    sequentialCalls: options.sequentialCalls ?? 600,
    concurrentRounds: options.concurrentRounds ?? 60,
    callsPerCaller: options.callsPerCaller ?? 16,
  };
  const stdioOptions = {
    ...o,
    sequentialCalls: Math.ceil(o.sequentialCalls / 2),
    callsPerCaller: Math.ceil(o.callsPerCaller / 2),
  };
  return [...(await inMemory(o)), ...(await stdio(stdioOptions))];
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/call', () => runCallBench());
}
