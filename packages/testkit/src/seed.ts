/** Seed and run count of one property run; print them so any failure can be replayed. */
export interface PropertyRun {
  readonly seed: number;
  readonly numRuns: number;
}

/**
 * The seed for a property: `STEPBIND_SEED` when set (to replay a failure), else a fresh one. Logs
 * `[name] seed=<seed> numRuns=<n>` so every run can be reproduced. `STEPBIND_RUNS` scales the run
 * count (a multiplier when it is a decimal like `0.1`, an absolute count when it is an integer > 1).
 */
export function propertyRun(name: string, defaultRuns: number): PropertyRun {
  const fromEnv = process.env['STEPBIND_SEED'];
  const seed =
    fromEnv !== undefined && fromEnv !== ''
      ? Number(fromEnv)
      : Date.now() ^ (Math.random() * 0x7fffffff);
  const runsEnv = Number(process.env['STEPBIND_RUNS'] ?? '');
  const numRuns =
    Number.isFinite(runsEnv) && runsEnv > 0
      ? runsEnv < 1
        ? Math.max(1, Math.round(defaultRuns * runsEnv))
        : Math.round(runsEnv)
      : defaultRuns;
  console.log(`[${name}] seed=${seed} numRuns=${numRuns} (replay: STEPBIND_SEED=${seed})`);
  return { seed, numRuns };
}

/** Options of {@link propertyParameters}. */
export interface PropertyParametersOptions {
  /** Label printed with the seed. @default "property" */
  readonly name?: string;
  /** Runs when `STEPBIND_RUNS` is not set. @default 100 */
  readonly numRuns?: number;
}

/** `fc.assert` parameters with a printed, replayable seed. */
export type PropertyParameters = PropertyRun;

/** Same as {@link propertyRun}, with an options bag. */
export function propertyParameters(options: PropertyParametersOptions = {}): PropertyParameters {
  return propertyRun(options.name ?? 'property', options.numRuns ?? 100);
}
