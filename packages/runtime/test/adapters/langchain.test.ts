import type { CallbackManagerForLLMRun } from '@langchain/core/callbacks/manager';
import {
  BaseChatModel,
  type BaseChatModelCallOptions,
} from '@langchain/core/language_models/chat_models';
import {
  AIMessage,
  HumanMessage,
  ToolMessage,
  type BaseMessage,
  type ToolCall,
} from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import type { DynamicStructuredTool } from '@langchain/core/tools';
import { isStepbindError } from '@stepbind/binding';
import {
  stepToLangChainTools,
  toLangChainContent,
  type LangChainCallEvent,
  type LangChainToolArtifact,
  type LangChainToolsOptions,
} from '@stepbind/runtime/langchain';
import { describe, expect, it } from 'vitest';
import { nextEvent } from '../support/events.js';
import { openOps, releaseFixture, type Ops } from '../support/ops.js';

const FIXTURE = releaseFixture({
  plan: { text: 'plan ready' },
  deploy: { text: 'deployed' },
  report: { structuredContent: { healthy: true } },
});

const openOpsServer = (): Promise<Ops> => openOps('langchain', FIXTURE);

/**
 * A chat model (LangChain's own extension point, `BaseChatModel`) that answers each request with
 * the next scripted message and records the messages and tool names it was given.
 */
class ScriptedChatModel extends BaseChatModel {
  readonly seen: { messages: BaseMessage[]; tools: string[] }[] = [];
  readonly #script: (n: number) => AIMessage | Promise<AIMessage>;
  #tools: string[] = [];

  constructor(script: (n: number) => AIMessage | Promise<AIMessage>) {
    super({});
    this.#script = script;
  }

  override _llmType(): string {
    return 'scripted';
  }

  override bindTools(tools: DynamicStructuredTool[]): ScriptedChatModel {
    this.#tools = tools.map((t) => t.name);
    return this;
  }

