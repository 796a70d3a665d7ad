/**
 * `@stepbind/runtime/ai-sdk`: the tools of one stepbind step as a Vercel AI SDK tool set, ready
 * for `generateText` / `streamText`. Works with `ai` 6 and `ai` 7 (peer `^6.0.0 || ^7.0.0`); AI SDK
 * 7 needs Node 22+ and is tested on Node 22 and 24, AI SDK 6 on 20, 22 and 24. `ai` is an optional
 * peer dependency; only this subpath imports it. The outputs use the part types both versions
 * accept (`image-data`, `file-data`: deprecated in 7, not removed).
 *
 * @example
 * ```ts
 * import { generateText, stepCountIs } from 'ai';
 * import { stepToAiSdkTools } from '@stepbind/runtime/ai-sdk';
 *
 * await using step = await runtime.captureBinding();
 * const { text } = await generateText({
 *   model,
 *   tools: stepToAiSdkTools(step),
 *   stopWhen: stepCountIs(8),
 *   prompt: 'Tidy up the release branch.',
 * });
 * ```
 *
 * @packageDocumentation
 */
import { dynamicTool, jsonSchema, type Tool, type ToolSet } from 'ai';
import {
  CallError,
  checkOptions,
  sameKeys,
  StepbindError,
  toToolResult,
  toolResultParts,
  type CallReceipt,
  type McpBinding,
  type RunOptions,
  type ToolCallResult,
} from '@stepbind/binding/internal';
import { aiSdkToolsOptionsSchema } from '../options-schema.js';

/** The AI SDK's tool model output (`ToolResultOutput` of `@ai-sdk/provider-utils`). */
export type AiSdkToolOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;

/** What {@link AiSdkToolsOptions.onCall} hears about each call. */
export type AiSdkCallEvent =
  | {
      readonly ok: true;
      readonly toolCallId: string;
      readonly modelName: string;
      readonly result: ToolCallResult;
      readonly receipt: CallReceipt;
    }
  | {
      readonly ok: false;
      readonly toolCallId: string;
      readonly modelName: string;
      /** The stepbind error (`STALE_CATALOG`, `TOOL_DENIED`, `INVALID_ARGUMENTS`, ...). */
      readonly error: StepbindError;
    };

/** Options of {@link stepToAiSdkTools}. */
export interface AiSdkToolsOptions {
  /** Passed to every `PreparedCall.run`: approvals, argument rewriting (under the read lock). */
  readonly prepare?: RunOptions['prepare'];
  /** Per-call timeout. @default the server's `callTimeoutMs` */
  readonly timeoutMs?: number;
  /** Called once per call with its receipt, or with the error the model was shown. */
  readonly onCall?: (event: AiSdkCallEvent) => void;
}
sameKeys<AiSdkToolsOptions>()(aiSdkToolsOptionsSchema);

/**
 * The tools `step` advertises, as AI SDK dynamic tools: same names, descriptions and JSON Schemas
 * (passed through `jsonSchema`, not re-validated: stepbind validates every call against the frozen
 * schema). Each `execute` runs `step.prepareCall(name).run(input, { signal: abortSignal, ... })`,
 * so every call goes through the full admission path of the step the model saw, and returns the
 * MCP result; `toModelOutput` turns it into text, JSON or media parts for the model (an MCP
 * `isError` result becomes `error-text`).
 *
 * A refusal or failure (`STALE_CATALOG`, `TOOL_DENIED`, `INVALID_ARGUMENTS`, `TIMEOUT`, ...) is
 * thrown as a `CallError` with the same `code` and `detail`, the original as `cause`, and as
 * message the text `toToolResult` writes for models: the AI SDK records a `tool-error` part and
 * shows the model that message, so the loop continues.
 *
 * The AI SDK keeps one tool set for a whole multi-step `generateText` call, so all its steps run
 * against this one binding: a catalog that changes meanwhile makes the later calls `STALE_CATALOG`
 * (nothing is sent). Capture a new step and call `generateText` again to give the model the new
 * tools.
 *
 * @throws RuntimeError `INVALID_OPTIONS` for an unknown or wrong option (no tools are made).
 */
export function stepToAiSdkTools(step: McpBinding, options: AiSdkToolsOptions = {}): ToolSet {
  checkOptions(aiSdkToolsOptionsSchema, options, {
    fn: 'stepToAiSdkTools',
    consequence: 'No tools were made; fix the option and call again.',
  });
  const tools: ToolSet = {};
  for (const tool of step.tools) {
    const modelName = tool.name;
    tools[modelName] = dynamicTool({
      ...(tool.description === '' ? {} : { description: tool.description }),
      inputSchema: jsonSchema(tool.inputSchema as Parameters<typeof jsonSchema>[0]),
      execute: async (input, { abortSignal, toolCallId }) => {
        try {
          const { result, receipt } = await step
            .prepareCall(modelName)
            .run(input as Readonly<Record<string, unknown>>, {
              ...(abortSignal === undefined ? {} : { signal: abortSignal }),
              ...(options.prepare === undefined ? {} : { prepare: options.prepare }),
              ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
            });
          options.onCall?.({ ok: true, toolCallId, modelName, result, receipt });
          return result;
        } catch (error) {
          const shown = forModel(error, modelName);
          options.onCall?.({ ok: false, toolCallId, modelName, error: shown });
          throw shown;
        }
      },
      toModelOutput: ({ output }) => toAiSdkOutput(output as ToolCallResult),
    });
  }
  return tools;
}

/**
 * The `CallError` a tool throws to the AI SDK. AI SDK 6 shows the model `error.message`, AI SDK 7
 * `String(error)` (`CallError: ...`); with `toString` returning the message, both show the same
 * text.
 */
class ModelShownCallError extends CallError {
  override toString(): string {
    return this.message;
  }
}

function forModel(error: unknown, modelName: string): StepbindError {
  const text = toToolResult(error).content[0].text;
  if (error instanceof StepbindError) {
    return new ModelShownCallError(error.code, text, { detail: error.detail, cause: error });
  }
  return new ModelShownCallError('TOOL_DENIED', text, { detail: { modelName }, cause: error });
}

/**
 * An MCP result as the AI SDK's model output: `error-text` for `isError`, `text` for text only,
 * `json` for structured content without text, otherwise `content` with text, `image-data` and
 * `file-data` parts (the same block rendering as the provider formats).
 */
export function toAiSdkOutput(result: ToolCallResult): AiSdkToolOutput {
  const parts = toolResultParts(result);
  const texts = parts.flatMap((p) => (p.kind === 'text' ? [p.text] : []));
  if (result.isError === true) {
    const media = parts.length - texts.length;
    const note = media === 0 ? '' : `\n[${media} attachment(s) of the error result omitted]`;
    return { type: 'error-text', value: `${texts.join('\n')}${note}` };
  }
  if (texts.length === parts.length) {
    const structured = result.structuredContent;
    const hasText = (result.content ?? []).some((b) => b.type === 'text' && b.text !== '');
    if (structured !== undefined && !hasText) return { type: 'json', value: structured as never };
    return { type: 'text', value: texts.join('\n') };
  }
  return {
    type: 'content',
    value: parts.map((p) =>
      p.kind === 'text'
        ? { type: 'text' as const, text: p.text }
        : p.media === 'image'
          ? { type: 'image-data' as const, data: p.data, mediaType: p.mimeType }
          : {
              type: 'file-data' as const,
              data: p.data,
              mediaType: p.mimeType,
              filename: p.name,
            },
    ),
  };
}
