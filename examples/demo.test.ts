import { describe, expect, it } from 'vitest';
import { agentLoopDemo } from './agent-loop-demo.js';
import { catalogDemo } from './catalog-demo.js';

describe('pnpm demo', () => {
  it('shows a complete three-page catalog and a typed CURSOR_REPEATED failure', async () => {
    const lines: string[] = [];
    expect(await catalogDemo((l) => lines.push(l))).toEqual([]);
    expect(lines.join('\n')).toContain('CURSOR_REPEATED');
  });

  it('refuses the stale call of step 1 unsent and runs it on the catalog of step 2', async () => {
    const lines: string[] = [];
    expect(await agentLoopDemo((l) => lines.push(l))).toEqual([]);
    expect(lines.join('\n')).toContain('ops__deploy refused: STALE_CATALOG');
    expect(lines.join('\n')).toContain('ops__deploy without an approval: APPROVAL_REQUIRED');
  });
});
