import fc from 'fast-check';
import type { ServedPages } from '../oracle.js';
import { MODEL_INITIAL_CATALOGS } from '../run.js';
import type { ModelCommand } from '../system.js';
import { Capture } from './capture.js';
import { ChangeConfig } from './change-config.js';
import { CrashServer } from './crash-server.js';
import { EditNextCatalog } from './edit-next-catalog.js';
import { FailNextStart } from './fail-next-start.js';
import { HardRefresh } from './hard-refresh.js';
import { MarkDirty } from './mark-dirty.js';
import { MutateCatalog } from './mutate-catalog.js';
import { PrepareCall } from './prepare-call.js';
import { RaisePolicyEpoch } from './raise-policy-epoch.js';
import { RefreshIfDirty } from './refresh-if-dirty.js';
import { ReleaseBinding } from './release-binding.js';
import { ReleaseLiveStart } from './release-live-start.js';
import { RestartWarm } from './restart-warm.js';
import { RunCall } from './run-call.js';

/** The tool names servers can serve in generated catalogs. */
export const MODEL_TOOL_POOL = ['alpha', 'beta', 'gamma', 'delta', 'omega'] as const;

/**
 * An index into a list the run builds (bindings, their tools, prepared calls), drawn by the
 * arbitrary: mostly among the first two (the oldest entries, which the interesting interleavings
 * make stale), sometimes up to `max`. An index the state does not have yet fails the command's
 * `check`, and fast-check skips the command.
 */
export const arbModelIndex = (max: number): fc.Arbitrary<number> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.nat({ max: Math.min(1, max) }) },
    { weight: 1, arbitrary: fc.nat({ max }) },
  );

/** Options of {@link modelCommands}. */
export interface ModelCommandOptions {
  /** Server names (keys of the initial catalogs). @default ['a', 'b'] */
  readonly servers?: readonly string[];
  /** Most commands per run. @default 40 */
  readonly maxCommands?: number;
  /** Include `mutateCatalog` and `editNextCatalog` (servers must be in memory). @default true */
  readonly mutations?: boolean;
  /**
   * Include the warm-start commands `restartWarm(eager | lazy)` and `releaseLiveStart(server)`
   * (DESIGN §19.2–§19.3; the system must be created with `cache: true`), and leave out
   * `raisePolicyEpoch` (a new runtime starts at epoch 0). @default false
   */
  readonly warm?: boolean;
  /** Extra command arbitraries, for example an application's own agent-loop step. */
  readonly extra?: readonly fc.Arbitrary<ModelCommand>[];
}

/** Catalogs of up to three pages over {@link MODEL_TOOL_POOL}, some tools in a second definition. */
export const arbPages = (): fc.Arbitrary<ServedPages> =>
  fc
    .tuple(
      fc.subarray([...MODEL_TOOL_POOL]),
      fc.integer({ min: 0, max: 5 }),
      fc.integer({ min: 0, max: 5 }),
    )
    // Some tools keep their name with another definition (`beta~1`): a changed tool (§19.2).
    .chain(([names, cut1, cut2]) =>
      fc
        .array(fc.boolean(), { minLength: names.length, maxLength: names.length })
        .map(
          (variants) =>
            [names.map((n, i) => (variants[i] === true ? `${n}~1` : n)), cut1, cut2] as const,
        ),
    )
    .map(([names, cut1, cut2]) => {
      const [x, y] = [Math.min(cut1, names.length), Math.min(cut2, names.length)].sort(
        (p, q) => p - q,
      ) as [number, number];
      return [names.slice(0, x), names.slice(x, y), names.slice(y)].filter(
        (p, i) => i === 0 || p.length > 0,
      );
    });

/**
 * The commands of the model-based test, as a fast-check arbitrary: `markDirty`, `refreshIfDirty`,
 * `hardRefresh(server)`, `mutateCatalog(server, withListChanged | silent)`, `captureBinding`,
 * `prepareCall`, `runCall`, `releaseBinding`, `crashServer`, `failNextStart` (a restart that fails
 * once), `changeConfig` and `raisePolicyEpoch`; with `warm`, also `restartWarm`,
 * `releaseLiveStart` and `editNextCatalog` (DESIGN §19.2–§19.3). Each file of `model/commands/` holds one.
 */
