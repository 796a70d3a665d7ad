import {
  Agent,
  run,
  setTracingDisabled,
  Usage,
  type AgentOutputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type StreamEvent,
} from '@openai/agents';
import {
  stepbindServer,
  stepToAgentTools,
  type OpenAiAgentsCallEvent,
} from '@stepbind/runtime/openai-agents';
import { beforeAll, describe, expect, it } from 'vitest';
import { nextEvent } from '../support/events.js';
import { openOps, releaseFixture, type Ops } from '../support/ops.js';

// No trace export (it would look for an OpenAI key): these runs never leave the machine.
beforeAll(() => setTracingDisabled(true));

const FIXTURE = releaseFixture({
  plan: { text: 'plan ready' },
  deploy: { text: 'deployed' },
  report: { text: 'all healthy' },
});

const openOpsServer = (): Promise<Ops> => openOps('openai-agents', FIXTURE);

/**
 * A model (the Agents SDK's own extension point, its `Model` interface) that answers each request
 * with the next scripted output and records the requests.
 */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  readonly #script: (n: number) => AgentOutputItem[] | Promise<AgentOutputItem[]>;

  constructor(script: (n: number) => AgentOutputItem[] | Promise<AgentOutputItem[]>) {
    this.#script = script;
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const output = await this.#script(this.requests.length);
    return { usage: new Usage(), output, responseId: `r${this.requests.length}` };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('ScriptedModel does not stream');
  }
}

const callTool = (callId: string, name: string, args: object = {}): AgentOutputItem[] => [
  { type: 'function_call', callId, name, arguments: JSON.stringify(args), status: 'completed' },
];

const say = (text: string): AgentOutputItem[] => [
  {
    type: 'message',
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text }],
  },
];

const toolNames = (request: ModelRequest | undefined): string[] =>
  (request?.tools ?? []).map((t): string => t.name);

/** The tool outputs the model was shown in a request, by call id. */
function toolOutputs(request: ModelRequest | undefined): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const input = typeof request?.input === 'string' ? [] : (request?.input ?? []);
  for (const item of input) {
    if (item.type === 'function_call_result') out.set(item.callId, item.output);
  }
  return out;
}

const approveAll = (ctx: { approve(): void }): void => ctx.approve();

describe('stepbindServer as an MCP server of an OpenAI Agents run over a real stdio server', () => {
  it('lists a step per turn and runs the calls through it, with receipts', async () => {
    const { runtime, calls } = await openOpsServer();
    const seen: OpenAiAgentsCallEvent[] = [];
    const model = new ScriptedModel((n) =>
      n === 1 ? callTool('c1', 'ops__report') : say('All healthy.'),
    );
    const server = stepbindServer(runtime, { prepare: approveAll, onCall: (e) => seen.push(e) });
    const agent = new Agent({ name: 'ops', instructions: 'Run ops.', model, mcpServers: [server] });

    const result = await run(agent, 'Report.');
    await server.close();

    expect(result.finalOutput).toBe('All healthy.');
    expect(toolNames(model.requests[0])).toEqual(['ops__plan', 'ops__deploy', 'ops__report']);
    expect(toolOutputs(model.requests[1]).get('c1')).toEqual([
      { type: 'input_text', text: 'all healthy' },
    ]);
    expect(seen.map((e) => e.ok && [e.modelName, e.receipt.tool, e.receipt.stepId])).toEqual([
      ['ops__report', 'report', 'step-1'],
    ]);
    // One step per turn: the two turns captured step-1 and step-2.
    await using next = await runtime.captureBinding();
    expect(next.stepId).toBe('step-3');
    expect(await calls()).toEqual(['report']);
  });

  it('refuses a call whose catalog changed after its turn listed the tools (STALE_CATALOG shown to the model)', async () => {
    const { runtime, log, calls } = await openOpsServer();
    const seen: OpenAiAgentsCallEvent[] = [];
    const model = new ScriptedModel(async (n) => {
      if (n === 1) {
        // While the model thinks, the catalog changes (another caller runs plan).
        const swapped = nextEvent(log, 'catalog-swapped');
        await using side = await runtime.captureBinding();
        await side.prepareCall('ops__plan').run({}, { prepare: approveAll });
        await swapped;
        return callTool('c1', 'ops__deploy', { env: 'prod' });
      }
      return say('Giving up.');
    });
    const server = stepbindServer(runtime, { prepare: approveAll, onCall: (e) => seen.push(e) });
    const agent = new Agent({ name: 'ops', instructions: 'Run ops.', model, mcpServers: [server] });

    const result = await run(agent, 'Deploy.');
    await server.close();

    expect(result.finalOutput).toBe('Giving up.');
    expect(toolOutputs(model.requests[1]).get('c1')).toMatchObject({
      type: 'text',
      text: 'The tool catalog of server "ops" changed; this call was not run. Call again with the tools of the next step.',
    });
    expect(seen.map((e) => (e.ok ? 'ok' : e.error.code))).toEqual(['STALE_CATALOG']);
    // The next turn listed the new catalog.
    expect(toolNames(model.requests[1])).toContain('ops__rollback');
    expect(await calls()).toEqual(['plan']);
  });

  it('refuses a call stepbind holds for approval when no prepare hook approves it', async () => {
    const { runtime, calls } = await openOpsServer();
    const model = new ScriptedModel((n) =>
      n === 1 ? callTool('d1', 'ops__deploy', { env: 'prod' }) : say('Could not deploy.'),
    );
    const server = stepbindServer(runtime);
    const agent = new Agent({ name: 'ops', instructions: 'Run ops.', model, mcpServers: [server] });
    await run(agent, 'Deploy.');
    await server.close();
    expect(toolOutputs(model.requests[1]).get('d1')).toMatchObject({
      type: 'text',
      text: expect.stringContaining(
        'needs an approval from the user before it runs; it was not run',
      ),
    });
    expect(await calls()).toEqual([]);
  });

  it('honours the dynamic and static tool filters the Agents SDK applies', async () => {
    const { runtime } = await openOpsServer();
    const model = new ScriptedModel(() => say('ok'));
    const asked: string[] = [];
    const dynamic = stepbindServer(runtime, {
      name: 'dynamic',
      toolFilter: async ({ agent }, t) => {
        asked.push(`${agent.name}:${t.name}`);
        return t.name !== 'ops__deploy';
      },
    });
    const agent = new Agent({
      name: 'ops',
      instructions: 'Run ops.',
      model,
      mcpServers: [dynamic],
    });
    await run(agent, 'hi');
    await dynamic.close();
    expect(toolNames(model.requests[0])).toEqual(['ops__plan', 'ops__report']);
    expect(asked).toEqual(['ops:ops__plan', 'ops:ops__deploy', 'ops:ops__report']);

    const fixed = stepbindServer(runtime, { toolFilter: { allowedToolNames: ['ops__report'] } });
    const second = new Agent({ name: 'ops', instructions: 'Run ops.', model, mcpServers: [fixed] });
    await run(second, 'hi');
    await fixed.close();
    expect(toolNames(model.requests[1])).toEqual(['ops__report']);
  });

  it('refuses unknown and wrong options', async () => {
    const { runtime } = await openOpsServer();
    expect(() => stepbindServer(runtime, { toolfilter: {} } as never)).toThrow(/toolFilter/);
    expect(() => stepbindServer(runtime, { timeoutMs: 0 })).toThrow(/timeoutMs/);
  });
});

