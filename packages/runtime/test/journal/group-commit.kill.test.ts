/**
 * Group commit under SIGKILL (DESIGN §21.1): an agent process runs 16 keyed write calls at once
 * over real stdio on a `full` SQLite journal (their `SENT` records and completions share group
 * commits) and SIGKILLs itself at a seeded point: after the nth `SENT` write resolved (its group
 * committed, its call not written yet), after the nth call was written, after the nth answer, or
 * after the nth completion was recorded. A second agent then runs the same 16 keys on the same
 * journal. Whatever the point, no key reaches the server twice; a key the server saw is never run
 * again (replayed, or `OUTCOME_UNKNOWN` when its answer was lost with the process); every key the
 * first agent never sent runs once in the second; the receipt chain verifies.
 *
 * `STEPBIND_SEED` replays a run, `STEPBIND_RUNS` sets the number of kills.
 */
import fc from 'fast-check';
import { verifyChain } from '@stepbind/binding';
import { openSqliteJournal } from '@stepbind/runtime';
import {
  propertyRun,
  readAuditTrail,
  stdioServerParams,
  tempDir,
  type AuditEntry,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { AgentLane, FIXTURE } from './kill/harness.js';

const KEYS = 16;
const POINTS = ['before-send', 'after-send', 'after-answer', 'after-record'] as const;

describe('group commit under SIGKILL (real agent processes, a real stdio server)', () => {
  it(`never sends a key twice when ${KEYS} concurrent keyed calls are killed mid-group, and runs every unsent key once after`, async () => {
    const { seed, numRuns } = propertyRun('group-commit-kill', 12);
    const lane = new AgentLane();
    let runs = 0;
    const tally = new Map<string, { kills: number; sentBefore: number; unknown: number }>();
    try {
      await fc.assert(
        // Every point in turn (each run of the property takes the next), the nth one seeded.
        fc.asyncProperty(fc.integer({ min: 1, max: KEYS }), async (nth) => {
          const point = POINTS[runs++ % POINTS.length] ?? 'before-send';
          using dir = tempDir('group-kill');
          const auditPath = dir.file('audit.jsonl');
          const plan = {
            journal: dir.file('journal.db'),
            server: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }),
            keys: Array.from({ length: KEYS }, (_, i) => ({
              key: `g${i}`,
              tool: 'w1',
              args: { key: `g${i}` },
            })),
            passes: 1,
            concurrent: true,
          };
          const first = await lane.run({ ...plan, kill: { point, nth } });
          const sentFirst = sentKeys(await readAuditTrail(auditPath));
          const second = await lane.run({ ...plan, kill: null });
          const sends = sentKeys(await readAuditTrail(auditPath));

          // Never twice.
          for (const [key, count] of sends) expect(count, `${key} (${point} #${nth})`).toBe(1);
          const results = new Map(
            second.events.flatMap((e) => (e.event === 'result' ? [[e.key, e]] : [])),
          );
          expect(results.size).toBe(KEYS);
          for (const [key, result] of results) {
            if (sentFirst.has(key)) {
              // It ran in the killed agent: replayed, or its answer died with the process.
              const outcome = result.ok
                ? result.replayed
                  ? 'replayed'
                  : 'ran again'
                : result.code;
              expect(['replayed', 'OUTCOME_UNKNOWN'], `${key} (${point} #${nth})`).toContain(
                outcome,
              );
            } else if (!result.ok) {
              // Never sent: only a SENT record left by the kill (its call not yet written) may
              // keep it from running, and then it is OUTCOME_UNKNOWN, never run.
              expect(result.code, `${key} (${point} #${nth})`).toBe('OUTCOME_UNKNOWN');
            } else {
              expect(result.replayed, `${key} (${point} #${nth})`).toBe(false);
            }
          }
          const store = openSqliteJournal({ path: plan.journal, readOnly: true });
          try {
            const chain = verifyChain(await store.anchor(), await store.readReceipts());
            expect(chain.ok, JSON.stringify(chain)).toBe(true);
          } finally {
            await store.close();
          }
          const row = tally.get(point) ?? { kills: 0, sentBefore: 0, unknown: 0 };
          if (first.killed) row.kills++;
          row.sentBefore += sentFirst.size;
          row.unknown += [...results.values()].filter((r) => !r.ok).length;
          tally.set(point, row);
          expect(first.killed, `the first agent reached ${point} #${nth}`).toBe(true);
        }),
        { seed, numRuns, endOnFailure: true },
      );
    } finally {
      await lane.close();
    }
    console.log(
      `[group-commit-kill] seed=${seed}\n| kill point | kills | keys sent before the kill | OUTCOME_UNKNOWN after |\n|---|---|---|---|`,
    );
    for (const [point, row] of tally) {
      console.log(`| ${point} | ${row.kills} | ${row.sentBefore} | ${row.unknown} |`);
    }
  }, 300_000);
});

/** How many times each key reached the server (`tools/call` entries of the audit trail). */
function sentKeys(audit: readonly AuditEntry[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const entry of audit) {
    if (entry.method !== 'tools/call') continue;
    const key = String(entry.arguments?.['key']);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}
