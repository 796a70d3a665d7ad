/**
 * bench/resources: resources in the step (DESIGN §20.3), over stdio against testkit's scripted
 * resource server.
 *
 * - capture: `captureBinding()` + `release()` on a runtime whose server lists 9,901 resources
 *   (100 pages, just under the 10,000-item budget) versus one listing 10. A step joins its servers' lists once per change, so its
 *   cost must not grow with them (target: ratio ≤ 1.5, as for tools).
 * - read: `step.readResource(uri)` versus the bare SDK client's `readResource` on a server process
 *   of its own, sequential, interleaved rounds (target: ratio ≤ 1.15, as for calls), and a tool
 *   call on the same two connections for context.
 *
 * Run alone: `npx tsx bench/resources.ts [--strict]`.
 */
import { fileURLToPath } from 'node:url';
import { McpRuntime } from '@stepbind/runtime';
import { Client, StdioClientTransport } from './sdk.js';
import { breathe, isMain, row, runStandalone, trackChild, type BenchRow } from './support.js';

const SUITE = 'resources';
const SERVER = fileURLToPath(
  new URL('../packages/testkit/dist/server/resource-server.js', import.meta.url),
);
const URI = 'test://r/0/1-0';

/** Options of {@link runResourcesBench}. */
export interface ResourcesBenchOptions {
  /** Interleaved rounds. @default 10 */
  readonly rounds?: number;
  /** Captures per side per round. @default 1000 */
  readonly captures?: number;
  /** Reads per side per round. @default 200 */
  readonly reads?: number;
}

function server(pages: number, perPage: number) {
  return {
    command: process.execPath,
    args: [SERVER, 'legacy'],
    env: { RESOURCE_SERVER_PAGES: String(pages), RESOURCE_SERVER_PER_PAGE: String(perPage) },
    approval: 'none' as const,
  };
}

/** A runtime over one resource server, once its resources are listed. */
async function openWith(pages: number, perPage: number): Promise<McpRuntime> {
  let listed: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    listed = resolve;
  });
  const runtime = await McpRuntime.open(
    { mcpServers: { s: server(pages, perPage) } },
    { onEvent: (e) => (e.type === 'features-listed' ? listed() : undefined) },
  );
  for (const pid of runtime.pids()) trackChild(pid);
  await ready;
  return runtime;
}

/** µs per call of `once` over `count` sequential calls. */
async function batch(count: number, once: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await once();
  return ((performance.now() - t0) * 1000) / count;
}

/** Interleaved rounds (ABBA) of `a` against `b`: µs per call of each, and their ratios. */
async function pair(
  rounds: number,
  count: number,
  a: () => Promise<unknown>,
  b: () => Promise<unknown>,
): Promise<{ a: number[]; b: number[]; ratios: number[] }> {
  await batch(count, a);
  await batch(count, b);
  const out = { a: [] as number[], b: [] as number[], ratios: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    let x: number;
    let y: number;
    if (r % 2 === 0) {
      x = await batch(count, a);
      await breathe();
      y = await batch(count, b);
    } else {
      y = await batch(count, b);
      await breathe();
      x = await batch(count, a);
    }
    await breathe();
    out.a.push(x);
    out.b.push(y);
    out.ratios.push(x / y);
  }
  return out;
}

/** Runs the suite and returns its rows. */
export async function runResourcesBench(options: ResourcesBenchOptions = {}): Promise<BenchRow[]> {
  const rounds = options.rounds ?? 10;
  const captures = options.captures ?? 1000;
  const reads = options.reads ?? 200;
  const small = await openWith(1, 10);
  let big: McpRuntime | undefined;
  const transport = new StdioClientTransport({ ...server(1, 10), stderr: 'inherit' });
  const client = new Client({ name: 'bare-sdk-bench', version: '0.0.0' });
  try {
    big = await openWith(100, 99);
    const bigRuntime = big;
    const probe = await bigRuntime.captureBinding();
    const listed = probe.resources.length;
    probe.release();
    if (listed !== 9_901) throw new Error(`expected 9901 resources, captured ${listed}`);
    const captureOnce = (runtime: McpRuntime) => async () => {
      (await runtime.captureBinding()).release();
    };
    const capture = await pair(rounds, captures, captureOnce(bigRuntime), captureOnce(small));

    await client.connect(transport);
    trackChild(transport.pid);
    const step = await small.captureBinding();
    let read: Awaited<ReturnType<typeof pair>>;
    let call: Awaited<ReturnType<typeof pair>>;
    try {
      read = await pair(
        rounds,
        reads,
        () => step.readResource(URI),
        () => client.readResource({ uri: URI }),
      );
      // The same connections' tools/call, for context: what the connection path itself costs.
      const links = step.prepareCall('s__links');
      call = await pair(
        rounds,
        reads,
        () => links.run({}),
        () => client.callTool({ name: 'links', arguments: {} }),
      );
    } finally {
      step.release();
    }
    return [
      row(SUITE, 'capture+release, 10 resources', 'µs', capture.b),
      row(SUITE, 'capture+release, 9,901 resources', 'µs', capture.a),
      row(SUITE, 'capture ratio 9,901 / 10 resources', '×', capture.ratios, {
        target: { op: '<=', value: 1.5 },
        note: `${rounds} interleaved rounds × ${captures} captures per side; one stdio server per runtime (100 pages × 99 resources vs 1 page × 10).`,
      }),
      row(SUITE, 'readResource, stepbind', 'µs', read.a),
      row(SUITE, 'readResource, bare SDK', 'µs', read.b),
      row(SUITE, 'readResource ratio stepbind / SDK', '×', read.ratios, {
        target: { op: '<=', value: 1.15 },
        note: `${rounds} interleaved rounds × ${reads} sequential reads per side; one scripted stdio server per side.`,
      }),
      row(SUITE, 'tools/call ratio stepbind / SDK, same connections', '×', call.ratios, {
        note: 'Context for the read ratio: PreparedCall.run of a tool of the same server against client.callTool, same rounds.',
      }),
    ];
  } finally {
    await client.close();
    await big?.close();
    await small.close();
  }
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/resources', () => runResourcesBench());
}