describe('stepToAgentTools as function tools of an OpenAI Agents run over a real stdio server', () => {
  it('surfaces an approval as a run interruption; approved and resumed, the call runs once', async () => {
    const { runtime, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    const seen: OpenAiAgentsCallEvent[] = [];
    const model = new ScriptedModel((n) =>
      n === 1 ? callTool('d1', 'ops__deploy', { env: 'prod' }) : say('Deployed.'),
    );
    const tools = stepToAgentTools(step, { onCall: (e) => seen.push(e) });
    const agent = new Agent({ name: 'ops', instructions: 'Run ops.', model, tools });

    const first = await run(agent, 'Deploy.');
    expect(first.interruptions.map((i) => [i.type, i.name])).toEqual([
      ['tool_approval_item', 'ops__deploy'],
    ]);
    expect(await calls()).toEqual([]);

    for (const item of first.interruptions) first.state.approve(item);
    const resumed = await run(agent, first.state);
    expect(resumed.finalOutput).toBe('Deployed.');
    expect(toolOutputs(model.requests[1]).get('d1')).toMatchObject({ text: 'deployed' });
    expect(seen.map((e) => e.ok && e.receipt.idempotencyKey)).toEqual([
      expect.stringMatching(/:d1$/),
    ]);
    expect(await calls()).toEqual(['deploy']);
  });

  it('never runs a call whose interruption was rejected', async () => {
    const { runtime, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    const model = new ScriptedModel((n) =>
      n === 1 ? callTool('d1', 'ops__deploy', { env: 'prod' }) : say('Not deployed.'),
    );
    const agent = new Agent({
      name: 'ops',
      instructions: 'Run ops.',
      model,
      tools: stepToAgentTools(step),
    });
    const first = await run(agent, 'Deploy.');
    for (const item of first.interruptions) first.state.reject(item);
    const resumed = await run(agent, first.state);
    expect(resumed.finalOutput).toBe('Not deployed.');
    expect(await calls()).toEqual([]);
  });

  it('replays a repeated call id under the same stepKey instead of sending it again', async () => {
    const { runtime, calls } = await openOpsServer();
    const seen: OpenAiAgentsCallEvent[] = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      await using step = await runtime.captureBinding();
      const model = new ScriptedModel((n) =>
        n === 1 ? callTool('d1', 'ops__deploy', { env: 'prod' }) : say('done'),
      );
      const tools = stepToAgentTools(step, {
        stepKey: 'run-5:turn-1',
        prepare: approveAll,
        onCall: (e) => seen.push(e),
      });
      const agent = new Agent({ name: 'ops', instructions: 'Run ops.', model, tools });
      expect((await run(agent, 'Deploy.')).finalOutput).toBe('done');
      expect(toolOutputs(model.requests[1]).get('d1')).toMatchObject({ text: 'deployed' });
    }
    expect(seen.map((e) => e.ok && e.receipt.idempotencyKey)).toEqual([
      'run-5:turn-1:d1',
      'run-5:turn-1:d1',
    ]);
    expect(await calls()).toEqual(['deploy']);
  });

  it('shows the model a refusal as the tool output (STALE_CATALOG), nothing sent', async () => {
    const { runtime, log, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    const model = new ScriptedModel(async (n) => {
      if (n === 1) {
        const swapped = nextEvent(log, 'catalog-swapped');
        await using side = await runtime.captureBinding();
        await side.prepareCall('ops__plan').run({}, { prepare: approveAll });
        await swapped;
        return callTool('c1', 'ops__report');
      }
      return say('Giving up.');
    });
    const agent = new Agent({
      name: 'ops',
      instructions: 'Run ops.',
      model,
      tools: stepToAgentTools(step, { prepare: approveAll }),
    });
    expect((await run(agent, 'Report.')).finalOutput).toBe('Giving up.');
    expect(toolOutputs(model.requests[1]).get('c1')).toMatchObject({
      text: expect.stringContaining('The tool catalog of server "ops" changed'),
    });
    expect(await calls()).toEqual(['plan']);
  });
});
