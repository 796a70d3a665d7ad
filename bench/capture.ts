/**
 * bench/capture: `runtime.captureBinding()` + `release()` on a runtime whose one server serves
 * 10,000 tools (100 pages) versus one serving 10 tools, both in-memory. Capture must not copy or
 * rebuild the catalog, so its cost must not grow with the catalog (target: ratio ≤ 1.5).
 *
 * Batches of captures alternate between the two runtimes (ABBA order per round); each round gives
 * one µs-per-capture figure per side and one ratio.
 *
 * Run alone: `npx tsx bench/capture.ts [--strict]`.
 */
import { McpRuntime } from '@stepbind/runtime';
import { createInMemoryFleet } from '@stepbind/testkit';
import { breathe, catalogFixture, isMain, row, runStandalone, type BenchRow } from './support.js';

const SUITE = 'capture';

/** Options of {@link runCaptureBench}. */
export interface CaptureBenchOptions {
  /** Interleaved rounds. @default 10 */
  readonly rounds?: number;
  /** Captures per side per round. @default 2000 */
  readonly batch?: number;
}

async function openWith(tools: number, pages: number) {
  const fleet = createInMemoryFleet({
    cat: { scenario: 'fixture', fixture: catalogFixture(tools, pages) },
  });
  try {
    const runtime = await McpRuntime.open(fleet.config(), { connect: fleet.connect });
    return { fleet, runtime };
  } catch (error) {
    await fleet.close();
    throw error;
  }
}

/** µs per capture+release over `count` sequential captures. */
async function captureBatch(runtime: McpRuntime, count: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const binding = await runtime.captureBinding();
    binding.release();
  }
  return ((performance.now() - t0) * 1000) / count;
}

/** Runs the suite and returns its rows. */
export async function runCaptureBench(options: CaptureBenchOptions = {}): Promise<BenchRow[]> {
  const rounds = options.rounds ?? 10;
  const batch = options.batch ?? 2000;
  const small = await openWith(10, 2);
  let big: Awaited<ReturnType<typeof openWith>> | undefined;
  try {
    big = await openWith(10_000, 100);
    const probe = await big.runtime.captureBinding();
    const bigTools = probe.tools.length;
    probe.release();
    if (bigTools !== 10_000) throw new Error(`expected 10000 tools, captured ${bigTools}`);

    // Warm-up: JIT both paths (and the first capture of each set, which builds its shared view).
    await captureBatch(small.runtime, batch);
    await captureBatch(big.runtime, batch);

    const smallUs: number[] = [];
    const bigUs: number[] = [];
    const ratios: number[] = [];
    for (let r = 0; r < rounds; r++) {
      let s: number;
      let b: number;
      if (r % 2 === 0) {
        s = await captureBatch(small.runtime, batch);
        await breathe();
        b = await captureBatch(big.runtime, batch);
      } else {
        b = await captureBatch(big.runtime, batch);
        await breathe();
        s = await captureBatch(small.runtime, batch);
      }
      await breathe();
      smallUs.push(s);
      bigUs.push(b);
      ratios.push(b / s);
    }
    const live = big.runtime.status().liveSets + small.runtime.status().liveSets;
    return [
      row(SUITE, 'capture+release, 10 tools', 'µs', smallUs),
      row(SUITE, 'capture+release, 10,000 tools', 'µs', bigUs),
      row(SUITE, 'ratio 10,000 / 10 tools', '×', ratios, {
        target: { op: '<=', value: 1.5 },
        note: `${rounds} interleaved rounds × ${batch} captures per side (${rounds * batch} each); one in-memory server per runtime; ${live} live ConnectionSet(s) after all releases.`,
      }),
    ];
  } finally {
    await big?.runtime.close();
    await big?.fleet.close();
    await small.runtime.close();
    await small.fleet.close();
  }
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/capture', () => runCaptureBench());
}
