import fc from 'fast-check';
import { isStepbindError, type McpBinding, type PreparedCall } from '@stepbind/binding/internal';
import {
  connectServer,
  McpRuntime,
  type RuntimeEvent,
  type ServerConnector,
} from '@stepbind/runtime';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { isProcessAlive, tempAuditPath } from '../audit.js';
import { stdioServerParams } from '../connect.js';
import type { ServerFixture } from '../fixture.js';
import { createInMemoryFleet } from '../fleet.js';
import { scriptedTool } from '../scenarios.js';
import type { ScriptedServer } from '../server/scripted.js';
import type { AuditEntry } from '../types.js';
import { RuntimeOracle, type PredictedOutcome, type ServedPages } from './oracle.js';

/** One server process (or in-memory instance) as the model sees it. */
export interface ServerProcess {
  /** Stable identity: the pid of a stdio child, a counter in memory. */
  readonly id: number;
  /** `tools/call` requests this process received. */
  calls(): number;
  /** Replaces its catalog (in memory only). */
  replaceCatalog?(pages: ServedPages): void;
  /** Sends `notifications/tools/list_changed` (in memory only). */
  notifyListChanged?(): Promise<void>;
  /** Makes the process die (stdio: SIGKILL; in memory: the transport closes). */
  crash(): Promise<void>;
}

/** How the model reaches the server processes behind the runtime. */
export interface ProcessControl {
  /** Every process ever started for `name`, oldest first. */
  instances(name: string): readonly ServerProcess[];
  /** The next start of `name` fails once. */
  failNextConnect(name: string): void;
  /** The `mcpServers` configuration for the given per-server config versions. */
  config(versions: ReadonlyMap<string, number>): unknown;
  /** True when catalogs can be changed at run time (in memory). */
  readonly mutable: boolean;
  close(): Promise<void>;
}

/** The real system under test, driven side by side with a {@link RuntimeOracle}. */
export interface ModelSystem {
  readonly runtime: McpRuntime;
  readonly processes: ProcessControl;
  readonly events: RuntimeEvent[];
  readonly bindings: McpBinding[];
  /** For each binding, the server process each server was bound to at capture. */
  readonly boundInstances: Map<string, ServerProcess>[];
  readonly calls: { readonly call: PreparedCall; readonly binding: number }[];
  /** The process currently bound for each server (tracked from the oracle's session ids). */
  readonly current: Map<string, ServerProcess>;
  readonly sessionIds: Map<string, number>;
  /** How often each server's configuration was changed. */
  readonly configVersions: Map<string, number>;
  /** Comparisons made between the runtime and the oracle; every one must agree. */
  comparisons: number;
}

/** Thrown when the runtime and the oracle disagree; the message says on what. */
export class OracleDisagreement extends Error {
  override get name(): string {
    return 'OracleDisagreement';
  }
}

/**
 * Compares one runtime observation with the oracle's prediction (as JSON) and counts it.
 *
 * @throws OracleDisagreement naming what differed.
 */
export function agree(system: ModelSystem, what: string, actual: unknown, expected: unknown): void {
  system.comparisons++;
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new OracleDisagreement(`${what}: runtime ${a}, oracle ${e}`);
}

/** The tool names servers can serve in generated catalogs. */
export const MODEL_TOOL_POOL = ['alpha', 'beta', 'gamma', 'delta', 'omega'] as const;

/** Default initial catalogs of the model's servers. */
export const MODEL_INITIAL_CATALOGS: Readonly<Record<string, ServedPages>> = {
  a: [['alpha'], ['beta', 'gamma']],
  b: [['alpha', 'delta']],
};

/**
 * Points `real.current` at the server process of each session the oracle now has. Call it after
 * any command of yours that captures or refreshes (the built-in commands do).
 */
export function trackSessions(model: RuntimeOracle, real: ModelSystem): void {
  for (const name of model.servers) {
    const id = model.sessionId(name);
    if (real.sessionIds.get(name) !== id) {
      real.sessionIds.set(name, id);
      const latest = real.processes.instances(name).at(-1);
      if (latest !== undefined) real.current.set(name, latest);
    }
  }
}

