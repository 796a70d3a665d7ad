import { generateText, stepCountIs, streamText, type ModelMessage, type ToolSet } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { stepToAiSdkTools, type AiSdkCallEvent } from '@stepbind/runtime/ai-sdk';
import { describe, expect, it } from 'vitest';
import { nextEvent } from '../support/events.js';
import { openOps, releaseFixture, type Ops } from '../support/ops.js';

type DoGenerate = Extract<
  NonNullable<ConstructorParameters<typeof MockLanguageModelV3>[0]>['doGenerate'],
  (...args: never[]) => unknown
>;
type CallOptions = Parameters<DoGenerate>[0];
type GenerateResult = Awaited<ReturnType<DoGenerate>>;

const FIXTURE = releaseFixture({
  plan: { text: 'plan ready' },
  deploy: { text: 'deployed' },
  report: { text: 'all healthy' },
  rollback: { text: 'rolled back' },
});

const openOpsServer = (): Promise<Ops> => openOps('ai-sdk-loops', FIXTURE);

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

const callTool = (id: string, name: string, input: object = {}): GenerateResult => ({
  content: [{ type: 'tool-call', toolCallId: id, toolName: name, input: JSON.stringify(input) }],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage,
  warnings: [],
});

const say = (text: string): GenerateResult => ({
  content: [{ type: 'text', text }],
  finishReason: { unified: 'stop', raw: 'stop' },
  usage,
  warnings: [],
});

/**
 * A model that answers each request with the next result `script` returns, through `doGenerate`
 * for `generateText` and as stream parts through `doStream` for `streamText`.
 */
function scripted(
  script: (options: CallOptions, n: number) => GenerateResult | Promise<GenerateResult>,
): { model: MockLanguageModelV3; prompts: CallOptions[] } {
  const prompts: CallOptions[] = [];
  const next = async (options: CallOptions): Promise<GenerateResult> => {
    prompts.push(options);
    return await script(options, prompts.length);
  };
  const model = new MockLanguageModelV3({
    doGenerate: next,
    doStream: async (options) => {
      const result = await next(options);
      const parts: unknown[] = [{ type: 'stream-start', warnings: [] }];
      for (const part of result.content) {
        if (part.type === 'text') {
          parts.push(
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: part.text },
            { type: 'text-end', id: 't' },
          );
        } else {
          parts.push(part);
        }
      }
      parts.push({ type: 'finish', finishReason: result.finishReason, usage: result.usage });
      const stream = new ReadableStream({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      });
      return { stream };
    },
  });
  return { model, prompts };
}

interface LoopResult {
  readonly text: string;
  readonly content: readonly { readonly type: string }[];
  readonly messages: readonly ModelMessage[];
}

type Loop = (args: {
  model: MockLanguageModelV3;
  tools: ToolSet;
  messages: ModelMessage[];
}) => Promise<LoopResult>;

/** The same scripted conversation through both AI SDK entry points. */
const LOOPS: readonly (readonly [string, Loop])[] = [
  [
    'generateText',
    async ({ model, tools, messages }) => {
      const r = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
      return { text: r.text, content: r.content, messages: r.response.messages };
    },
  ],
  [
    'streamText',
    async ({ model, tools, messages }) => {
      const r = streamText({ model, tools, messages, stopWhen: stepCountIs(5) });
      await r.consumeStream();
      return {
        text: await r.text,
        content: await r.content,
        messages: (await r.response).messages,
      };
    },
  ],
];

/** The approval request a loop stopped at: its id and the call it holds. */
interface ApprovalRequest {
  readonly type: 'tool-approval-request';
  readonly approvalId: string;
  readonly toolCall: { readonly toolCallId: string; readonly toolName: string };
}

const approvalRequestOf = (result: LoopResult): ApprovalRequest | undefined =>
  result.content.find((p): p is ApprovalRequest => p.type === 'tool-approval-request');

/** The tool-result outputs the model was shown in a prompt, by tool call id. */
function toolOutputs(options: CallOptions | undefined): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const message of options?.prompt ?? []) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result') out.set(part.toolCallId, part.output);
    }
  }
  return out;
}

const user = (text: string): ModelMessage[] => [{ role: 'user', content: text }];

