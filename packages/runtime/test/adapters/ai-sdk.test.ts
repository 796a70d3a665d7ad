import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { isStepbindError } from '@stepbind/binding';
import { stepToAiSdkTools, toAiSdkOutput, type AiSdkCallEvent } from '@stepbind/runtime/ai-sdk';
import { type ServerFixture } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { nextEvent } from '../support/events.js';
import { openOps, type Ops } from '../support/ops.js';

type DoGenerate = Extract<
  NonNullable<ConstructorParameters<typeof MockLanguageModelV3>[0]>['doGenerate'],
  (...args: never[]) => unknown
>;
type LanguageModelV3CallOptions = Parameters<DoGenerate>[0];
type LanguageModelV3GenerateResult = Awaited<ReturnType<DoGenerate>>;

const tool = (name: string, inputSchema: object = { type: 'object' }): Record<string, unknown> => ({
  name,
  description: `The ${name} tool.`,
  inputSchema,
});

/** `plan` switches the server to generation 1 (adds `rollback`) and sends list_changed. */
const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            tool('plan'),
            tool('deploy', {
              type: 'object',
              properties: { env: { type: 'string' } },
              required: ['env'],
            }),
            tool('report'),
          ],
        },
      ],
    },
    { pages: [{ tools: [tool('plan'), tool('deploy'), tool('report'), tool('rollback')] }] },
  ],
  calls: {
    plan: { text: 'plan ready' },
    report: { structuredContent: { healthy: true } },
    rollback: { text: 'rolled back' },
  },
  triggers: [{ on: { method: 'tools/call', tool: 'plan' }, setGeneration: 1, notify: 'after' }],
};

/** The app's approval point: this test's operator approves every call the model makes. */
const approveAll = (ctx: { approve(): void }): void => ctx.approve();

const openOpsServer = (): Promise<Ops> => openOps('ai-sdk', FIXTURE);

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

const callTool = (id: string, name: string, input: object): LanguageModelV3GenerateResult => ({
  content: [{ type: 'tool-call', toolCallId: id, toolName: name, input: JSON.stringify(input) }],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage,
  warnings: [],
});

const say = (text: string): LanguageModelV3GenerateResult => ({
  content: [{ type: 'text', text }],
  finishReason: { unified: 'stop', raw: 'stop' },
  usage,
  warnings: [],
});

/** The tool-result outputs the model was shown in a prompt, by tool call id. */
function toolOutputs(options: LanguageModelV3CallOptions): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const message of options.prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result') out.set(part.toolCallId, part.output);
    }
  }
  return out;
}

describe('the AI SDK under test', () => {
  it('is the major version the project names (7 in ai-sdk-7, through its alias; else 6)', async () => {
    // A computed specifier, so the type check needs no JSON module; the alias still applies.
    const specifier = 'ai/package.json';
    const { default: pkg } = (await import(specifier, { with: { type: 'json' } })) as {
      default: { version: string };
    };
    expect(pkg.version.split('.')[0]).toBe(process.env['STEPBIND_TEST_AI_SDK'] ?? '6');
  });
});

