/**
 * bench/startup: time to the first `captureBinding()` with 20 stdio servers × 100 tools (DESIGN
 * §19.5), against the bare MCP SDK connecting to and listing the same 20 servers in parallel (its
 * best case: `Promise.all` over `connect` + the `listTools` page loop).
 *
 * - cold: `McpRuntime.open` + `captureBinding()` with an empty catalog cache (every server started,
 *   listed and validated; eager starts run `concurrency` at a time, here 20);
 * - warm: the same with the cache the cold run wrote (the step is shown the cached catalogs; the
 *   servers start in the background and are not waited for);
 * - warm lazy: the same with `"start": "lazy"` on every server (nothing is spawned).
 *
 * Rounds interleave bare, cold, warm and warm-lazy (the order rotates by round); each round gives
 * one ratio per variant. Eager servers of a warm start begin to spawn on the next turn of the event
 * loop, after the first capture returned (DESIGN §19.2); the close that follows waits for them. Every
 * runtime and client is closed after its measurement (not timed) and no child may outlive the run.
 *
 * Run alone: `npx tsx bench/startup.ts [--strict] [rounds]`.
 */
import { rmSync } from 'node:fs';
import { McpRuntime } from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';
import { Client, StdioClientTransport } from './sdk.js';
import {
  breathe,
  catalogFixture,
  isMain,
  row,
  runStandalone,
  Scratch,
  trackChild,
  type BenchRow,
} from './support.js';

const SUITE = 'startup';
const SERVERS = 20;
const TOOLS = 100;
const PAGES = 2;

/** Options of {@link runStartupBench}. */
export interface StartupBenchOptions {
  /** Interleaved rounds. @default 5 */
  readonly rounds?: number;
}

type Params = ReturnType<typeof stdioServerParams>;

function serverParams(scratch: Scratch): Params[] {
  const out: Params[] = [];
  for (let i = 0; i < SERVERS; i++) {
    const fixturePath = scratch.writeJson(
      `server-${i}.json`,
      catalogFixture(TOOLS, PAGES, (n) => ({
        name: `s${i}_tool_${n}`,
        description: `Runs operation ${n} of server ${i} and returns a short summary.`,
        inputSchema: {
          type: 'object',
          properties: {
            query: { type: 'string', maxLength: 200 },
            limit: { type: 'integer', minimum: 1, maximum: 100 },
          },
          required: ['query'],
        },
      })),
    );
    out.push(
      stdioServerParams({
        scenario: 'fixture',
        fixturePath,
        serverInfo: { name: `bench-${i}`, version: '1.0.0' },
      }),
    );
  }
  return out;
}

/**
 * The bare SDK: connect to every server and list every page, all at once (`parallel`) or one
 * server after the other, as most hosts do. ms.
 */