async function outcomeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'OK';
  } catch (error) {
    if (isStepbindError(error)) return error.code;
    throw error;
  }
}

/** A command of the model-based test: applied to the oracle and to the real system. */
export type ModelCommand = fc.AsyncCommand<RuntimeOracle, ModelSystem>;
type Cmd = ModelCommand;

class MarkDirty implements Cmd {
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.markDirty();
    real.runtime.markDirty('model');
    agree(real, 'dirty', real.runtime.dirty, true);
  }
  toString = (): string => 'markDirty';
}

class RefreshIfDirty implements Cmd {
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const expected = model.refreshIfDirty();
    let actual: string;
    try {
      actual = (await real.runtime.refreshIfDirty()) ? 'PUBLISHED' : 'NOTHING';
    } catch (error) {
      if (!isStepbindError(error, 'REQUIRED_SERVERS_FAILED')) throw error;
      actual = 'FAILED';
    }
    agree(real, 'refreshIfDirty', actual, expected);
    agree(real, 'dirty after refresh', real.runtime.dirty, model.dirty);
    trackSessions(model, real);
  }
  toString = (): string => 'refreshIfDirty';
}

class HardRefresh implements Cmd {
  constructor(readonly server: string) {}
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const expected = model.hardRefresh(this.server);
    let actual: boolean | string;
    try {
      actual = await real.runtime.hardRefresh(this.server);
    } catch (error) {
      if (!isStepbindError(error)) throw error;
      actual = error.code;
    }
    agree(real, `hardRefresh(${this.server})`, actual, expected);
  }
  toString = (): string => `hardRefresh(${this.server})`;
}

class MutateCatalog implements Cmd {
  constructor(
    readonly server: string,
    readonly pages: ServedPages,
    readonly listChanged: boolean,
  ) {}
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const alive = model.alive(this.server);
    model.mutateCatalog(this.server, this.pages, this.listChanged);
    if (!alive) return;
    const instance = real.current.get(this.server);
    if (instance?.replaceCatalog === undefined || instance.notifyListChanged === undefined) {
      throw new Error(`the live instance of ${this.server} cannot change its catalog`);
    }
    instance.replaceCatalog(this.pages);
    if (!this.listChanged) return;
    const before = real.events.filter((e) => e.type === 'list-changed').length;
    await instance.notifyListChanged();
    // Delivery is asynchronous: wait (bounded) until the runtime saw it, then until it settled.
    for (
      let i = 0;
      i < 1000 && real.events.filter((e) => e.type === 'list-changed').length === before;
      i++
    ) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    agree(
      real,
      'list_changed delivered',
      real.events.filter((e) => e.type === 'list-changed').length,
      before + 1,
    );
    await real.runtime.whenIdle();
  }
  toString = (): string =>
    `mutateCatalog(${this.server}, ${JSON.stringify(this.pages)}, ${this.listChanged ? 'withListChanged' : 'silent'})`;
}

class Capture implements Cmd {
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const expected = model.capture();
    let binding: McpBinding;
    try {
      binding = await real.runtime.captureBinding();
    } catch (error) {
      if (!isStepbindError(error, 'REQUIRED_SERVERS_FAILED')) throw error;
      agree(real, 'capture', 'FAILED', expected);
      return;
    }
    if (expected === 'FAILED') {
      binding.release();
      agree(real, 'capture', 'OK', expected);
      return;
    }
    trackSessions(model, real);
    const actual = model.servers.map((name) => {
      const status = binding.servers.find((s) => s.name === name);
      return {
        name,
        tools: binding.tools
          .filter((t) => t.name.startsWith(`${name}__`))
          .map((t) => t.name.slice(name.length + 2)),
        generation: status?.bound === true ? status.generation : -1,
        revision: status?.bound === true ? status.revision : -1,
      };
    });
    agree(real, 'captured binding', actual, expected);
    real.bindings.push(binding);
    real.boundInstances.push(new Map(real.current));
  }
  toString = (): string => 'captureBinding';
}

