import fc from 'fast-check';
import {
  modelScript,
  propertyRun,
  runModel,
  warmModelCommands,
  type ModelSystem,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

/**
 * Warm starts against the oracle (DESIGN §19.2–§19.3): the runtime restarts over the same servers
 * and catalog cache, live starts are held so captures, calls and catalog changes come before and
 * after the live listing, and every outcome is compared.
 */
const replay = (lines: readonly string[]): Promise<number> =>
  runModel(modelScript(lines), { cache: true });

describe('model-based: provisional catalogs and lazy servers agree with the oracle', () => {
  it('on every command of 400 generated warm-start sequences (in-memory servers)', async () => {
    const { seed, numRuns } = propertyRun('model-provisional', 400);
    let comparisons = 0;
    const outcomes = new Map<string, number>();
    const onFinish = (real: ModelSystem): void => {
      for (const [k, n] of real.provisionalOutcomes) outcomes.set(k, (outcomes.get(k) ?? 0) + n);
    };
    await fc.assert(
      fc.asyncProperty(warmModelCommands({ maxCommands: 30 }), async (commands) => {
        comparisons += await runModel(commands, { cache: true, onFinish });
      }),
      { seed, numRuns },
    );
    const covered = [...outcomes].sort().map(([k, n]) => `${k} ${n}`);
    console.log(
      `[model-provisional] ${numRuns} runs, ${comparisons} runtime/oracle comparisons, 100% agreement; provisional calls: ${covered.join(', ')}`,
    );
    expect(comparisons).toBeGreaterThan(numRuns);
    // The runs reached the states that matter (a full run sees dozens of each): calls that waited
    // for a held live listing, provisional calls that ran, and ones refused as stale.
    const total = (pick: (key: string) => boolean): number =>
      [...outcomes].reduce((n, [k, v]) => (pick(k) ? n + v : n), 0);
    if (numRuns >= 100) {
      expect(total((k) => k.startsWith('waited:'))).toBeGreaterThan(0);
      expect(total((k) => k.endsWith(':OK'))).toBeGreaterThan(0);
      expect(total((k) => k.endsWith(':STALE_CATALOG'))).toBeGreaterThan(0);
    }
    // A hang guard, not a limit: with two workers on 2 CPUs, a failing seed's shrinking took over
    // two minutes under a mutant (DESIGN §21.4).
  }, 300_000);
});

describe('model-based warm starts over real stdio child processes', () => {
  it('agrees with the oracle on generated warm-start sequences with real processes', async () => {
    const { seed, numRuns } = propertyRun('model-provisional-stdio', 8);
    let comparisons = 0;
    await fc.assert(
      fc.asyncProperty(
        warmModelCommands({ maxCommands: 10, mutations: false }),
        async (commands) => {
          comparisons += await runModel(commands, { cache: true, transport: 'stdio' });
        },
      ),
      { seed, numRuns },
    );
    console.log(
      `[model-provisional-stdio] ${numRuns} runs, ${comparisons} comparisons, 100% agreement`,
    );
    expect(comparisons).toBeGreaterThan(numRuns);
  }, 120_000);
});

describe('model-based warm starts: regressions', () => {
  it('a call to a provisional tool changed before the live listing is refused unsent; an unchanged one runs on the live process', async () => {
    const comparisons = await replay([
      'captureBinding',
      'restartWarm(eager)',
      'captureBinding',
      'prepareCall(binding#0, tool#0)',
      'prepareCall(binding#0, tool#1)',
      'editNextCatalog(a, [["alpha"],["beta~1","gamma"]])',
      'runCall(call#0)',
      'runCall(call#1)',
      'releaseLiveStart(a)',
      'captureBinding',
    ]);
    // The released start settles both waiting calls: OK for alpha, STALE_CATALOG for beta~1.
    expect(comparisons).toBe(12);
  });

  it('a lazy server starts on its first call, not at open, and a failed start fails the call unsent', async () => {
    const comparisons = await replay([
      'restartWarm(lazy)',
      'releaseLiveStart(b)',
      'failNextStart(a)',
      'captureBinding',
      'prepareCall(binding#0, tool#0)',
      'prepareCall(binding#0, tool#3)',
      'runCall(call#1)',
      'runCall(call#0)',
      'releaseLiveStart(a)',
      'captureBinding',
    ]);
    expect(comparisons).toBe(15);
  });

  it('a required server whose held live start fails is started for real by the next capture', async () => {
    const comparisons = await replay([
      'failNextStart(b)',
      'restartWarm(eager)',
      'captureBinding',
      'releaseLiveStart(b)',
      'captureBinding',
    ]);
    expect(comparisons).toBe(6);
  });

  it('a provisional step keeps the live server its call moved onto after a refresh replaced it (runtime fix)', async () => {
    const comparisons = await replay([
      'restartWarm(eager)',
      'captureBinding',
      'prepareCall(binding#0, tool#0)',
      'markDirty',
      'refreshIfDirty',
      'releaseLiveStart(a)',
      'changeConfig(a)',
      'captureBinding',
      'runCall(call#0)',
    ]);
    // The call runs OK on the live process its step's server started, not CONNECTION_CLOSED.
    expect(comparisons).toBe(14);
  });

  it('the refused start of a provisional entry a new identity replaced leaves the runtime clean (runtime fix)', async () => {
    const comparisons = await replay([
      'restartWarm(lazy)',
      'captureBinding',
      'releaseLiveStart(b)',
      'changeConfig(b)',
      'prepareCall(binding#0, tool#3)',
      'captureBinding',
      'runCall(call#0)',
      'refreshIfDirty',
    ]);
    // runCall is SERVER_NOT_READY, not sent; the refresh after it has nothing to do.
    expect(comparisons).toBe(12);
  });
});
