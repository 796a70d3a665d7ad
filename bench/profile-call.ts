/**
 * bench/profile-call: where the client CPU of one call goes, stepbind's `PreparedCall.run` against
 * the bare SDK's `client.callTool`, under the inspector's sampling profiler (started after a
 * warm-up; two profiles per side and shape, in the order A B B A, so the sampler's own cost and
 * the drift of a shared machine fall on both sides).
 *
 * For each of sequential calls and 64 callers in flight, and each side, it prints `process.cpuUsage`
 * per call, the sampled non-idle self time per call by category (zod, including its JIT-compiled
 * parsers; the SDK; the binding; the runtime; node; GC) and the top self-time functions, then:
 *
 * - zod time per call by its nearest non-zod caller: `(anon) shared/protocol.js:<line>` inside
 *   `Protocol.request` is the parse of the result with the request's result schema
 *   (`CallToolResultSchema` for `tools/call`); `isJSONRPC*` is the SDK's message dispatch;
 * - the inclusive time per call of stepbind's own walks of the value (`checkBounds` around
 *   `checkJsonValue`, `checkOutput`) and of the receipt.
 *
 * In memory the scripted server runs in this process, so its work (and its zod) is in the numbers
 * of both sides; over stdio only the client is measured.
 *
 * Standalone, report only: `npx tsx bench/profile-call.ts [memory|stdio] [calls] [intervalUs]`
 * (defaults: memory, 20,000 calls, 100 µs). Profiles are not written to disk.
 */
import { Session } from 'node:inspector/promises';
import type { Profiler } from 'node:inspector';

/** One frame of a profile node (`Runtime.CallFrame`). */
type CallFrame = Profiler.ProfileNode['callFrame'];
import { McpRuntime } from '@stepbind/runtime';
import {
  connectInMemory,
  createInMemoryFleet,
  stdioServerParams,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { Client, StdioClientTransport } from './sdk.js';
import { cpuMicros, trackChild, liveChildren } from './support.js';

const TOOL = 'alpha';
const ARGS = Object.freeze({ input: 'hello' });
const CONCURRENCY = 64;
const SERVER: ScriptedServerOptions = { scenario: 'single' };
/** Functions whose inclusive time per call is printed (name, then file). */
const INCLUSIVE = [
  ['checkBounds', 'checks.js'],
  ['checkJsonValue', 'bounds.js'],
  ['checkOutput', 'checks.js'],
  ['receiptOf', 'receipt.js'],
] as const;

type Caller = () => Promise<unknown>;

async function sequential(call: Caller, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await call();
}

async function inFlight(call: Caller, count: number): Promise<void> {
  const perCaller = Math.ceil(count / CONCURRENCY);
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = 0; i < perCaller; i++) await call();
    }),
  );
}

function categoryOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url.includes('/zod/') || isZodJit(frame)) return 'zod';
  if (url.includes('@modelcontextprotocol')) return 'sdk';
  if (url.includes('packages/binding')) return 'binding';
  if (url.includes('packages/runtime')) return 'runtime';
  if (url.includes('packages/testkit')) return 'testkit (server)';
  if (url === '') return functionName.startsWith('(') ? functionName : 'native';
  if (url.startsWith('node:')) return 'node';
  return 'other';
}

/** zod 4 compiles object parsers with `new Function`: anonymous frames without a script URL. */
function isZodJit(frame: CallFrame): boolean {
  return frame.url === '' && frame.functionName === '' && frame.scriptId !== '0';
}

function isZod(frame: CallFrame): boolean {
  return frame.url.includes('/zod/') || frame.url.includes('zod-compat') || isZodJit(frame);
}

function label(frame: CallFrame): string {
  const file = frame.url.split('/').slice(-2).join('/');
  return `${frame.functionName || '(anon)'} ${file}:${frame.lineNumber + 1}`;
}

function add(map: Map<string, number>, key: string, us: number): void {
  map.set(key, (map.get(key) ?? 0) + us);
}

function perCall(map: Map<string, number>, calls: number, top: number): string[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, us]) => `${(us / calls).toFixed(2).padStart(8)}  ${key}`);
}

/** Prints the summary of one profile of `calls` calls. */
function report(title: string, profile: Profiler.Profile, calls: number, cpuUs: number): void {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  const self = new Map<string, number>();
  const categories = new Map<string, number>();
  const zodBy = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let nonIdle = 0;
  for (let i = 0; i < samples.length; i++) {
    const us = deltas[i + 1] ?? 0;
    let node = nodes.get(samples[i] as number);
    if (node === undefined) continue;
    const frame = node.callFrame;
    const category = categoryOf(frame);
    add(categories, category, us);
    if (category !== '(idle)') nonIdle += us;
    add(self, label(frame), us);
    const seen = new Set<string>();
    let zodCaller: string | undefined;
    for (; node !== undefined; node = nodes.get(parent.get(node.id) ?? -1)) {
      const f = node.callFrame;
      if (zodCaller === undefined && isZod(frame) && !isZod(f)) zodCaller = label(f);
      for (const [name, file] of INCLUSIVE) {
        if (f.functionName === name && f.url.endsWith(file)) seen.add(name);
      }
    }
    if (zodCaller !== undefined) add(zodBy, zodCaller, us);
    for (const name of seen) add(inclusive, name, us);
  }
  const line = (map: Map<string, number>) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .map(([k, us]) => `${k} ${(us / calls).toFixed(2)}`)
      .join(', ');
  console.log(
    `\n== ${title}: ${calls} calls; process CPU ${(cpuUs / calls).toFixed(1)} µs/call; sampled non-idle ${(nonIdle / calls).toFixed(1)} µs/call`,
  );
  console.log(`  self time by category (µs/call): ${line(categories)}`);
  console.log('  top self time (µs/call):');
  for (const l of perCall(self, calls, 15)) console.log(`  ${l}`);
  console.log('  zod by nearest non-zod caller (µs/call):');
  for (const l of perCall(zodBy, calls, 8)) console.log(`  ${l}`);
  if (inclusive.size > 0) console.log(`  inclusive (µs/call): ${line(inclusive)}`);
}