async function bareStart(params: readonly Params[], parallel = true): Promise<number> {
  const clients: Client[] = [];
  const t0 = performance.now();
  const each = async (p: Params): Promise<void> => {
    const transport = new StdioClientTransport({ ...p, stderr: 'ignore' });
    const client = new Client({ name: 'bare-sdk-bench', version: '0.0.0' });
    clients.push(client);
    await client.connect(transport);
    trackChild(transport.pid);
    let cursor: string | undefined;
    let count = 0;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      count += page.tools.length;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    if (count !== TOOLS) throw new Error(`bare SDK listed ${count} tools`);
  };
  try {
    if (parallel) await Promise.all(params.map(each));
    else for (const p of params) await each(p);
    return performance.now() - t0;
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

/** stepbind: open + first capture. ms; `provisional` says how many servers the step showed cached. */
async function stepbindStart(
  params: readonly Params[],
  cachePath: string,
  start: 'eager' | 'lazy',
): Promise<{ ms: number; provisional: number; spawned: number }> {
  const mcpServers: Record<string, unknown> = {};
  params.forEach((p, i) => {
    mcpServers[`s${i}`] = { ...p, stderr: 'ignore', start };
  });
  const t0 = performance.now();
  const runtime = await McpRuntime.open(
    // The default `concurrency` (4 starts at a time).
    { mcpServers },
    { cache: { path: cachePath } },
  );
  try {
    const step = await runtime.captureBinding();
    const ms = performance.now() - t0;
    if (step.tools.length !== SERVERS * TOOLS)
      throw new Error(`captured ${step.tools.length} tools`);
    const provisional = step.servers.filter((s) => s.bound && s.provisional).length;
    const spawned = runtime.pids().length;
    step.release();
    return { ms, provisional, spawned };
  } finally {
    for (const pid of runtime.pids()) trackChild(pid);
    await runtime.close();
    for (const pid of runtime.pids()) trackChild(pid);
  }
}

/** Runs the suite and returns its rows. */
export async function runStartupBench(options: StartupBenchOptions = {}): Promise<BenchRow[]> {
  const rounds = options.rounds ?? 5;
  const scratch = new Scratch();
  try {
    const params = serverParams(scratch);
    const warmPath = scratch.path('warm.json');
    // Untimed: fills the cache the warm rounds start from (and warms the OS file cache).
    await stepbindStart(params, warmPath, 'eager');
    await bareStart(params);
    const bare: number[] = [];
    const bareSerial: number[] = [];
    const cold: number[] = [];
    const warm: number[] = [];
    const lazy: number[] = [];
    const ratios = { cold: [] as number[], warm: [] as number[], lazy: [] as number[] };
    let provisionalSeen = 0;
    let lazySpawned = 0;
    for (let r = 0; r < rounds; r++) {
      // The order rotates each round, so no variant always follows another's shutdown.
      let b = NaN;
      let serial = NaN;
      let c = { ms: NaN, provisional: 0, spawned: 0 };
      let w = c;
      let l = c;
      const variants: (() => Promise<void>)[] = [
        async () => {
          b = await bareStart(params);
        },
        async () => {
          serial = await bareStart(params, false);
        },
        async () => {
          const coldPath = scratch.path(`cold-${r}.json`);
          c = await stepbindStart(params, coldPath, 'eager');
          rmSync(coldPath, { force: true });
        },
        async () => {
          w = await stepbindStart(params, warmPath, 'eager');
        },
        async () => {
          l = await stepbindStart(params, warmPath, 'lazy');
        },
      ];
      for (let v = 0; v < variants.length; v++) {
        await variants[(v + r) % variants.length]?.();
        await breathe();
      }
      if (c.provisional !== 0) throw new Error('a cold start showed a cached catalog');
      provisionalSeen = Math.min(w.provisional, l.provisional);
      lazySpawned = Math.max(lazySpawned, l.spawned);
      bare.push(b);
      bareSerial.push(serial);
      cold.push(c.ms);
      warm.push(w.ms);
      lazy.push(l.ms);
      ratios.cold.push(c.ms / b);
      ratios.warm.push(w.ms / b);
      ratios.lazy.push(l.ms / b);
    }
    const shape = `${SERVERS} stdio servers × ${TOOLS} tools (${PAGES} pages each), ${rounds} interleaved rounds`;
    return [
      row(SUITE, 'bare SDK: connect + list all, in parallel', 'ms', bare, { note: shape }),
      row(SUITE, 'bare SDK: connect + list, one server after another', 'ms', bareSerial),
      row(SUITE, 'stepbind cold: open + first capture', 'ms', cold, {
        note: 'stepbind starts 4 servers at a time (the default concurrency); the ratios below compare with the bare SDK in parallel, its fastest form.',
      }),
      row(SUITE, 'stepbind warm: open + first capture', 'ms', warm),
      row(SUITE, 'stepbind warm, lazy servers', 'ms', lazy),
      row(SUITE, 'ratio cold / bare SDK', '×', ratios.cold, { target: { op: '<=', value: 1.0 } }),
      row(SUITE, 'ratio warm / bare SDK', '×', ratios.warm, {
        target: { op: '<=', value: 0.1 },
        note: `Warm steps showed ${provisionalSeen} of ${SERVERS} servers provisionally (cached catalogs); eager servers start in the background.`,
      }),
      row(SUITE, 'ratio warm lazy / bare SDK', '×', ratios.lazy, {
        target: { op: '<=', value: 0.1 },
        note: `Lazy servers spawned before the first call: ${lazySpawned}.`,
      }),
    ];
  } finally {
    scratch.dispose();
  }
}

if (isMain(import.meta.url)) {
  const rounds = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 5);
  await runStandalone('bench/startup', () => runStartupBench({ rounds }));
}
