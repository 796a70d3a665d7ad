/**
 * bench/era: the 2026-07-28 era. stepbind's own {@link ModernConnection} (raw JSON-RPC, its own
 * page walk and bounds) against the bare `@modelcontextprotocol/client` 2.4.0 `Client`
 * (`versionNegotiation: 'auto'`), first over real stdio to the same modern server built on
 * `@modelcontextprotocol/server` 2.4.0 (`serveStdio`, testkit `era/sdk2-server`), then over
 * Streamable HTTP to `createMcpHandler` servers (testkit `era/sdk2-http`, stateless), one child per
 * side, in the same run, rounds interleaved ABBA. Client CPU is this process's: over HTTP it also
 * counts reading the test servers' request events, the same for both sides.
 *
 * - Enumeration of 1,000 tools in 10 pages (every page `ttlMs: 0`, so the SDK's response cache
 *   never answers in its place; it runs with `cacheMode: 'bypass'` too): stepbind's complete
 *   discovery (`discoverCatalog`: walk, validation, snapshot) and its bare walk (`listPage` only),
 *   each as a ratio to the SDK's auto-aggregating `listTools()`.
 * - Calls: sequential `tools/call` latency and client CPU per call, ModernConnection.callTool
 *   against `Client.callTool`.
 * - Code size of stepbind's modern-era adapter (`era/*.ts`) and the installed size of the 2.4.0
 *   client it would otherwise depend on.
 *
 * Run alone: `npx tsx bench/era.ts`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { SchemaValidatorCache, type ListPageRequest } from '@stepbind/binding/internal';
import { parseConfig, type Connection, type ServerConfig } from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';
import { spawnSdk2HttpServer, type Sdk2HttpServerProcess } from '@stepbind/testkit';
import { discoverCatalog } from '../packages/runtime/src/discover-catalog.js';
import { identityOf } from '../packages/runtime/src/transports/index.js';
import {
  cpuMicros,
  isMain,
  median,
  row,
  runStandalone,
  trackChild,
  type BenchRow,
} from './support.js';

const SUITE = 'era';
const TOOLS = 1_000;
/** What the server lists: the generated tools plus its `change` and `ask`. */
const LISTED = TOOLS + 2;
const PAGE = 100;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SERVER = join(root, 'packages/testkit/dist/era/sdk2-server.js');
const ARGS = [SERVER, String(TOOLS), String(PAGE), '0'];

/** Options of {@link runEraBench}. */
export interface EraBenchOptions {
  /** Interleaved enumeration rounds. @default 20 */
  readonly enumerateRounds?: number;
  /** Interleaved call rounds. @default 20 */
  readonly callRounds?: number;
  /** Sequential calls per side per round. @default 200 */
  readonly callsPerRound?: number;
}

/** One side-by-side setup: stepbind and the bare 2.4.0 client on the same kind of transport. */
interface Pair {
  readonly label: 'stdio' | 'HTTP';
  readonly connection: Connection;
  readonly config: ServerConfig;
  readonly client: Client;
  close(): Promise<void>;
}

function configOf(entry: Record<string, unknown>): ServerConfig {
  const config = parseConfig({
    mcpServers: { s: { ...entry, limits: { maxTools: 5_000 } } },
  }).servers.get('s');
  if (config === undefined) throw new Error('no config');
  return config;
}

async function bareClient(transport: StdioClientTransport | StreamableHTTPClientTransport) {
  const client = new Client(
    { name: 'bare-sdk2-bench', version: '0.0.0' },
    { versionNegotiation: { mode: 'auto' } },
  );
  await client.connect(transport);
  if (client.getNegotiatedProtocolVersion() !== '2026-07-28') throw new Error('bare spoke 2025');
  return client;
}

/** One stdio child per side (`serveStdio`). */
async function stdioPair(): Promise<Pair> {
  const config = configOf({ command: process.execPath, args: ARGS });
  const connection = await connectServer('s', config);
  trackChild(connection.pid);
  if (connection.era !== 'modern') throw new Error(`stepbind spoke ${connection.era}`);
  const transport = new StdioClientTransport({ command: process.execPath, args: ARGS });
  const client = await bareClient(transport);
  trackChild(transport.pid);
  return {
    label: 'stdio',
    connection,
    config,
    client,
    close: async () => {
      await connection.close();
      await client.close();
    },
  };
}

