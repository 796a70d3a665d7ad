/**
 * `pnpm soak [runs]`: runs the model-based test (the real runtime against the independent oracle)
 * for 100,000 generated command sequences by default, in chunks, and prints the oracle agreement
 * rate (it must be 100%), the runs per second and the seed. A disagreeing run is printed with its
 * counterexample and replay command; the script then exits 1. Then it runs the journal's kill
 * campaign (SIGKILLed agent processes, issue 10) for `STEPBIND_SOAK_KILL_POINTS` kill points
 * (default 1000; 0 skips it).
 */
import fc from 'fast-check';
import { modelCommands, runModel } from '@stepbind/testkit';
import { runKillCampaign } from '../packages/runtime/test/journal/kill/harness.js';

const total = Number(process.argv[2] ?? process.env['STEPBIND_SOAK_RUNS'] ?? 100_000);
const seed = Number(process.env['STEPBIND_SEED'] ?? Date.now() % 2_147_483_647);
const chunk = 1_000;

let runs = 0;
let agreeingRuns = 0;
let comparisons = 0;
const failures: string[] = [];
const started = performance.now();
console.log(`soak: ${total} runs, seed=${seed} (replay a chunk with STEPBIND_SEED=<chunk seed>)`);

for (let offset = 0; offset < total; offset += chunk) {
  const numRuns = Math.min(chunk, total - offset);
  const chunkSeed = seed + offset;
  const result = await fc.check(
    fc.asyncProperty(modelCommands({ maxCommands: 30 }), async (commands) => {
      comparisons += await runModel(commands);
    }),
    { seed: chunkSeed, numRuns, endOnFailure: true },
  );
  // fast-check stops a chunk at its first failure (then shrinks); count what ran.
  const ran = result.failed ? result.numRuns : numRuns;
  runs += ran;
  agreeingRuns += result.failed ? ran - 1 : ran;
  if (result.failed) {
    failures.push(
      `chunk seed ${chunkSeed}: ${String(result.errorInstance)}\n  counterexample: ${fc.stringify(result.counterexample)}`,
    );
  }
  const seconds = (performance.now() - started) / 1000;
  if ((offset / chunk) % 10 === 9 || offset + chunk >= total) {
    console.log(
      `  ${runs} runs, ${comparisons} comparisons, agreement ${((agreeingRuns / runs) * 100).toFixed(3)}%, ${(runs / seconds).toFixed(1)} runs/s`,
    );
  }
}

const seconds = (performance.now() - started) / 1000;
console.log('');
console.log(`runs:        ${runs}`);
console.log(`comparisons: ${comparisons} (runtime vs oracle, every command)`);
console.log(`agreement:   ${((agreeingRuns / runs) * 100).toFixed(4)}% of runs`);
console.log(`speed:       ${(runs / seconds).toFixed(1)} runs/s over ${seconds.toFixed(0)} s`);
console.log(`seed:        ${seed}`);
for (const f of failures) console.log(`DISAGREEMENT ${f}`);

const killPoints = Number(process.env['STEPBIND_SOAK_KILL_POINTS'] ?? 1_000);
let killProblems: readonly string[] = [];
if (killPoints > 0) {
  console.log('');
  console.log(`kill campaign: ${killPoints} kill points, seed=${seed}`);
  const report = await runKillCampaign({
    killPoints,
    seed,
    onBatch: (b) => {
      if (b.batch % 10 === 9) console.log(`  lane ${b.lane}: ${b.batch + 1} batches`);
    },
  });
  killProblems = report.problems;
  console.log(`kill points: ${report.killPoints} (${JSON.stringify(report.byPoint)})`);
  console.log(
    `agent processes: ${report.runs} in ${report.batches} batches, ${report.keys} keys, ${report.seconds.toFixed(0)} s`,
  );
  console.log(`problems:    ${report.problems.length}`);
  for (const p of report.problems) console.log(`KILL PROBLEM ${p}`);
}
process.exitCode = failures.length === 0 && killProblems.length === 0 ? 0 : 1;