class PrepareCall implements Cmd {
  constructor(
    readonly bindingPick: number,
    readonly toolPick: number,
  ) {}
  check = (model: Readonly<RuntimeOracle>): boolean => model.bindingCount > 0;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const index = this.bindingPick % model.bindingCount;
    const tools = model.toolsOf(index);
    if (tools.length === 0) return;
    const pick = tools[this.toolPick % tools.length];
    if (pick === undefined) return;
    const binding = real.bindings[index];
    if (binding === undefined) throw new Error('binding missing');
    let call: PreparedCall;
    try {
      call = binding.prepareCall(`${pick.server}__${pick.tool}`);
    } catch (error) {
      agree(
        real,
        'prepareCall',
        isStepbindError(error) ? error.code : 'THROW',
        model.isReleased(index) ? 'BINDING_RELEASED' : 'OK',
      );
      return;
    }
    agree(real, 'prepareCall', 'OK', model.isReleased(index) ? 'BINDING_RELEASED' : 'OK');
    model.prepare(index, pick.server, pick.tool);
    real.calls.push({ call, binding: index });
  }
  toString = (): string => `prepareCall(binding#${this.bindingPick}, tool#${this.toolPick})`;
}

class RunCall implements Cmd {
  constructor(readonly callPick: number) {}
  check = (model: Readonly<RuntimeOracle>): boolean => model.callCount > 0;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const index = this.callPick % model.callCount;
    const entry = real.calls[index];
    if (entry === undefined) throw new Error('call missing');
    const expected: PredictedOutcome = model.run(index);
    const { call } = entry;
    const target = real.boundInstances[entry.binding]?.get(call.server);
    const allBefore = real.processes.instances(call.server).map((i) => i.calls());
    let receiptOk = true;
    const actual = await outcomeOf(
      call.run({}).then(({ receipt }) => {
        receiptOk =
          receipt.descriptorDigest === call.descriptor.descriptorDigest &&
          receipt.revision === call.revision &&
          receipt.tool === call.tool;
      }),
    );
    agree(real, `run(${call.modelName})`, actual, expected);
    agree(
      real,
      `receipt of ${call.modelName} matches the descriptor the model saw`,
      receiptOk,
      true,
    );
    const allAfter = real.processes.instances(call.server).map((i) => i.calls());
    const sent = allAfter.reduce((n, v) => n + v, 0) - allBefore.reduce((n, v) => n + v, 0);
    const reachesServer = expected === 'OK' || expected === 'SERVER_ERROR';
    agree(real, `tools/call sent for ${call.modelName}`, sent, reachesServer ? 1 : 0);
    if (reachesServer) {
      // Never re-routed: the call reached exactly the process the step captured.
      const instances = real.processes.instances(call.server);
      const where = instances.findIndex((i, k) => i.calls() !== (allBefore[k] ?? 0));
      agree(real, `process that ran ${call.modelName}`, instances[where]?.id, target?.id);
    }
  }
  toString = (): string => `runCall(call#${this.callPick})`;
}

class ReleaseBinding implements Cmd {
  constructor(readonly bindingPick: number) {}
  check = (model: Readonly<RuntimeOracle>): boolean => model.bindingCount > 0;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const index = this.bindingPick % model.bindingCount;
    model.releaseBinding(index);
    real.bindings[index]?.release();
  }
  toString = (): string => `releaseBinding(binding#${this.bindingPick})`;
}

class CrashServer implements Cmd {
  constructor(readonly server: string) {}
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    if (!model.alive(this.server)) return;
    model.crash(this.server);
    await real.current.get(this.server)?.crash();
    for (let i = 0; i < 1000 && !real.runtime.dirty; i++) await new Promise((r) => setImmediate(r));
    agree(real, `dirty after crash of ${this.server}`, real.runtime.dirty, true);
  }
  toString = (): string => `crashServer(${this.server})`;
}

class FailNextStart implements Cmd {
  constructor(readonly server: string) {}
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.failNextStart(this.server);
    real.processes.failNextConnect(this.server);
  }
  toString = (): string => `failNextStart(${this.server})`;
}

class ChangeConfig implements Cmd {
  constructor(readonly server: string) {}
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.changeConfig(this.server);
    const versions = real.configVersions;
    versions.set(this.server, (versions.get(this.server) ?? 0) + 1);
    real.runtime.updateConfig(real.processes.config(versions));
  }
  toString = (): string => `changeConfig(${this.server})`;
}