/** One `createMcpHandler` server child per side (stateless Streamable HTTP). */
async function httpPair(): Promise<Pair> {
  const options = { tools: TOOLS, pageSize: PAGE, ttls: [0] };
  const servers: Sdk2HttpServerProcess[] = [];
  try {
    servers.push(await spawnSdk2HttpServer(options), await spawnSdk2HttpServer(options));
    const [ours, theirs] = servers as [Sdk2HttpServerProcess, Sdk2HttpServerProcess];
    const config = configOf({ type: 'http', url: ours.url });
    const connection = await connectServer('s', config);
    if (connection.era !== 'modern') throw new Error(`stepbind spoke ${connection.era}`);
    const client = await bareClient(new StreamableHTTPClientTransport(new URL(theirs.url)));
    return {
      label: 'HTTP',
      connection,
      config,
      client,
      close: async () => {
        await connection.close();
        await client.close();
        for (const server of servers) await server.close();
      },
    };
  } catch (error) {
    for (const server of servers) await server.close();
    throw error;
  }
}

async function discover(connection: Connection, config: ServerConfig): Promise<void> {
  const { snapshot } = await discoverCatalog(connection, {
    name: 's',
    config,
    identity: identityOf('s', config, connection),
    policyEpoch: 0,
    keyListing: false,
    validatorCache: new SchemaValidatorCache(),
  });
  if (snapshot?.tools.length !== LISTED) throw new Error('stepbind listed the wrong count');
}

async function walk(connection: Connection): Promise<void> {
  const signal = new AbortController().signal;
  let cursor: string | undefined;
  let count = 0;
  do {
    const request: ListPageRequest = {
      timeoutMs: 30_000,
      signal,
      cursor,
    };
    const page = (await connection.listPage(request)) as { tools: unknown[]; nextCursor?: string };
    count += page.tools.length;
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  if (count !== LISTED) throw new Error('walk listed the wrong count');
}

async function bareList(client: Client): Promise<void> {
  const { tools } = await client.listTools(undefined, { cacheMode: 'bypass' });
  if (tools.length !== LISTED) throw new Error(`bare listed ${tools.length}`);
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** Lines, code lines (no blank, no comment-only) and bytes of stepbind's modern-era adapter. */
function adapterSize(): { files: number; lines: number; codeLines: number; bytes: number } {
  const dir = join(root, 'packages/runtime/src/era');
  let lines = 0;
  let codeLines = 0;
  let bytes = 0;
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));
  for (const file of files) {
    const text = readFileSync(join(dir, file), 'utf8');
    bytes += Buffer.byteLength(text);
    for (const line of text.split('\n')) {
      lines++;
      const t = line.trim();
      if (t !== '' && !t.startsWith('//') && !t.startsWith('*') && !t.startsWith('/*')) codeLines++;
    }
  }
  return { files: files.length, lines, codeLines, bytes };
}

function installedBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? installedBytes(path) : statSync(path).size;
  }
  return total;
}

/** Runs the suite over stdio, then over Streamable HTTP; see the module comment. */
export async function runEraBench(options: EraBenchOptions = {}): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const open of [stdioPair, httpPair]) {
    const pair = await open();
    try {
      rows.push(...(await measure(pair, options)));
    } finally {
      await pair.close();
    }
  }
  const size = adapterSize();
  // The package entry is dist/index.mjs; its folder is the whole installed dist.
  const clientDist = dirname(fileURLToPath(import.meta.resolve('@modelcontextprotocol/client')));
  const clientBytes = installedBytes(clientDist);
  rows.push(
    row(
      SUITE,
      `adapter: ${size.files} files in runtime/src/era, code lines`,
      'lines',
      [size.codeLines],
      {
        note: `${size.lines} lines with comments, ${(size.bytes / 1024).toFixed(1)} KiB of source; the @modelcontextprotocol/client 2.4.0 dist is ${(clientBytes / 1024 / 1024).toFixed(1)} MiB installed.`,
      },
    ),
  );
  return rows;
}

