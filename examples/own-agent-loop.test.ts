import { describe, expect, it } from 'vitest';
import { checkAppLoop } from './own-agent-loop.js';

describe('examples/own-agent-loop', () => {
  it('an application loop agrees with the oracle under generated interleavings', async () => {
    expect(await checkAppLoop(100)).toBeGreaterThan(100);
  });
});
