import fc from 'fast-check';
import { modelCommands, modelScript, propertyRun, runModel } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

describe('model-based: the runtime agrees with the independent oracle', () => {
  it('on every command of 1,000 generated command sequences (in-memory servers)', async () => {
    const { seed, numRuns } = propertyRun('model', 1000);
    let comparisons = 0;
    await fc.assert(
      fc.asyncProperty(modelCommands({ maxCommands: 30 }), async (commands) => {
        comparisons += await runModel(commands);
      }),
      { seed, numRuns },
    );
    console.log(
      `[model] ${numRuns} runs, ${comparisons} runtime/oracle comparisons, 100% agreement`,
    );
    expect(comparisons).toBeGreaterThan(numRuns);
    // CPU-bound: on a loaded 2-CPU machine (two test workers) it can take well over 30 s.
  }, 180_000);
});

describe('model-based over real stdio child processes', () => {
  it('agrees with the oracle on generated sequences with real processes (SIGKILL crashes)', async () => {
    const { seed, numRuns } = propertyRun('model-stdio', 15);
    let comparisons = 0;
    await fc.assert(
      fc.asyncProperty(modelCommands({ maxCommands: 12, mutations: false }), async (commands) => {
        comparisons += await runModel(commands, { transport: 'stdio' });
      }),
      { seed, numRuns },
    );
    console.log(`[model-stdio] ${numRuns} runs, ${comparisons} comparisons, 100% agreement`);
    expect(comparisons).toBeGreaterThan(numRuns);
  }, 120_000);
});

describe('model-based regressions (counterexamples found during development)', () => {
  const replay = (lines: readonly string[]): Promise<number> => runModel(modelScript(lines));

  it('a hard refresh after a policy epoch raise re-publishes the unchanged catalog (seed 1299599130)', async () => {
    expect(await replay(['raisePolicyEpoch', 'hardRefresh(a)', 'captureBinding'])).toBeGreaterThan(
      1,
    );
  });

  it('a late call from an old step after list_changed is refused unsent', async () => {
    const comparisons = await replay([
      'captureBinding',
      'prepareCall(binding#0, tool#1)',
      'mutateCatalog(a, [["alpha"],["gamma"]], withListChanged)',
      'runCall(call#0)',
      'captureBinding',
    ]);
    expect(comparisons).toBeGreaterThanOrEqual(5);
  });

  it('a crash, a failed restart and a successful one keep old steps refused and new steps whole', async () => {
    const comparisons = await replay([
      'captureBinding',
      'prepareCall(binding#0, tool#0)',
      'crashServer(b)',
      'failNextStart(b)',
      'captureBinding',
      'captureBinding',
      'runCall(call#0)',
    ]);
    expect(comparisons).toBeGreaterThanOrEqual(5);
  });
});

describe('model commands: check() states the real precondition', () => {
  it('skips commands whose target does not exist yet (no binding, no tool, no call)', async () => {
    const comparisons = await runModel(
      modelScript([
        'prepareCall(binding#0, tool#0)', // no binding yet: skipped
        'runCall(call#0)', // no call yet: skipped
        'releaseBinding(binding#0)', // no binding yet: skipped
        'captureBinding', // 1 comparison
        'prepareCall(binding#0, tool#9)', // binding 0 has 5 tools: skipped
        'prepareCall(binding#1, tool#0)', // no binding 1: skipped
        'prepareCall(binding#0, tool#4)', // 1 comparison
        'runCall(call#1)', // only call 0 exists: skipped
        'runCall(call#0)', // 4 comparisons (outcome, receipt, sent, process)
      ]),
    );
    expect(comparisons).toBe(6);
  });

  it('skips a crash or a catalog change of a server whose process is already dead', async () => {
    const comparisons = await runModel(
      modelScript([
        'crashServer(a)', // 2 comparisons (closed unexpectedly, dirty)
        'crashServer(a)', // dead: skipped
        'mutateCatalog(a, [["alpha"]], withListChanged)', // dead: skipped
        'hardRefresh(a)', // runs: 1 comparison (SERVER_NOT_READY)
        'crashServer(c)', // no such server: skipped
      ]),
    );
    expect(comparisons).toBe(3);
  });
});
