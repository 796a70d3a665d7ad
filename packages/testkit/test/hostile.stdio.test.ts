import { fileURLToPath } from 'node:url';
import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import { isProcessAlive } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { failure } from './support/errors.js';

// A raw JSON-RPC child (no SDK on its side) whose tools carry `^(a+)+$` in both schemas, answer
// with output built to trigger it, and return structured content nested 100,000 levels deep. A
// backtracking engine needs hours for 40 characters (13.6 s at 28, doubling per character): these
// tests finishing at all, with the right typed errors, is the proof that the loop never stalls.

const SERVER = fileURLToPath(new URL('./fixtures/hostile/server.mjs', import.meta.url));
const HOSTILE = 'a'.repeat(40) + '!';

const runtimes: McpRuntime[] = [];
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) {
    const pids = runtime.pids();
    await runtime.close();
    for (const pid of pids) expect(isProcessAlive(pid)).toBe(false);
  }
});

async function openHostile(
  events: RuntimeEvent[] = [],
  args: readonly string[] = [],
): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    // Validation is the subject here, not approvals: the hostile tools run without one.
    { mcpServers: { h: { command: process.execPath, args: [SERVER, ...args], approval: 'none' } } },
    { onEvent: (e) => events.push(e) },
  );
  runtimes.push(runtime);
  return runtime;
}

describe('a hostile stdio server cannot stall the event loop', () => {
  it('refuses a 40-character ReDoS argument against the input schema, and the connection stays usable', async () => {
    const runtime = await openHostile();
    await using step = await runtime.captureBinding();
    const error = await failure(step.prepareCall('h__redos').run({ s: HOSTILE }));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.message).toContain('/s must match pattern "^(a+)+$"');
    // The connection is intact and the event loop free: a valid call goes through.
    const ok = step.prepareCall('h__redos').run({ s: 'aaaa' });
    await expect(ok).rejects.toMatchObject({ code: 'INVALID_TOOL_OUTPUT' });
  });

  it("refuses the server's own 40-character ReDoS output against its output schema, while a concurrent timer keeps firing", async () => {
    const runtime = await openHostile();
    await using step = await runtime.captureBinding();
    let ticked: () => void = () => undefined;
    const timer = setInterval(() => ticked(), 1);
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 5 }, () =>
          failure(step.prepareCall('h__redos').run({ s: 'aaa' }, { timeoutMs: 20_000 })),
        ),
      );
      for (const error of outcomes) {
        expect(error.code).toBe('INVALID_TOOL_OUTPUT');
        expect(error.message).toContain('/s must match pattern "^(a+)+$"');
        expect(error.message).toContain('The call did run');
      }
      // The interval fires again after the validations: the loop is not blocked.
      await new Promise<void>((resolve) => {
        ticked = resolve;
      });
    } finally {
      clearInterval(timer);
    }
  });

  it('refuses 100,000-level structuredContent of a tool without an output schema as INVALID_TOOL_OUTPUT', async () => {
    const runtime = await openHostile();
    await using step = await runtime.captureBinding();
    const error = await failure(step.prepareCall('h__deep').run({}));
    expect(error.code).toBe('INVALID_TOOL_OUTPUT');
    expect(error.detail).toMatchObject({
      server: 'h',
      tool: 'deep',
      limit: 'maxOutputDepth',
      max: 128,
      // The call ran: a retry could run it twice.
      delivery: 'sent',
    });
    expect(error.message).toContain('nested deeper than 128 levels');
    // Nothing deep reached the caller: its own serialisation of the error works.
    expect(() => JSON.stringify(error.toJSON())).not.toThrow();
  });

  it('honours a per-server output depth limit from the configuration', async () => {
    const runtime = await McpRuntime.open({
      mcpServers: {
        h: {
          command: process.execPath,
          args: [SERVER, '--depth', '20'],
          approval: 'none',
          limits: { maxOutputDepth: 30 },
        },
      },
    });
    runtimes.push(runtime);
    await using step = await runtime.captureBinding();
    const { result } = await step.prepareCall('h__deep').run({});
    expect(result.structuredContent).toHaveProperty('a');
  });

  it('refuses 20,000-level nested arguments as INVALID_ARGUMENTS before anything is serialised', async () => {
    const runtime = await openHostile();
    await using step = await runtime.captureBinding();
    let args: Record<string, unknown> = {};
    for (let i = 0; i < 20_000; i++) args = { a: args };
    const error = await failure(step.prepareCall('h__deep').run(args));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.detail).toMatchObject({ limit: 'maxArgumentDepth', max: 64 });
    expect(error.message).toContain('Nothing was sent');
  });

  it('publishes a pattern RE2 cannot run, reports it in an event and the descriptor, and leaves it to the server', async () => {
    const events: RuntimeEvent[] = [];
    const runtime = await openHostile(events);
    const unenforced = {
      tool: 'lookahead',
      pointer: '/inputSchema/properties/w/pattern',
      pattern: '^(?=w)\\w+$',
      reason: 'lookahead has no RE2 equivalent',
    };
    expect(events.filter((e) => e.type === 'patterns-unenforced')).toEqual([
      { type: 'patterns-unenforced', server: 'h', generation: 1, patterns: [unenforced] },
    ]);
    await using step = await runtime.captureBinding();
    const call = step.prepareCall('h__lookahead');
    const { tool, ...record } = unenforced;
    expect(tool).toBe(call.descriptor.name);
    expect(call.descriptor.unenforcedPatterns).toEqual([record]);
    // Not enforced by stepbind: a value the pattern would refuse is sent.
    const { result } = await call.run({ w: 'not-w' });
    expect(result.content).toEqual([{ type: 'text', text: 'ok' }]);
  });
});