class RaisePolicyEpoch implements Cmd {
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.raisePolicyEpoch();
    real.runtime.setPolicyEpoch(real.runtime.registry.policyEpoch + 1);
  }
  toString = (): string => 'raisePolicyEpoch';
}

/** Options of {@link modelCommands}. */
export interface ModelCommandOptions {
  /** Server names (keys of the initial catalogs). @default ['a', 'b'] */
  readonly servers?: readonly string[];
  /** Most commands per run. @default 40 */
  readonly maxCommands?: number;
  /** Include `mutateCatalog` (servers must be in memory). @default true */
  readonly mutations?: boolean;
  /** Extra command arbitraries, for example an application's own agent-loop step. */
  readonly extra?: readonly fc.Arbitrary<ModelCommand>[];
}

const arbPages = (): fc.Arbitrary<ServedPages> =>
  fc
    .tuple(
      fc.subarray([...MODEL_TOOL_POOL]),
      fc.integer({ min: 0, max: 5 }),
      fc.integer({ min: 0, max: 5 }),
    )
    .map(([names, cut1, cut2]) => {
      const [x, y] = [Math.min(cut1, names.length), Math.min(cut2, names.length)].sort(
        (p, q) => p - q,
      ) as [number, number];
      const pages = [names.slice(0, x), names.slice(x, y), names.slice(y)].filter(
        (p, i) => i === 0 || p.length > 0,
      );
      return pages;
    });

/**
 * The commands of the model-based test, as a fast-check arbitrary: `markDirty`, `refreshIfDirty`,
 * `hardRefresh(server)`, `mutateCatalog(server, withListChanged | silent)`, `captureBinding`,
 * `prepareCall`, `runCall`, `releaseBinding`, `crashServer`, `failNextStart` (a restart that fails
 * once), `changeConfig` and `raisePolicyEpoch`.
 */
export function modelCommands(options: ModelCommandOptions = {}): fc.Arbitrary<Iterable<Cmd>> {
  return fc.commands([...modelCommandArbitraries(options), ...(options.extra ?? [])], {
    maxCommands: options.maxCommands ?? 40,
    size: 'max',
  });
}

/** The built-in command arbitraries of {@link modelCommands}, to combine with your own. */
export function modelCommandArbitraries(
  options: Pick<ModelCommandOptions, 'servers' | 'mutations'> = {},
): fc.Arbitrary<ModelCommand>[] {
  const servers = options.servers ?? Object.keys(MODEL_INITIAL_CATALOGS);
  const server = fc.constantFrom(...servers);
  return [
    fc.constant(new MarkDirty()),
    fc.constant(new RefreshIfDirty()),
    server.map((s) => new HardRefresh(s)),
    fc.constant(new Capture()),
    fc.constant(new Capture()),
    fc.tuple(fc.nat(), fc.nat()).map(([b, t]) => new PrepareCall(b, t)),
    fc.tuple(fc.nat(), fc.nat()).map(([b, t]) => new PrepareCall(b, t)),
    fc.nat().map((c) => new RunCall(c)),
    fc.nat().map((c) => new RunCall(c)),
    fc.nat().map((c) => new RunCall(c)),
    fc.nat().map((b) => new ReleaseBinding(b)),
    server.map((s) => new CrashServer(s)),
    server.map((s) => new FailNextStart(s)),
    server.map((s) => new ChangeConfig(s)),
    fc.constant(new RaisePolicyEpoch()),
    ...(options.mutations === false
      ? []
      : [
          fc
            .tuple(server, arbPages(), fc.boolean())
            .map(([s, p, l]): ModelCommand => new MutateCatalog(s, p, l)),
        ]),
  ];
}

/**
 * Builds a fixed command sequence from their printed names (as fast-check prints a counterexample),
 * for regression tests: `markDirty`, `refreshIfDirty`, `hardRefresh(a)`,
 * `mutateCatalog(a, [["alpha"]], withListChanged|silent)`, `captureBinding`,
 * `prepareCall(binding#0, tool#1)`, `runCall(call#0)`, `releaseBinding(binding#0)`,
 * `crashServer(a)`, `failNextStart(a)`, `changeConfig(a)`, `raisePolicyEpoch`.
 *
 * @throws Error for a line it cannot read.
 */
