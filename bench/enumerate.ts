/**
 * bench/enumerate: enumerate and snapshot 10,000 tools served in 100 pages by a scripted stdio child
 * (fixture file via `fixturePath`), stepbind versus the bare SDK loop
 * (`client.listTools({ cursor })` until `nextCursor` is undefined), interleaved in one run.
 *
 * - Warm: one long-lived child per side; each round enumerates once per side (ABBA). stepbind runs
 *   exactly what a refresh runs: `discoverCatalog` on the connection (enumeration, with each page
 *   validated, digested and named while the next one is in flight) with a fresh validator cache
 *   (target ≤ 1.15× wall, client CPU ≤ 1.5×).
 * - Warm re-list: the same, with the listing key a published connection's re-list computes.
 * - Cold: fresh children each round; `connect` (spawn + initialize) is timed on its own, then the
 *   first enumeration; and `McpRuntime.open` end to end versus bare connect + loop.
 * - Round trips: one audited `McpRuntime.open` counts the requests the child received.
 *
 * Two catalogs: the main one has no `outputSchema`; the second gives one tool in ten an output
 * schema, which the bare v1 client compiles with Ajv on every `listTools` page it receives.
 *
 * Run alone: `npx tsx bench/enumerate.ts [--strict]`.
 */
import { computeTransportDigest, SchemaValidatorCache } from '@stepbind/binding/internal';
import {
  McpRuntime,
  parseConfig,
  type Connection,
  type StdioServerConfig,
} from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';
import { discoverCatalog } from '../packages/runtime/src/discover-catalog.js';
import { readAuditTrail, stdioServerParams } from '@stepbind/testkit';
import { Client, StdioClientTransport } from './sdk.js';
import {
  benchTool,
  breathe,
  catalogFixture,
  cpuMicros,
  isMain,
  median,
  row,
  runStandalone,
  Scratch,
  trackChild,
  type BenchRow,
} from './support.js';

const SUITE = 'enumerate';
const TOOLS = 10_000;
const PAGES = 100;

/** Options of {@link runEnumerateBench}. */
export interface EnumerateBenchOptions {
  /** Interleaved warm rounds on the main catalog. @default 8 */
  readonly warmRounds?: number;
  /** Interleaved warm rounds on the catalog with output schemas. @default 4 */
  readonly outputSchemaRounds?: number;
  /** Cold rounds (fresh children). @default 3 */
  readonly coldRounds?: number;
  /** Interleaved warm rounds of a re-list (listing key computed) on the main catalog. @default 6 */
  readonly relistRounds?: number;
}

interface Timed {
  readonly ms: number;
  readonly cpuMs: number;
}

async function timed(fn: () => Promise<unknown>): Promise<Timed> {
  const cpu0 = cpuMicros();
  const t0 = performance.now();
  await fn();
  return { ms: performance.now() - t0, cpuMs: (cpuMicros() - cpu0) / 1000 };
}

/** The server config `McpRuntime` and `connectServer` see for a scripted child. */
function serverConfig(fixturePath: string, auditPath?: string) {
  const params = stdioServerParams({
    scenario: 'fixture',
    fixturePath,
    ...(auditPath === undefined ? {} : { auditPath }),
  });
  return {
    params,
    json: { mcpServers: { big: { command: params.command, args: params.args } } },
  };
}

function stdioConfig(json: unknown): StdioServerConfig {
  const cfg = parseConfig(json).servers.get('big');
  if (cfg?.transport !== 'stdio') throw new Error('expected a stdio config');
  return cfg;
}

/**
 * What a runtime refresh does for one connection: enumerate, then validate into a snapshot. The
 * first listing of a connection (open, a new server, a reconnect) computes no listing key; a
 * re-list of a published connection (`keyListing`) does.
 */
async function stepbindEnumerate(conn: Connection, cfg: StdioServerConfig, keyListing = false) {
  const { snapshot } = await discoverCatalog(conn, {
    keyListing,
    name: 'big',
    config: cfg,
    identity: {
      name: 'big',
      transportDigest: computeTransportDigest({ command: cfg.command, args: cfg.args }),
      ...(conn.hello.serverInfo === undefined ? {} : { serverInfo: conn.hello.serverInfo }),
      ...(conn.hello.protocolVersion === undefined
        ? {}
        : { protocolVersion: conn.hello.protocolVersion }),
    },
    policyEpoch: 0,
    validatorCache: new SchemaValidatorCache(),
  });
  if (snapshot?.tools.length !== TOOLS) {
    throw new Error(`snapshot has ${snapshot?.tools.length ?? 'no'} tools`);
  }
  return snapshot;
}

/** The bare SDK loop. */
async function bareEnumerate(client: Client): Promise<number> {
  let cursor: string | undefined;
  let count = 0;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    count += page.tools.length;
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  if (count !== TOOLS) throw new Error(`bare loop listed ${count}`);
  return count;
}

