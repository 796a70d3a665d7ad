import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isStepbindError } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import { isProcessAlive } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const entry = (pkg: string): string =>
  fileURLToPath(
    new URL(`../../../node_modules/@modelcontextprotocol/${pkg}/dist/index.js`, import.meta.url),
  );

let dir: string;
let runtime: McpRuntime;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-third-party-'));
  runtime = await McpRuntime.open({
    mcpServers: {
      // server-everything opts out of approvals; server-memory keeps the default (unproven-writes).
      everything: {
        command: process.execPath,
        args: [entry('server-everything'), 'stdio'],
        approval: 'none',
      },
      memory: {
        command: process.execPath,
        args: [entry('server-memory')],
        env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
      },
    },
  });
}, 60_000);
afterAll(async () => {
  const pids = runtime.pids();
  await runtime.close();
  expect(pids.filter((pid) => isProcessAlive(pid))).toEqual([]);
  await rm(dir, { recursive: true, force: true });
});

describe('third-party MCP servers from npm over stdio', () => {
  it('binds the tools of server-everything and server-memory with draft-07 schemas', async () => {
    await using step = await runtime.captureBinding();
    const names = step.tools.map((t) => t.name);
    expect(names).toContain('everything__echo');
    expect(names).toContain('memory__create_entities');
    expect(step.servers.every((s) => s.bound)).toBe(true);
  });

  it('calls echo and get-sum, and validates structured content against the frozen output schema', async () => {
    await using step = await runtime.captureBinding();
    const echo = await step.prepareCall('everything__echo').run({ message: 'hello' });
    expect(JSON.stringify(echo.result.content)).toContain('hello');
    const sum = await step.prepareCall('everything__get-sum').run({ a: 2, b: 3 });
    expect(JSON.stringify(sum.result.content)).toContain('5');
    const weather = await step
      .prepareCall('everything__get-structured-content')
      .run({ location: 'Chicago' });
    expect(weather.result.structuredContent).toMatchObject({ temperature: expect.any(Number) });
    expect(weather.receipt.outputSchemaDigest).toMatch(/^sha256:/);
  });

  it('refuses arguments that break the input schema before anything is sent', async () => {
    await using step = await runtime.captureBinding();
    const error: unknown = await step
      .prepareCall('everything__get-sum')
      .run({ a: 'two', b: 3 })
      .catch((e: unknown) => e);
    expect(isStepbindError(error, 'INVALID_ARGUMENTS')).toBe(true);
  });

  it('refuses a state-changing call on server-memory without an approval, then runs it approved', async () => {
    await using step = await runtime.captureBinding();
    const args = {
      entities: [
        { name: 'stepbind', entityType: 'project', observations: ['binds tools per step'] },
      ],
    };
    const refused: unknown = await step
      .prepareCall('memory__create_entities')
      .run(args)
      .catch((e: unknown) => e);
    expect(isStepbindError(refused, 'APPROVAL_REQUIRED')).toBe(true);
    const approve = { prepare: (ctx: { approve(): void }) => ctx.approve() };
    const before = await step.prepareCall('memory__read_graph').run({}, approve);
    expect(JSON.stringify(before.result)).not.toContain('binds tools per step');
    const { receipt } = await step.prepareCall('memory__create_entities').run(args, approve);
    expect(receipt).toMatchObject({ server: 'memory', tool: 'create_entities', outcome: 'ok' });
    const graph = await step.prepareCall('memory__read_graph').run({}, approve);
    expect(JSON.stringify(graph.result)).toContain('binds tools per step');
  });
});