export function modelScript(lines: readonly string[]): Cmd[] {
  return lines.map((line) => {
    const m = /^(\w+)(?:\((.*)\))?$/.exec(line.trim());
    const [, name, rawArgs = ''] = m ?? [];
    const nums = [...rawArgs.matchAll(/#(\d+)/g)].map((x) => Number(x[1]));
    const server = rawArgs.split(',')[0]?.trim() ?? '';
    switch (name) {
      case 'markDirty':
        return new MarkDirty();
      case 'refreshIfDirty':
        return new RefreshIfDirty();
      case 'hardRefresh':
        return new HardRefresh(server);
      case 'mutateCatalog': {
        const pages = JSON.parse(
          rawArgs.slice(rawArgs.indexOf(',') + 1, rawArgs.lastIndexOf(',')).trim(),
        ) as ServedPages;
        return new MutateCatalog(server, pages, rawArgs.trim().endsWith('withListChanged'));
      }
      case 'captureBinding':
        return new Capture();
      case 'prepareCall':
        return new PrepareCall(nums[0] ?? 0, nums[1] ?? 0);
      case 'runCall':
        return new RunCall(nums[0] ?? 0);
      case 'releaseBinding':
        return new ReleaseBinding(nums[0] ?? 0);
      case 'crashServer':
        return new CrashServer(server);
      case 'failNextStart':
        return new FailNextStart(server);
      case 'changeConfig':
        return new ChangeConfig(server);
      case 'raisePolicyEpoch':
        return new RaisePolicyEpoch();
      case undefined:
      default:
        throw new Error(`modelScript: cannot read "${line}"`);
    }
  });
}

/** Options of {@link createModelSystem}. */
export interface ModelSystemOptions {
  /** Initial catalog of each server. @default MODEL_INITIAL_CATALOGS */
  readonly catalogs?: Readonly<Record<string, ServedPages>>;
  /**
   * `memory`: scripted servers over in-memory transport pairs (fast, catalogs can change);
   * `stdio`: real child processes (`mutateCatalog` is not available; crashes are SIGKILL).
   * @default 'memory'
   */
  readonly transport?: 'memory' | 'stdio';
}

/**
 * Opens a real runtime over scripted servers (in memory or as stdio children) serving the initial
 * catalogs, with the oracle beside it. `cleanup` closes both and fails if anything is left open.
 */
export async function createModelSystem(
  options: ModelSystemOptions = {},
): Promise<{ model: RuntimeOracle; real: ModelSystem; cleanup: () => Promise<void> }> {
  const catalogs = options.catalogs ?? MODEL_INITIAL_CATALOGS;
  const processes =
    options.transport === 'stdio' ? stdioProcesses(catalogs) : memoryProcesses(catalogs);
  const events: RuntimeEvent[] = [];
  let runtime: McpRuntime;
  try {
    runtime = await McpRuntime.open(processes.config(new Map()), {
      connect: processes.connect,
      // The oracle models staleness, epochs and crashes, not approvals (they have their own tests).
      approval: 'none',
      listChangedDebounceMs: 0,
      onEvent: (e) => events.push(e),
    });
  } catch (error) {
    await processes.close();
    throw error;
  }
  const model = new RuntimeOracle(catalogs);
  const real: ModelSystem = {
    runtime,
    processes,
    events,
    bindings: [],
    boundInstances: [],
    calls: [],
    current: new Map(),
    sessionIds: new Map(),
    configVersions: new Map(),
    comparisons: 0,
  };
  trackSessions(model, real);
  return {
    model,
    real,
    cleanup: async () => {
      const pids = runtime.pids();
      await runtime.close();
      const open = runtime.status().liveConnections;
      await processes.close();
      const alive = pids.filter((pid) => isProcessAlive(pid));
      if (open !== 0 || alive.length > 0) {
        throw new OracleDisagreement(
          `after close(): ${open} connection(s) and ${alive.length} process(es) still open`,
        );
      }
    },
  };
}

const fixtureOf = (pages: ServedPages): ServerFixture => ({
  generations: [{ pages: pages.map((page) => ({ tools: page.map((t) => scriptedTool(t)) })) }],
});

function memoryProcesses(
  catalogs: Readonly<Record<string, ServedPages>>,
): ProcessControl & { connect: ServerConnector } {
  const fleet = createInMemoryFleet(
    Object.fromEntries(
      Object.entries(catalogs).map(([name, pages]) => [
        name,
        { scenario: 'fixture' as const, fixture: fixtureOf(pages) },
      ]),
    ),
  );
  const ids = new WeakMap<ScriptedServer, number>();
  let counter = 0;
  const wrap = (server: ScriptedServer): ServerProcess => {
    let id = ids.get(server);
    if (id === undefined) {
      id = ++counter;
      ids.set(server, id);
    }
    return {
      id,
      calls: () => server.audit.filter((e) => e.method === 'tools/call').length,
      replaceCatalog: (pages) => {
        server.replaceCatalog(pages.map((page) => page.map((t) => scriptedTool(t))));
      },
      notifyListChanged: () => server.notifyListChanged(),
      crash: () => server.close(),
    };
  };
  return {
    connect: fleet.connect,
    mutable: true,
    instances: (name) => fleet.instances(name).map(wrap),
    failNextConnect: (name) => fleet.failNextConnect(name, 'once'),
    config: (versions) => {
      const overrides: Record<string, Record<string, unknown>> = {};
      for (const [name, v] of versions) overrides[name] = { args: [name, `v${v}`] };
      return fleet.config(overrides);
    },
    close: () => fleet.close(),
  };
}

function stdioProcesses(
  catalogs: Readonly<Record<string, ServedPages>>,
): ProcessControl & { connect: ServerConnector } {
  const audits = new Map(
    Object.keys(catalogs).map((name) => [name, tempAuditPath(`model-${name}`)]),
  );
  const failing = new Set<string>();
  const read = (name: string): AuditEntry[] => {
    const path = audits.get(name);
    if (path === undefined || !existsSync(path)) return [];
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as AuditEntry);
  };
  return {
    connect: async (name, config, { signal }) => {
      if (failing.delete(name)) throw new Error(`scripted start failure of stdio server "${name}"`);
      return connectServer(name, config, { signal });
    },
    mutable: false,
    instances: (name) => {
      const entries = read(name);
      const pids = [...new Set(entries.map((e) => e.pid))];
      return pids.map((pid) => ({
        id: pid,
        calls: () => read(name).filter((e) => e.pid === pid && e.method === 'tools/call').length,
        crash: async () => {
          if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
          for (let i = 0; i < 500 && isProcessAlive(pid); i++) {
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        },
      }));
    },
    failNextConnect: (name) => {
      failing.add(name);
    },
    config: (versions) => {
      const mcpServers: Record<string, unknown> = {};
      for (const [name, pages] of Object.entries(catalogs)) {
        const auditPath = audits.get(name) ?? tempAuditPath(name);
        mcpServers[name] = {
          ...stdioServerParams({ scenario: 'fixture', fixture: fixtureOf(pages), auditPath }),
          // A new config version changes the transport identity (env) without changing the server.
          env: { STEPBIND_MODEL_CONFIG: String(versions.get(name) ?? 0) },
        };
      }
      return { mcpServers };
    },
    close: async () => {
      for (const path of audits.values()) rmSync(path, { force: true });
    },
  };
}

/**
 * Runs one command sequence against a fresh system and its oracle, closes both, and resolves to
 * the number of runtime/oracle comparisons made. Use it as the body of a fast-check property.
 *
 * @throws OracleDisagreement (or the command's own error) on the first disagreement.
 */
export async function runModel(
  commands: Iterable<ModelCommand>,
  options: ModelSystemOptions = {},
): Promise<number> {
  const { model, real, cleanup } = await createModelSystem(options);
  try {
    await fc.asyncModelRun(() => ({ model, real }), commands);
  } finally {
    await cleanup();
  }
  return real.comparisons;
}