async function connectBare(params: ReturnType<typeof stdioServerParams>): Promise<Client> {
  const transport = new StdioClientTransport({ ...params, stderr: 'inherit' });
  const client = new Client({ name: 'bare-sdk-bench', version: '0.0.0' });
  await client.connect(transport);
  trackChild(transport.pid);
  return client;
}

async function connectStepbind(cfg: StdioServerConfig): Promise<Connection> {
  const conn = await connectServer('big', cfg);
  trackChild(conn.pid);
  return conn;
}

interface WarmResult {
  readonly a: Timed[];
  readonly b: Timed[];
}

async function warm(fixturePath: string, rounds: number, keyListing = false): Promise<WarmResult> {
  const { params, json } = serverConfig(fixturePath);
  const cfg = stdioConfig(json);
  let conn: Connection | undefined;
  let client: Client | undefined;
  try {
    conn = await connectStepbind(cfg);
    client = await connectBare(params);
    const c = conn;
    const b = client;
    // Warm-up: JIT both clients and both children.
    await stepbindEnumerate(c, cfg, keyListing);
    await bareEnumerate(b);
    const out: WarmResult = { a: [], b: [] };
    for (let r = 0; r < rounds; r++) {
      const runA = async () => {
        out.a.push(await timed(() => stepbindEnumerate(c, cfg, keyListing)));
      };
      const runB = async () => out.b.push(await timed(() => bareEnumerate(b)));
      if (r % 2 === 0) {
        await runA();
        await breathe();
        await runB();
      } else {
        await runB();
        await breathe();
        await runA();
      }
      await breathe();
    }
    return out;
  } finally {
    await conn?.close();
    await client?.close();
  }
}

interface ColdRound {
  readonly connectA: number;
  readonly connectB: number;
  readonly firstEnumA: number;
  readonly firstEnumB: number;
  readonly open: number;
}

async function coldRound(fixturePath: string, order: number): Promise<ColdRound> {
  const { params, json } = serverConfig(fixturePath);
  const cfg = stdioConfig(json);
  const sideA = async () => {
    const t0 = performance.now();
    const conn = await connectStepbind(cfg);
    try {
      const t1 = performance.now();
      await stepbindEnumerate(conn, cfg);
      return { connect: t1 - t0, enumerate: performance.now() - t1 };
    } finally {
      await conn.close();
    }
  };
  const sideB = async () => {
    const t0 = performance.now();
    const client = await connectBare(params);
    try {
      const t1 = performance.now();
      await bareEnumerate(client);
      return { connect: t1 - t0, enumerate: performance.now() - t1 };
    } finally {
      await client.close();
    }
  };
  const sideOpen = async () => {
    const t0 = performance.now();
    const runtime = await McpRuntime.open(json);
    const ms = performance.now() - t0;
    for (const pid of runtime.pids()) trackChild(pid);
    await runtime.close();
    return ms;
  };
  let a: { connect: number; enumerate: number };
  let b: { connect: number; enumerate: number };
  let open: number;
  if (order % 2 === 0) {
    a = await sideA();
    b = await sideB();
    open = await sideOpen();
  } else {
    open = await sideOpen();
    b = await sideB();
    a = await sideA();
  }
  return {
    connectA: a.connect,
    connectB: b.connect,
    firstEnumA: a.enumerate,
    firstEnumB: b.enumerate,
    open,
  };
}

/** One audited `McpRuntime.open`: which requests reached the child, and how many children. */
async function roundTrips(fixturePath: string, auditPath: string) {
  const { json } = serverConfig(fixturePath, auditPath);
  const runtime = await McpRuntime.open(json);
  const pids = runtime.pids();
  for (const pid of pids) trackChild(pid);
  await runtime.close();
  const audit = await readAuditTrail(auditPath);
  const count = (method: string) => audit.filter((e) => e.method === method).length;
  return {
    children: pids.length,
    initialize: count('initialize'),
    lists: count('tools/list'),
    other: audit.filter(
      (e) =>
        !['initialize', 'tools/list'].includes(e.method) && !e.method.startsWith('notifications/'),
    ).length,
  };
}

const ratiosOf = (a: readonly number[], b: readonly number[]): number[] =>
  a.map((x, i) => x / (b[i] as number));