export function modelCommands(
  options: ModelCommandOptions = {},
): fc.Arbitrary<Iterable<ModelCommand>> {
  return fc.commands([...modelCommandArbitraries(options), ...(options.extra ?? [])], {
    maxCommands: options.maxCommands ?? 40,
    size: 'max',
  });
}

/** The built-in command arbitraries of {@link modelCommands}, to combine with your own. */
export function modelCommandArbitraries(
  options: Pick<ModelCommandOptions, 'servers' | 'mutations' | 'warm'> = {},
): fc.Arbitrary<ModelCommand>[] {
  const servers = options.servers ?? Object.keys(MODEL_INITIAL_CATALOGS);
  const server = fc.constantFrom(...servers);
  // Sized to what a sequence of 30 commands builds: a few bindings of about 5 tools (up to 10
  // after mutations), a few prepared calls.
  const binding = arbModelIndex(5);
  const tool = fc.oneof(
    { weight: 3, arbitrary: fc.nat({ max: 4 }) },
    { weight: 1, arbitrary: fc.nat({ max: 9 }) },
  );
  const call = arbModelIndex(5);
  const prepare = fc.tuple(binding, tool).map(([b, t]): ModelCommand => new PrepareCall(b, t));
  const run = call.map((c): ModelCommand => new RunCall(c));
  return [
    fc.constant(new MarkDirty()),
    fc.constant(new RefreshIfDirty()),
    server.map((s) => new HardRefresh(s)),
    fc.constant(new Capture()),
    fc.constant(new Capture()),
    prepare,
    prepare,
    prepare,
    run,
    run,
    run,
    binding.map((b) => new ReleaseBinding(b)),
    server.map((s) => new CrashServer(s)),
    server.map((s) => new FailNextStart(s)),
    server.map((s) => new ChangeConfig(s)),
    ...(options.warm === true
      ? [
          // Weighted so that most runs restart warm, and calls meet held and released starts.
          fc.boolean().map((lazy): ModelCommand => new RestartWarm(lazy)),
          fc.boolean().map((lazy): ModelCommand => new RestartWarm(lazy)),
          server.map((s): ModelCommand => new ReleaseLiveStart(s)),
          server.map((s): ModelCommand => new ReleaseLiveStart(s)),
          server.map((s): ModelCommand => new ReleaseLiveStart(s)),
        ]
      : [fc.constant(new RaisePolicyEpoch())]),
    ...(options.mutations === false
      ? []
      : [
          fc
            .tuple(server, arbPages(), fc.boolean())
            .map(([s, p, l]): ModelCommand => new MutateCatalog(s, p, l)),
          ...(options.warm === true
            ? [
                fc
                  .tuple(server, arbPages())
                  .map(([s, p]): ModelCommand => new EditNextCatalog(s, p)),
                fc
                  .tuple(server, arbPages())
                  .map(([s, p]): ModelCommand => new EditNextCatalog(s, p)),
              ]
            : []),
        ]),
  ];
}

/**
 * Builds a fixed command sequence from their printed names (as fast-check prints a counterexample),
 * for regression tests: `markDirty`, `refreshIfDirty`, `hardRefresh(a)`,
 * `mutateCatalog(a, [["alpha"]], withListChanged|silent)`, `captureBinding`,
 * `prepareCall(binding#0, tool#1)`, `runCall(call#0)`, `releaseBinding(binding#0)`,
 * `crashServer(a)`, `failNextStart(a)`, `changeConfig(a)`, `raisePolicyEpoch`, `restartWarm(lazy)`,
 * `restartWarm(eager)`, `releaseLiveStart(a)`, `editNextCatalog(a, [["beta~1"]])`. As in a generated
 * run, a command whose target does not exist when it comes (its `check` fails) is skipped.
 *
 * @throws Error for a line it cannot read.
 */
export function modelScript(lines: readonly string[]): ModelCommand[] {
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
      case 'restartWarm':
        return new RestartWarm(rawArgs.trim() === 'lazy');
      case 'releaseLiveStart':
        return new ReleaseLiveStart(server);
      case 'editNextCatalog':
        return new EditNextCatalog(
          server,
          JSON.parse(rawArgs.slice(rawArgs.indexOf(',') + 1)) as ServedPages,
        );
      case undefined:
      default:
        throw new Error(`modelScript: cannot read "${line}"`);
    }
  });
}