  override async _generate(
    messages: BaseMessage[],
    _options: BaseChatModelCallOptions,
    _runManager?: CallbackManagerForLLMRun,
  ): Promise<ChatResult> {
    this.seen.push({ messages: [...messages], tools: this.#tools });
    const message = await this.#script(this.seen.length);
    return { generations: [{ text: '', message }] };
  }
}

const callTool = (id: string, name: string, args: Record<string, unknown> = {}): AIMessage =>
  new AIMessage({ content: '', tool_calls: [{ id, name, args, type: 'tool_call' }] });

/** The agent loop a LangGraph `ToolNode` runs: model, then each tool call through `tool.invoke`. */
async function agentLoop(
  model: ScriptedChatModel,
  tools: DynamicStructuredTool[],
  prompt: string,
): Promise<BaseMessage[]> {
  const bound = model.bindTools(tools);
  const messages: BaseMessage[] = [new HumanMessage(prompt)];
  for (let turn = 0; turn < 5; turn++) {
    const reply = await bound.invoke(messages);
    messages.push(reply);
    const toolCalls = reply.tool_calls ?? [];
    if (toolCalls.length === 0) break;
    for (const call of toolCalls) {
      const t = tools.find((x) => x.name === call.name);
      messages.push((await t?.invoke({ ...call, type: 'tool_call' } as ToolCall)) as ToolMessage);
    }
  }
  return messages;
}

const toolMessages = (messages: readonly BaseMessage[]): Map<string, ToolMessage> =>
  new Map(
    messages
      .filter((m) => ToolMessage.isInstance(m))
      .map((m): [string, ToolMessage] => [m.tool_call_id, m]),
  );

const approveAll: LangChainToolsOptions['prepare'] = (ctx) => ctx.approve();

describe('stepToLangChainTools in a LangChain tool-calling loop over a real stdio server', () => {
  it('runs calls through stepbind and returns tool messages with the receipt as artifact', async () => {
    const { runtime, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    const model = new ScriptedChatModel((n) =>
      n === 1 ? callTool('r1', 'ops__report') : new AIMessage('Healthy.'),
    );
    const seen: LangChainCallEvent[] = [];
    const tools = stepToLangChainTools(step, { prepare: approveAll, onCall: (e) => seen.push(e) });
    const messages = await agentLoop(model, tools, 'Report.');

    expect(model.seen[0]?.tools).toEqual(['ops__plan', 'ops__deploy', 'ops__report']);
    expect(tools[1]?.schema).toEqual({ type: 'object', properties: { env: { type: 'string' } } });
    const reply = toolMessages(messages).get('r1');
    expect(reply?.status).toBe('success');
    expect(reply?.content).toBe('{"healthy":true}');
    const artifact = reply?.artifact as LangChainToolArtifact;
    expect(artifact.receipt).toMatchObject({ server: 'ops', tool: 'report', outcome: 'ok' });
    expect(messages.at(-1)?.content).toBe('Healthy.');
    expect(seen.map((e) => e.ok && [e.modelName, e.toolCallId])).toEqual([['ops__report', 'r1']]);
    expect(await calls()).toEqual(['report']);
  });

  it('shows the model a STALE_CATALOG tool message for a call across a catalog change; nothing sent', async () => {
    const { runtime, log, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    let swapped: Promise<unknown> | undefined;
    const model = new ScriptedChatModel(async (n) => {
      if (n === 1) {
        swapped = nextEvent(log, 'catalog-swapped');
        return callTool('c1', 'ops__plan');
      }
      if (n === 2) {
        await swapped;
        return callTool('c2', 'ops__deploy', { env: 'prod' });
      }
      return new AIMessage('Giving up.');
    });
    const seen: LangChainCallEvent[] = [];
    const tools = stepToLangChainTools(step, { prepare: approveAll, onCall: (e) => seen.push(e) });
    const messages = await agentLoop(model, tools, 'Plan, then deploy.');

    const refused = toolMessages(messages).get('c2');
    expect(refused?.status).toBe('error');
    expect(refused?.content).toBe(
      'The tool catalog of server "ops" changed; this call was not run. Call again with the tools of the next step.',
    );
    // The model saw it in its next request.
    expect(model.seen[2]?.messages.some((m) => m === refused)).toBe(true);
    expect(seen.map((e) => (e.ok ? 'ok' : e.error.code))).toEqual(['ok', 'STALE_CATALOG']);
    expect(await calls()).toEqual(['plan']);
  });

  it('asks the prepare hook for approvals: refused without one (APPROVAL_REQUIRED), run with one', async () => {
    const { runtime, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    const asked: string[] = [];
    const decide: LangChainToolsOptions['prepare'] = (ctx) => {
      asked.push(`${ctx.modelName}:${String(ctx.approvalRequired)}:${String(ctx.args['env'])}`);
      if (ctx.args['env'] === 'staging') ctx.approve();
    };
    const model = new ScriptedChatModel((n) =>
      n === 1
        ? callTool('d1', 'ops__deploy', { env: 'prod' })
        : n === 2
          ? callTool('d2', 'ops__deploy', { env: 'staging' })
          : new AIMessage('Deployed to staging.'),
    );
    const messages = await agentLoop(model, stepToLangChainTools(step, { prepare: decide }), 'go');

    const replies = toolMessages(messages);
    expect(replies.get('d1')?.status).toBe('error');
    expect(replies.get('d1')?.content).toEqual(expect.stringContaining('it was not run'));
    expect(replies.get('d2')).toMatchObject({ status: 'success', content: 'deployed' });
    expect(asked).toEqual(['ops__deploy:true:prod', 'ops__deploy:true:staging']);
    expect(await calls()).toEqual(['deploy']);
  });

  it('replays a repeated tool call id under the same stepKey instead of sending it again', async () => {
    const { runtime, calls } = await openOpsServer();
    const seen: LangChainCallEvent[] = [];
    const options = {
      stepKey: 'thread-9:step-2',
      prepare: approveAll,
      onCall: (e: LangChainCallEvent) => seen.push(e),
    };
    for (let attempt = 0; attempt < 2; attempt++) {
      await using step = await runtime.captureBinding();
      const model = new ScriptedChatModel((n) =>
        n === 1 ? callTool('d1', 'ops__deploy', { env: 'prod' }) : new AIMessage('done'),
      );
      const messages = await agentLoop(model, stepToLangChainTools(step, options), 'go');
      expect(toolMessages(messages).get('d1')).toMatchObject({ content: 'deployed' });
    }
    expect(seen.map((e) => e.ok && [e.replayed, e.receipt.idempotencyKey])).toEqual([
      [false, 'thread-9:step-2:d1'],
      [true, 'thread-9:step-2:d1'],
    ]);
    expect(await calls()).toEqual(['deploy']);
  });

  it('throws the CallError and returns bare content when invoked without a tool call', async () => {
    const { runtime, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    const [, deploy, report] = stepToLangChainTools(step);
    await expect(deploy?.invoke({ env: 'prod' })).rejects.toSatisfy(
      (e: unknown) => isStepbindError(e) && e.code === 'APPROVAL_REQUIRED',
    );
    const [, , approved] = stepToLangChainTools(step, { prepare: approveAll });
    expect(await approved?.invoke({})).toBe('{"healthy":true}');
    expect(report?.name).toBe('ops__report');
    expect(await calls()).toEqual(['report']);
  });

  it('refuses unknown and wrong options before making tools', async () => {
    const { runtime } = await openOpsServer();
    await using step = await runtime.captureBinding();
    expect(() => stepToLangChainTools(step, { stepkey: 'x' } as never)).toThrow(/stepKey/);
    expect(() => stepToLangChainTools(step, { idempotencyKeys: 'no' } as never)).toThrow(
      /idempotencyKeys/,
    );
  });
});

describe('toLangChainContent', () => {
  it('renders text as one string and media as standard blocks', () => {
    expect(toLangChainContent({ content: [{ type: 'text', text: 'a' }] })).toBe('a');
    expect(
      toLangChainContent({
        content: [
          { type: 'text', text: 'see' },
          { type: 'image', data: 'iVBO', mimeType: 'image/png' },
        ],
      }),
    ).toEqual([
      { type: 'text', text: 'see' },
      { type: 'image', data: 'iVBO', mimeType: 'image/png' },
    ]);
  });
});
