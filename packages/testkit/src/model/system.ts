import type fc from 'fast-check';
import { isStepbindError, type McpBinding, type PreparedCall } from '@stepbind/binding/internal';
import type { McpRuntime, RuntimeEvent } from '@stepbind/runtime';
import type { EventLog } from '../events.js';
import type { RuntimeOracle, ServedPages } from './oracle.js';

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
  /**
   * The `mcpServers` configuration for the given per-server config versions; `lazy` sets
   * `"start": "lazy"` on every server.
   */
  config(versions: ReadonlyMap<string, number>, lazy?: boolean): unknown;
  /** The catalog the next process of `name` serves (in memory only). */
  setNextCatalog?(name: string, pages: ServedPages): void;
  /** True when catalogs can be changed at run time (in memory). */
  readonly mutable: boolean;
  close(): Promise<void>;
}

/** Holds the live starts of chosen servers until released (the runtime's `connect` waits). */
export interface StartGates {
  /** Holds every later start of each named server. */
  hold(names: Iterable<string>): void;
  /** Lets the held start of `name` (and every later one) proceed. */
  release(name: string): void;
  /** True when a start of `name` waits at its gate now. */
  isWaiting(name: string): boolean;
  /** Resolves once a start of `name` waits at its gate (at once when `name` is not held). */
  waiting(name: string): Promise<void>;
}

/** The real system under test, driven side by side with a {@link RuntimeOracle}. */
export interface ModelSystem {
  /** The runtime now open (a warm restart replaces it). */
  runtime: McpRuntime;
  /**
   * Closes the runtime and opens a new one over the same servers and catalog cache file, with the
   * live starts of `hold` held (see {@link StartGates}); `lazy` makes every server lazy. Only a
   * system created with `cache: true` can restart.
   */
  restart(options: { readonly lazy: boolean; readonly hold: readonly string[] }): Promise<void>;
  readonly gates: StartGates;
  /** Runs of calls that wait for a held live start, by call index, settled to their outcome. */
  readonly pending: Map<number, Promise<string>>;
  /**
   * Outcomes of runs of calls prepared from provisional steps, counted by `waited:CODE` (the run
   * waited for a held live start) or `direct:CODE`: what a run covered, for its statistics.
   */
  readonly provisionalOutcomes: Map<string, number>;
  /** The server process of each oracle session id seen so far. */
  readonly sessions: Map<number, ServerProcess>;
  readonly processes: ProcessControl;
  /** The runtime's events, oldest first (the same array as `log.events`). */
  readonly events: RuntimeEvent[];
  /** The runtime's events, to await one instead of polling. */
  readonly log: EventLog;
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

/**
 * A command of the model-based test: `check(model)` is its precondition on the oracle's state (a
 * command whose target does not exist is never run), `run` applies it to the oracle and to the
 * real system and compares what they show.
 */
export type ModelCommand = fc.AsyncCommand<RuntimeOracle, ModelSystem>;

/** Counts one outcome of a call prepared from a provisional step (see `provisionalOutcomes`). */
export function countProvisional(
  real: ModelSystem,
  how: 'waited' | 'direct',
  outcome: string,
): void {
  const key = `${how}:${outcome}`;
  real.provisionalOutcomes.set(key, (real.provisionalOutcomes.get(key) ?? 0) + 1);
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
      // A provisional server (session 0) has no live process in the current set.
      if (id === 0) real.current.delete(name);
      else if (latest !== undefined) {
        real.current.set(name, latest);
        real.sessions.set(id, latest);
      }
    }
  }
}

/** `'OK'` when `promise` resolves, the stepbind error code when it rejects with one. */
export async function outcomeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'OK';
  } catch (error) {
    if (isStepbindError(error)) return error.code;
    throw error;
  }
}

/** Whether `server` is one of the oracle's configured servers (a command's target exists). */
export const isServer = (model: Readonly<RuntimeOracle>, server: string): boolean =>
  model.servers.includes(server);

/**
 * How long {@link observe} waits before it calls a run hung. A guard against a run that never
 * ends (the soak has no test timeout), not a bound on how fast anything must be.
 */
const MODEL_HANG_GUARD_MS = 30_000;

/**
 * Awaits an event the command caused (from `real.log.next`, registered before the cause).
 *
 * @throws OracleDisagreement naming `what` when it has not happened after
 *   `MODEL_HANG_GUARD_MS` (30 s).
 */
export async function observe<T>(event: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new OracleDisagreement(`${what}: never observed (hang guard)`)),
      MODEL_HANG_GUARD_MS,
    );
  });
  try {
    return await Promise.race([event, hung]);
  } finally {
    clearTimeout(timer);
  }
}
