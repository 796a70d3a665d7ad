import { McpRuntime, toOpenAIResponsesTools } from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { expectGone } from './support/processes.js';

describe('the step view', () => {
  it('gives the model the same tool as toModelTools: a non-string description becomes ""', async () => {
    const fixture = {
      generations: [
        {
          pages: [{ tools: [{ name: 'odd', description: 42, inputSchema: { type: 'object' } }] }],
        },
      ],
    };
    const runtime = await McpRuntime.open({
      mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture }) },
    });
    const pids = runtime.pids();
    try {
      await using step = await runtime.captureBinding();
      expect(step.tools).toEqual([
        { name: 's__odd', description: '', inputSchema: { type: 'object' } },
      ]);
      expect(toOpenAIResponsesTools(step.tools).tools[0]).not.toHaveProperty('description');
    } finally {
      await runtime.close();
    }
    expectGone(pids);
  });
});
