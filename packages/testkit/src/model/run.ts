import fc from 'fast-check';
import { McpRuntime } from '@stepbind/runtime';
import { isProcessAlive } from '../audit.js';
import { createEventLog } from '../events.js';
import { RuntimeOracle, type ServedPages } from './oracle.js';
import { memoryProcesses, stdioProcesses } from './processes.js';
import {
  OracleDisagreement,
  trackSessions,
  type ModelCommand,
  type ModelSystem,
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
  let runtime: McpRuntime;
  try {
    runtime = await McpRuntime.open(processes.config(new Map()), {
      connect: processes.connect,
      // The oracle models staleness, epochs and crashes, not approvals (they have their own tests).
      approval: 'none',
      listChangedDebounceMs: 0,
      onEvent: log.onEvent,
    });
  } catch (error) {
    await processes.close();
    throw error;
  }
  const model = new RuntimeOracle(catalogs);
  const real: ModelSystem = {
    runtime,
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
