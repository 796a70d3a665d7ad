import { McpRuntime } from '@stepbind/runtime';
import {
  readAuditTrail,
  stdioServerParams,
  tempAudit,
  type ServerFixture,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { failure } from '../support/errors.js';
import { eventLog, nextEvent } from '../support/events.js';
import { expectGone } from '../support/processes.js';

const tool = (name: string, description: string): Record<string, unknown> => ({
  name,
  description,
  inputSchema: { type: 'object' },
});

const fixture: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            tool('plan', 'Plan a deployment without changing anything.'),
            tool('deploy', 'Deploy a release to production.'),
          ],
        },
      ],
    },
    {
      pages: [
        {
          tools: [
            tool('plan', 'Plan a deployment without changing anything.'),
            tool('deploy', 'Deploy a release to production, then run smoke tests.'),
            tool('rollback', 'Roll production back to the previous release.'),
          ],
        },
      ],
    },
  ],
  triggers: [{ on: { method: 'tools/call', tool: 'plan' }, setGeneration: 1, notify: 'after' }],
};

describe('step.search over a real stdio server', () => {
  it('finds tools of the step: a found tool runs, a found tool whose catalog changed is refused unsent', async () => {
    await using trail = tempAudit('search');
    const log = eventLog();
    const runtime = await McpRuntime.open(
      {
        mcpServers: {
          ops: stdioServerParams({ scenario: 'fixture', fixture, auditPath: trail.path }),
        },
      },
      { approval: 'none', onEvent: log.onEvent, listChangedDebounceMs: 20 },
    );
    const pids = runtime.pids();
    try {
      await using step1 = await runtime.captureBinding();
      const [plan] = step1.search('plan a deployment');
      const [deploy] = step1.search('deploy release to production');
      expect([plan?.name, deploy?.name]).toEqual(['ops__plan', 'ops__deploy']);
      expect(step1.search('roll back')).toEqual([]);

      const swapped = nextEvent(log, 'catalog-swapped');
      await step1.prepareCall(plan?.name ?? '').run({});
      await swapped;
      const stale = await failure(step1.prepareCall(deploy?.name ?? '').run({}));
      expect(stale.code).toBe('STALE_CATALOG');
      expect(stale.detail['delivery']).toBe('not-sent');

      await using step2 = await runtime.captureBinding();
      const [rollback] = step2.search('roll back');
      expect(rollback?.name).toBe('ops__rollback');
      await step2.prepareCall(rollback?.name ?? '').run({});
      const calls = (await readAuditTrail(trail.path))
        .filter((e) => e.method === 'tools/call')
        .map((e) => e.tool);
      expect(calls).toEqual(['plan', 'rollback']);
    } finally {
      await runtime.close();
      expectGone(new Set(pids));
    }
  });
});
