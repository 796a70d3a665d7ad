import fc from 'fast-check';
import { McpRuntime, type ServerConnector } from '@stepbind/runtime';
import { isProcessAlive } from '../audit.js';
import { createEventLog } from '../events.js';
import { tempDir, type TempDir } from '../temp.js';
import { RuntimeOracle, type ServedPages } from './oracle.js';
import { memoryProcesses, stdioProcesses } from './processes.js';
import {
  OracleDisagreement,
  trackSessions,
  type ModelCommand,
  type ModelSystem,
  type StartGates,
} from './system.js';

/** Default initial catalogs of the model's servers. */
export const MODEL_INITIAL_CATALOGS: Readonly<Record<string, ServedPages>> = {
  a: [['alpha'], ['beta', 'gamma']],
  b: [['alpha', 'delta']],
};

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
  /**
   * Open the runtime with a catalog cache file (DESIGN §19.1) in a temp directory of its own, so
   * `restartWarm` can open a new runtime over the same servers and cache. @default false
   */
  readonly cache?: boolean;
  /** Called with the real system after the commands ran, before it closes (for statistics). */
  readonly onFinish?: (real: ModelSystem) => void;
}

/** A promise and the function that resolves it. */
function latch(): { readonly promise: Promise<void>; readonly open: () => void } {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

interface Gate {
  readonly opened: ReturnType<typeof latch>;
  readonly arrived: ReturnType<typeof latch>;
  waiting: boolean;
}

/** {@link StartGates} in front of a connector: a held start waits until released or aborted. */
function gatedConnector(connect: ServerConnector): {
  readonly connect: ServerConnector;
  readonly gates: StartGates;
} {
  const held = new Map<string, Gate>();
  const gates: StartGates = {
    hold(names) {
      for (const name of names)
        held.set(name, { opened: latch(), arrived: latch(), waiting: false });
    },
    release(name) {
      held.get(name)?.opened.open();
      held.delete(name);
    },
    isWaiting: (name) => held.get(name)?.waiting === true,
    waiting: (name) => held.get(name)?.arrived.promise ?? Promise.resolve(),
  };
  return {
    gates,
    connect: async (name, config, options) => {
      const gate = held.get(name);
      if (gate !== undefined) {
        const { signal } = options;
        gate.waiting = true;
        gate.arrived.open();
        await new Promise<void>((resolve, reject) => {
          const abort = (): void => reject(signal.reason as Error);
          if (signal.aborted) abort();
          signal.addEventListener('abort', abort, { once: true });
          void gate.opened.promise.then(() => {
            signal.removeEventListener('abort', abort);
            resolve();
          });
        });
      }
      return connect(name, config, options);
    },
  };
}

/**
 * Opens a real runtime over scripted servers (in memory or as stdio children) serving the initial
 * catalogs, with the oracle beside it. `cleanup` closes both, removes the servers' audit trails,
 * and fails if anything is left open.
 */
export async function createModelSystem(
  options: ModelSystemOptions = {},
): Promise<{ model: RuntimeOracle; real: ModelSystem; cleanup: () => Promise<void> }> {
  const catalogs = options.catalogs ?? MODEL_INITIAL_CATALOGS;
  const processes =
    options.transport === 'stdio' ? stdioProcesses(catalogs) : memoryProcesses(catalogs);
  const log = createEventLog();
  const { connect, gates } = gatedConnector(processes.connect);
  const dir: TempDir | undefined = options.cache === true ? tempDir('model-cache') : undefined;
  const openRuntime = (config: unknown): Promise<McpRuntime> =>
    McpRuntime.open(config, {
      connect,
      // The oracle models staleness, epochs and crashes, not approvals (they have their own tests).
      approval: 'none',
      listChangedDebounceMs: 0,
      onEvent: log.onEvent,
      ...(dir === undefined ? {} : { cache: { path: dir.file('catalogs.json') } }),
    });
  const pids = new Set<number>();
  let runtime: McpRuntime;
  try {
    runtime = await openRuntime(processes.config(new Map()));
  } catch (error) {
    await processes.close();
    await dir?.dispose();
    throw error;
  }
  const model = new RuntimeOracle(catalogs);
  const real: ModelSystem = {
    runtime,
    async restart({ lazy, hold }) {
      if (dir === undefined) throw new Error('restartWarm needs a model system with a cache');
      for (const pid of real.runtime.pids()) pids.add(pid);
      await real.runtime.close();
      gates.hold(hold);
      real.runtime = await openRuntime(processes.config(real.configVersions, lazy));
    },
    gates,
    pending: new Map(),
    provisionalOutcomes: new Map(),
    sessions: new Map(),
    processes,
    events: log.events,
    log,
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
      for (const pid of real.runtime.pids()) pids.add(pid);
      await real.runtime.close();
      // Runs still waiting for a held start end with the runtime (their outcome is not compared).
      await Promise.allSettled(real.pending.values());
      const open = real.runtime.status().liveConnections;
      await processes.close();
      await dir?.dispose();
      const alive = [...pids].filter((pid) => isProcessAlive(pid));
      if (open !== 0 || alive.length > 0) {
        throw new OracleDisagreement(
          `after close(): ${open} connection(s) and ${alive.length} process(es) still open`,
        );
      }
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
    options.onFinish?.(real);
  } finally {
    await cleanup();
  }
  return real.comparisons;
}
