import { describe, expect, it } from 'vitest';
import { OracleDisagreement } from '@stepbind/testkit';
import { checkAppLoop } from './own-agent-loop.js';

describe('examples/own-agent-loop', () => {
  it('an application loop agrees with the oracle under generated interleavings', async () => {
    expect(await checkAppLoop(100)).toBeGreaterThan(100);
    // CPU-bound property runs: generous on a loaded 2-CPU machine (two test workers).
  }, 120_000);

  it('finds a planted silent retry of a refused call (capture and reply are separate commands)', async () => {
    const failure: unknown = await checkAppLoop(300, { silentRetry: true }).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(Error);
    // fast-check reports the counterexample; the oracle's disagreement is its cause.
    const cause = (failure as Error).cause;
    expect(cause).toBeInstanceOf(OracleDisagreement);
    // The planted retry ran the call (or failed another way) where the oracle says it is stale.
    expect((cause as Error).message).toMatch(
      /^app reply to step #\d+: runtime .*, oracle .*"STALE_CATALOG"/,
    );
  }, 120_000);
});