async function measure(pair: Pair, options: EraBenchOptions): Promise<BenchRow[]> {
  const enumerateRounds = options.enumerateRounds ?? 20;
  const callRounds = options.callRounds ?? 20;
  const calls = options.callsPerRound ?? 200;
  const { connection, config, client, label } = pair;
  {
    // Warm both sides (JIT, validator code paths) before measuring.
    await discover(connection, config);
    await walk(connection);
    await bareList(client);
    const full: number[] = [];
    const walked: number[] = [];
    const bare: number[] = [];
    const fullRatio: number[] = [];
    const walkRatio: number[] = [];
    for (let r = 0; r < enumerateRounds; r++) {
      let b = 0;
      if (r % 2 === 0) b = await timed(() => bareList(client));
      const f = await timed(() => discover(connection, config));
      const w = await timed(() => walk(connection));
      if (r % 2 === 1) b = await timed(() => bareList(client));
      full.push(f);
      walked.push(w);
      bare.push(b);
      fullRatio.push(f / b);
      walkRatio.push(w / b);
    }
    const args = { text: 'hello' };
    const ours = (): Promise<unknown> => connection.callTool('echo', args, { timeoutMs: 30_000 });
    const theirs = (): Promise<unknown> => client.callTool({ name: 'echo', arguments: args });
    const sample = async (call: () => Promise<unknown>): Promise<{ us: number; cpu: number }> => {
      const latencies: number[] = [];
      const cpu0 = cpuMicros();
      for (let i = 0; i < calls; i++) {
        const t = performance.now();
        await call();
        latencies.push((performance.now() - t) * 1000);
      }
      return { us: median(latencies), cpu: (cpuMicros() - cpu0) / calls };
    };
    await sample(ours);
    await sample(theirs);
    const callUs: number[] = [];
    const bareUs: number[] = [];
    const callRatio: number[] = [];
    const cpuRatio: number[] = [];
    const cpuOurs: number[] = [];
    const cpuTheirs: number[] = [];
    for (let r = 0; r < callRounds; r++) {
      let b = r % 2 === 1 ? await sample(theirs) : undefined;
      const a = await sample(ours);
      b ??= await sample(theirs);
      callUs.push(a.us);
      bareUs.push(b.us);
      callRatio.push(a.us / b.us);
      cpuOurs.push(a.cpu);
      cpuTheirs.push(b.cpu);
      cpuRatio.push(a.cpu / b.cpu);
    }
    return [
      row(
        SUITE,
        `${label} enumerate 1k tools / 10 pages: listCatalog (walk+validate+snapshot)`,
        'ms',
        full,
      ),
      row(SUITE, `${label} enumerate: ModernConnection page walk only`, 'ms', walked),
      row(SUITE, `${label} enumerate: bare SDK 2.4.0 listTools()`, 'ms', bare),
      row(SUITE, `${label} ratio listCatalog / bare SDK 2.4.0`, '×', fullRatio, {
        note: 'bench/era.ts: stepbind validates (compiles) every tool schema and builds the snapshot; the SDK parses the pages with its own result schemas and compiles nothing.',
      }),
      row(SUITE, `${label} ratio page walk / bare SDK 2.4.0`, '×', walkRatio, {
        target: { op: '<=', value: 1.15 },
      }),
      row(SUITE, `${label} tools/call median: ModernConnection`, 'µs', callUs),
      row(SUITE, `${label} tools/call median: bare SDK 2.4.0`, 'µs', bareUs),
      row(SUITE, `${label} ratio call latency ModernConnection / bare`, '×', callRatio, {
        target: { op: '<=', value: 1.15 },
      }),
      row(SUITE, `${label} client CPU per call: ModernConnection`, 'µs', cpuOurs),
      row(SUITE, `${label} client CPU per call: bare SDK 2.4.0`, 'µs', cpuTheirs),
      row(SUITE, `${label} ratio client CPU per call ModernConnection / bare`, '×', cpuRatio),
    ];
  }
}

if (isMain(import.meta.url)) {
  await runStandalone(
    'bench/era: ModernConnection vs bare @modelcontextprotocol/client 2.4.0',
    () => runEraBench(),
  );
}