/** Runs the suite and returns its rows. */
export async function runEnumerateBench(options: EnumerateBenchOptions = {}): Promise<BenchRow[]> {
  const warmRounds = options.warmRounds ?? 8;
  const outputRounds = options.outputSchemaRounds ?? 4;
  const coldRounds = options.coldRounds ?? 3;
  const relistRounds = options.relistRounds ?? 6;
  const scratch = new Scratch();
  try {
    const plainPath = scratch.writeJson(
      'plain.json',
      catalogFixture(TOOLS, PAGES, (n) => {
        const tool = benchTool(n);
        delete tool['outputSchema'];
        return tool;
      }),
    );
    const outputPath = scratch.writeJson('output-schemas.json', catalogFixture(TOOLS, PAGES));

    const plain = await warm(plainPath, warmRounds);
    const withOutput = await warm(outputPath, outputRounds);
    const relist = await warm(plainPath, relistRounds, true);
    const cold: ColdRound[] = [];
    for (let r = 0; r < coldRounds; r++) cold.push(await coldRound(plainPath, r));
    const trips = await roundTrips(plainPath, scratch.path('audit.jsonl'));

    const ms = (t: readonly Timed[]) => t.map((x) => x.ms);
    const cpu = (t: readonly Timed[]) => t.map((x) => x.cpuMs);
    const bareTotal = cold.map((c) => c.connectB + c.firstEnumB);
    return [
      row(SUITE, 'warm: stepbind enumerate+snapshot', 'ms', ms(plain.a)),
      row(SUITE, 'warm: bare SDK listTools loop', 'ms', ms(plain.b)),
      row(SUITE, 'warm: wall ratio stepbind / bare', '×', ratiosOf(ms(plain.a), ms(plain.b)), {
        target: { op: '<=', value: 1.15 },
        note: `${TOOLS} tools in ${PAGES} pages over stdio (fixturePath, ${Math.round(scratch.sizeOf(plainPath) / 1024)} KiB, no outputSchema), one long-lived child per side, ${warmRounds} interleaved rounds after one warm-up each; stepbind = listCatalog (pages validated while the next is in flight) with a fresh validator cache (what a refresh runs).`,
      }),
      row(SUITE, 'warm: client CPU stepbind', 'ms', cpu(plain.a)),
      row(SUITE, 'warm: client CPU bare', 'ms', cpu(plain.b)),
      row(SUITE, 'warm: client CPU ratio', '×', ratiosOf(cpu(plain.a), cpu(plain.b)), {
        target: { op: '<=', value: 1.5 },
      }),
      row(
        SUITE,
        'warm re-list: wall ratio stepbind / bare',
        '×',
        ratiosOf(ms(relist.a), ms(relist.b)),
        {
          note: `The same catalog re-listed by a published connection (${relistRounds} rounds): discoverCatalog with keyListing, the key that lets an unchanged re-list skip the snapshot (it is built here: no previous key). Client CPU ${median(cpu(relist.a)).toFixed(0)} vs ${median(cpu(relist.b)).toFixed(0)} ms (medians).`,
        },
      ),
      row(SUITE, 'warm re-list: client CPU ratio', '×', ratiosOf(cpu(relist.a), cpu(relist.b))),
      row(
        SUITE,
        'warm, 1/10 tools with outputSchema: wall ratio',
        '×',
        ratiosOf(ms(withOutput.a), ms(withOutput.b)),
        {
          note: `Same catalog but one tool in ten declares an outputSchema (${outputRounds} rounds): the bare v1 client Ajv-compiles every output schema of every page it lists; stepbind ${median(ms(withOutput.a)).toFixed(0)} ms vs bare ${median(ms(withOutput.b)).toFixed(0)} ms (medians).`,
        },
      ),
      row(
        SUITE,
        'cold: connect (spawn+initialize) stepbind',
        'ms',
        cold.map((c) => c.connectA),
      ),
      row(
        SUITE,
        'cold: connect (spawn+initialize) bare',
        'ms',
        cold.map((c) => c.connectB),
      ),
      row(
        SUITE,
        'cold: connect ratio',
        '×',
        cold.map((c) => c.connectA / c.connectB),
      ),
      row(
        SUITE,
        'cold: first enumerate ratio stepbind / bare',
        '×',
        cold.map((c) => c.firstEnumA / c.firstEnumB),
      ),
      row(
        SUITE,
        'cold: McpRuntime.open end to end',
        'ms',
        cold.map((c) => c.open),
      ),
      row(SUITE, 'cold: bare connect + listTools loop', 'ms', bareTotal),
      row(
        SUITE,
        'cold: open ratio McpRuntime.open / bare',
        '×',
        cold.map((c, i) => c.open / (bareTotal[i] as number)),
        {
          note: `${coldRounds} rounds, fresh children each (three per round); a fresh child also pays its own JIT warm-up serving the pages, on both sides.`,
        },
      ),
      row(SUITE, 'open: tools/list requests (pages = 100)', 'req', [trips.lists], {
        target: { op: '<=', value: PAGES },
        note: `One audited McpRuntime.open: ${trips.children} child process(es), ${trips.initialize} initialize, ${trips.lists} tools/list, ${trips.other} other request(s).`,
      }),
      row(SUITE, 'open: child processes spawned', 'proc', [trips.children], {
        target: { op: '<=', value: 1 },
      }),
    ];
  } finally {
    scratch.dispose();
  }
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/enumerate', () => runEnumerateBench());
}