describe('stepToAiSdkTools with a real generateText loop over a real stdio server', () => {
  it('runs calls through stepbind and shows the model a STALE_CATALOG error for a call across a catalog change', async () => {
    const { runtime, log, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    let swapped: Promise<void> | undefined;
    const seen: AiSdkCallEvent[] = [];
    const prompts: LanguageModelV3CallOptions[] = [];
    const model = new MockLanguageModelV3({
      doGenerate: async (options) => {
        prompts.push(options);
        switch (prompts.length) {
          case 1:
            expect(options.tools?.map((t) => t.name)).toEqual([
              'ops__plan',
              'ops__deploy',
              'ops__report',
            ]);
            swapped = nextEvent(log, 'catalog-swapped').then(() => undefined);
            return callTool('c1', 'ops__plan', {});
          case 2:
            // The plan call changed the catalog; wait until stepbind swapped it in.
            await swapped;
            return callTool('c2', 'ops__deploy', { env: 'prod' });
          default:
            return say('Giving up on this step.');
        }
      },
    });

    const result = await generateText({
      model,
      tools: stepToAiSdkTools(step, { prepare: approveAll, onCall: (e) => seen.push(e) }),
      stopWhen: stepCountIs(5),
      prompt: 'Deploy to prod.',
    });

    expect(result.text).toBe('Giving up on this step.');
    expect(result.steps).toHaveLength(3);
    expect(toolOutputs(prompts[1] as LanguageModelV3CallOptions).get('c1')).toEqual({
      type: 'text',
      value: 'plan ready',
    });
    const shown = toolOutputs(prompts[2] as LanguageModelV3CallOptions).get('c2');
    expect(shown).toEqual({
      type: 'error-text',
      value:
        'The tool catalog of server "ops" changed; this call was not run. Call again with the tools of the next step.',
    });
    const toolError = result.steps[1]?.content.find((p) => p.type === 'tool-error');
    expect(toolError?.error).toSatisfy(
      (e: unknown) => isStepbindError(e) && e.code === 'STALE_CATALOG',
    );
    expect(seen.map((e) => [e.modelName, e.ok ? e.receipt.outcome : e.error.code])).toEqual([
      ['ops__plan', 'ok'],
      ['ops__deploy', 'STALE_CATALOG'],
    ]);
    // Nothing reached the server for the stale call.
    expect(await calls()).toEqual(['plan']);

    // The next step has the new tool; a fresh generateText over it runs it.
    await using next = await runtime.captureBinding();
    const second = await generateText({
      model: new MockLanguageModelV3({
        doGenerate: [callTool('c3', 'ops__rollback', {}), say('Rolled back.')],
      }),
      tools: stepToAiSdkTools(next, { prepare: approveAll }),
      stopWhen: stepCountIs(3),
      prompt: 'Roll back.',
    });
    expect(second.text).toBe('Rolled back.');
    expect(second.steps[0]?.toolResults.map((r): unknown => r.output)).toMatchObject([
      { content: [{ type: 'text', text: 'rolled back' }] },
    ]);
    expect(await calls()).toEqual(['plan', 'rollback']);
  });

  it('shows the model schema errors and structured results, and routes abort signals', async () => {
    const { runtime, calls } = await openOpsServer();
    await using step = await runtime.captureBinding();
    const prompts: LanguageModelV3CallOptions[] = [];
    const model = new MockLanguageModelV3({
      doGenerate: async (options) => {
        prompts.push(options);
        if (prompts.length === 1) {
          return {
            ...callTool('bad', 'ops__deploy', { env: 7 }),
            content: [
              ...callTool('bad', 'ops__deploy', { env: 7 }).content,
              ...callTool('r1', 'ops__report', {}).content,
            ],
          };
        }
        return say('done');
      },
    });
    await generateText({
      model,
      tools: stepToAiSdkTools(step, { prepare: approveAll }),
      stopWhen: stepCountIs(3),
      prompt: 'go',
    });
    const outputs = toolOutputs(prompts[1] as LanguageModelV3CallOptions);
    expect(outputs.get('bad')).toEqual({
      type: 'error-text',
      value: expect.stringContaining("do not match the tool's input schema"),
    });
    expect(outputs.get('r1')).toEqual({ type: 'text', value: '{"healthy":true}' });
    expect(await calls()).toEqual(['report']);

    const controller = new AbortController();
    controller.abort(new Error('user cancelled'));
    const tools = stepToAiSdkTools(step, { prepare: approveAll });
    const execute = tools['ops__report']?.execute;
    // `context` is required by AI SDK 7 and unknown to 6: a variable, not a literal, fits both.
    const callOptions = {
      toolCallId: 'x',
      messages: [],
      abortSignal: controller.signal,
      context: {},
    };
    await expect(execute?.({}, callOptions)).rejects.toSatisfy(
      // `String(e)` is what AI SDK 7 shows the model, `e.message` what AI SDK 6 shows: the same.
      (e: unknown) => isStepbindError(e) && e.code === 'ABORTED' && String(e) === e.message,
    );
    expect(await calls()).toEqual(['report']);
  });
});

describe('toAiSdkOutput', () => {
  it('renders text, JSON, media and tool errors as AI SDK model outputs', () => {
    expect(
      toAiSdkOutput({
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      }),
    ).toEqual({
      type: 'text',
      value: 'a\nb',
    });
    expect(toAiSdkOutput({ content: [], structuredContent: { n: 1 } })).toEqual({
      type: 'json',
      value: { n: 1 },
    });
    expect(
      toAiSdkOutput({
        content: [
          { type: 'text', text: 'see' },
          { type: 'image', data: 'iVBO', mimeType: 'image/png' },
          {
            type: 'resource',
            resource: { uri: 'file:///r.pdf', mimeType: 'application/pdf', blob: 'JVBE' },
          },
        ],
      }),
    ).toEqual({
      type: 'content',
      value: [
        { type: 'text', text: 'see' },
        { type: 'image-data', data: 'iVBO', mediaType: 'image/png' },
        { type: 'file-data', data: 'JVBE', mediaType: 'application/pdf', filename: 'r.pdf' },
      ],
    });
    expect(
      toAiSdkOutput({ isError: true, content: [{ type: 'text', text: 'disk full' }] }),
    ).toEqual({ type: 'error-text', value: 'disk full' });
  });
});
