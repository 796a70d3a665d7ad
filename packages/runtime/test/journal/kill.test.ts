/**
 * Kill tests (issue 10): agent-loop child processes are SIGKILLed at seeded random points (before
 * the intent, after it, after the SENT record, after sending, after the answer, after recording)
 * and restarted on the same journal. Against the server's audit trail and an independent oracle:
 * no write key reaches the server twice, every key ends COMPLETED or OUTCOME_UNKNOWN as predicted,
 * replays equal the originals, recovery lists exactly the keys a kill left in progress, and the
 * receipts chain verifies. `STEPBIND_KILL_POINTS` sets the count (at least 200 here; more in
 * `pnpm soak`), `STEPBIND_SEED` replays a campaign.
 */
import { describe, expect, it } from 'vitest';
import { KILL_POINTS, runKillCampaign } from './kill/harness.js';

const killPoints = Number(process.env['STEPBIND_KILL_POINTS'] ?? 200);
const seed = Number(process.env['STEPBIND_SEED'] ?? Date.now() % 2_147_483_647);

describe('journal under SIGKILL (real agent processes, real servers)', () => {
  it(`survives ${killPoints} kill points: no write key reaches the server twice, states and replays match the oracle, the chain verifies`, async () => {
    console.log(`[kill] seed=${seed} killPoints=${killPoints} (replay: STEPBIND_SEED=${seed})`);
    const report = await runKillCampaign({ killPoints, seed });
    console.log(
      `[kill] ${report.killPoints} kill points in ${report.batches} batches, ${report.runs} agent processes, ${report.keys} keys, ${report.seconds.toFixed(1)} s; by point: ${JSON.stringify(report.byPoint)}`,
    );
    expect(report.problems).toEqual([]);
    expect(report.killPoints).toBe(killPoints);
    if (killPoints >= 60)
      for (const point of KILL_POINTS) expect(report.byPoint[point]).toBeGreaterThan(0);
  }, 900_000);
});