async function profileSides(
  sides: readonly (readonly [string, Caller])[],
  calls: number,
  intervalUs: number,
): Promise<void> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
    for (let round = 0; round < 2; round++) {
      for (const [, call] of sides) {
        await sequential(call, Math.ceil(calls / 10));
        await inFlight(call, Math.ceil(calls / 10));
      }
    }
    for (const [shape, drive] of [
      ['sequential', sequential],
      [`${CONCURRENCY} in flight`, inFlight],
    ] as const) {
      // A B B A: each side is profiled twice, once early and once late, so neither always goes first.
      for (const [side, call] of [...sides, ...[...sides].reverse()]) {
        await session.post('Profiler.start');
        const cpu0 = cpuMicros();
        await drive(call, calls);
        const cpuUs = cpuMicros() - cpu0;
        const { profile } = await session.post('Profiler.stop');
        const done = shape === 'sequential' ? calls : Math.ceil(calls / CONCURRENCY) * CONCURRENCY;
        report(`${shape}, ${side}`, profile, done, cpuUs);
      }
    }
  } finally {
    await session.post('Profiler.disable');
    session.disconnect();
  }
}

async function prepared(runtime: McpRuntime): Promise<{ call: Caller; release: () => void }> {
  const binding = await runtime.captureBinding();
  const tool = binding.tools.find((t) => t.name.endsWith(`__${TOOL}`));
  if (tool === undefined) throw new Error(`no ${TOOL} tool`);
  const call = binding.prepareCall(tool.name);
  return { call: () => call.run(ARGS), release: () => binding.release() };
}

async function inMemory(calls: number, intervalUs: number): Promise<void> {
  const fleet = createInMemoryFleet({ s: SERVER });
  const bare = await connectInMemory(SERVER);
  let runtime: McpRuntime | undefined;
  let step: Awaited<ReturnType<typeof prepared>> | undefined;
  try {
    runtime = await McpRuntime.open(fleet.config(), { connect: fleet.connect, approval: 'none' });
    step = await prepared(runtime);
    const sides = [
      ['PreparedCall.run', step.call],
      ['bare callTool', () => bare.client.callTool({ name: TOOL, arguments: ARGS })],
    ] as const;
    await profileSides(sides, calls, intervalUs);
  } finally {
    step?.release();
    await runtime?.close();
    await fleet.close();
    await bare.close();
  }
}

async function stdio(calls: number, intervalUs: number): Promise<void> {
  const params = stdioServerParams(SERVER);
  const client = new Client({ name: 'bare-sdk-profile', version: '0.0.0' });
  const transport = new StdioClientTransport({ ...params, stderr: 'inherit' });
  let runtime: McpRuntime | undefined;
  let step: Awaited<ReturnType<typeof prepared>> | undefined;
  try {
    await client.connect(transport);
    trackChild(transport.pid);
    runtime = await McpRuntime.open({
      mcpServers: { s: { command: params.command, args: params.args, approval: 'none' } },
    });
    for (const pid of runtime.pids()) trackChild(pid);
    step = await prepared(runtime);
    const sides = [
      ['PreparedCall.run', step.call],
      ['bare callTool', () => client.callTool({ name: TOOL, arguments: ARGS })],
    ] as const;
    await profileSides(sides, calls, intervalUs);
  } finally {
    step?.release();
    await runtime?.close();
    await client.close();
  }
}

const [mode = 'memory', callsArg = '20000', intervalArg = '100'] = process.argv.slice(2);
const calls = Number(callsArg);
const intervalUs = Number(intervalArg);
if (!Number.isInteger(calls) || calls < CONCURRENCY || !(intervalUs > 0)) {
  throw new Error('usage: bench/profile-call.ts [memory|stdio] [calls ≥ 64] [intervalUs]');
}
console.log(
  `bench/profile-call ${mode}: Node ${process.version}, ${calls} calls per profile, sampling every ${intervalUs} µs`,
);
if (mode === 'stdio') await stdio(calls, intervalUs);
else if (mode === 'memory') await inMemory(calls, intervalUs);
else throw new Error(`unknown mode ${mode}: memory or stdio`);
const alive = await liveChildren();
if (alive.length > 0) {
  console.error(`child processes still alive: ${alive.join(', ')}`);
  process.exitCode = 1;
}