describe.each(LOOPS)(
  'stepToAiSdkTools in a real %s loop over a real stdio server',
  (entry, loop) => {
    it(`runs a call the user approved through the AI SDK, with that approval, once (${entry})`, async () => {
      const { runtime, calls } = await openOpsServer();
      await using step = await runtime.captureBinding();
      const { model, prompts } = scripted((_o, n) =>
        n === 1 ? callTool('d1', 'ops__deploy', { env: 'prod' }) : say('Deployed.'),
      );
      const seen: AiSdkCallEvent[] = [];
      const tools = stepToAiSdkTools(step, { onCall: (e) => seen.push(e) });
      const messages = user('Deploy to prod.');

      // The loop stops at the approval request; nothing ran.
      const first = await loop({ model, tools, messages });
      const request = approvalRequestOf(first);
      expect(request).toMatchObject({ toolCall: { toolCallId: 'd1', toolName: 'ops__deploy' } });
      expect(await calls()).toEqual([]);
      expect(seen).toEqual([]);

      // The user approves; the AI SDK runs the call, stepbind admits it with that approval.
      messages.push(...first.messages, {
        role: 'tool',
        content: [
          {
            type: 'tool-approval-response',
            approvalId: request?.approvalId ?? 'none',
            approved: true,
          },
        ],
      });
      const second = await loop({ model, tools, messages });
      expect(second.text).toBe('Deployed.');
      expect(toolOutputs(prompts[1]).get('d1')).toEqual({ type: 'text', value: 'deployed' });
      expect(seen.map((e) => [e.modelName, e.ok && e.receipt.outcome])).toEqual([
        ['ops__deploy', 'ok'],
      ]);
      expect(await calls()).toEqual(['deploy']);
    });

    it(`never runs a call the user denied through the AI SDK (${entry})`, async () => {
      const { runtime, calls } = await openOpsServer();
      await using step = await runtime.captureBinding();
      const { model } = scripted((_o, n) =>
        n === 1 ? callTool('d1', 'ops__deploy', { env: 'prod' }) : say('Not deployed.'),
      );
      const tools = stepToAiSdkTools(step);
      const messages = user('Deploy to prod.');
      const first = await loop({ model, tools, messages });
      const request = approvalRequestOf(first);
      messages.push(...first.messages, {
        role: 'tool',
        content: [
          {
            type: 'tool-approval-response',
            approvalId: request?.approvalId ?? 'none',
            approved: false,
          },
        ],
      });
      const second = await loop({ model, tools, messages });
      expect(second.text).toBe('Not deployed.');
      expect(await calls()).toEqual([]);
    });

    it(`refuses a call across a catalog change (STALE_CATALOG, shown to the model, nothing sent) (${entry})`, async () => {
      const { runtime, log, calls } = await openOpsServer();
      await using step = await runtime.captureBinding();
      let swapped: Promise<unknown> | undefined;
      const { model, prompts } = scripted(async (_o, n) => {
        if (n === 1) {
          swapped = nextEvent(log, 'catalog-swapped');
          return callTool('c1', 'ops__plan');
        }
        if (n === 2) {
          await swapped;
          return callTool('c2', 'ops__report');
        }
        return say('Giving up.');
      });
      const result = await loop({
        model,
        tools: stepToAiSdkTools(step, { prepare: (ctx) => ctx.approve() }),
        messages: user('Plan and report.'),
      });
      expect(result.text).toBe('Giving up.');
      expect(toolOutputs(prompts[2]).get('c2')).toEqual({
        type: 'error-text',
        value:
          'The tool catalog of server "ops" changed; this call was not run. Call again with the tools of the next step.',
      });
      expect(await calls()).toEqual(['plan']);
    });

    it(`replays a repeated toolCallId under the same stepKey instead of sending it again (${entry})`, async () => {
      const { runtime, calls } = await openOpsServer();
      const seen: AiSdkCallEvent[] = [];
      const options = {
        stepKey: 'conversation-7:turn-3',
        prepare: (ctx: { approve(): void }) => ctx.approve(),
        onCall: (e: AiSdkCallEvent) => seen.push(e),
      };
      // The same turn twice (a retried request, a workflow re-running a step): same tool call id.
      for (let attempt = 0; attempt < 2; attempt++) {
        await using step = await runtime.captureBinding();
        const { model, prompts } = scripted((_o, n) =>
          n === 1 ? callTool('r1', 'ops__report') : say('Healthy.'),
        );
        const result = await loop({
          model,
          tools: stepToAiSdkTools(step, options),
          messages: user('Report.'),
        });
        expect(result.text).toBe('Healthy.');
        expect(toolOutputs(prompts[1]).get('r1')).toEqual({ type: 'text', value: 'all healthy' });
      }
      expect(seen.map((e) => e.ok && [e.replayed, e.receipt.idempotencyKey])).toEqual([
        [false, 'conversation-7:turn-3:r1'],
        [true, 'conversation-7:turn-3:r1'],
      ]);
      expect(await calls()).toEqual(['report']);

      // Another stepKey is another key: the call runs; with keys off it is unkeyed.
      await using step = await runtime.captureBinding();
      for (const other of [{ stepKey: 'conversation-8:turn-1' }, { idempotencyKeys: false }]) {
        const { model } = scripted((_o, n) =>
          n === 1 ? callTool('r1', 'ops__report') : say('ok'),
        );
        await loop({
          model,
          tools: stepToAiSdkTools(step, { ...options, ...other }),
          messages: user('Report.'),
        });
      }
      expect(seen.slice(2).map((e) => e.ok && [e.replayed, e.receipt.idempotencyKey])).toEqual([
        [false, 'conversation-8:turn-1:r1'],
        [false, undefined],
      ]);
      expect(await calls()).toEqual(['report', 'report', 'report']);
    });
  },
);
