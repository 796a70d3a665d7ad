/**
 * `@stepbind/runtime/langchain`: the tools of one stepbind step as LangChain tools
 * (`DynamicStructuredTool` of `@langchain/core` 1.x, an optional peer dependency that only this
 * subpath imports), for `model.bindTools(tools)` and a LangGraph `ToolNode` or a loop of your own.
 *
 * @example
 * ```ts
 * import { HumanMessage, type BaseMessage } from '@langchain/core/messages';
 * import { stepToLangChainTools } from '@stepbind/runtime/langchain';
 *
 * await using step = await runtime.captureBinding();
 * const tools = stepToLangChainTools(step, { stepKey: 'run-42:turn-1' });
 * const messages: BaseMessage[] = [new HumanMessage('Tidy up the release branch.')];
 * const reply = await model.bindTools(tools).invoke(messages);
 * for (const call of reply.tool_calls ?? []) {
 *   const tool = tools.find((t) => t.name === call.name);
 *   if (tool !== undefined) messages.push(reply, await tool.invoke(call));
 * }
 * ```
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import { ToolMessage } from '@langchain/core/messages';
import { DynamicStructuredTool, type ToolRunnableConfig } from '@langchain/core/tools';
import {
  checkOptions,
  sameKeys,
  type StepbindError,
  toolResultParts,
  type CallReceipt,
  type McpBinding,
  type ToolCallResult,
} from '@stepbind/binding/internal';
import { langChainToolsOptionsSchema } from '../options-schema.js';
import { forModel } from './model-error.js';
import type { AdapterCallOptions } from './call-options.js';

export type { AdapterCallOptions } from './call-options.js';

/** What {@link LangChainToolsOptions.onCall} hears about each call. */
export type LangChainCallEvent =
  | {
      readonly ok: true;
      /** The LangChain tool call id, when the tool was invoked with a tool call. */
      readonly toolCallId: string | undefined;
      readonly modelName: string;
      readonly result: ToolCallResult;
      readonly receipt: CallReceipt;
      /** True when the journal replayed the result of a repeated key: nothing was sent. */
      readonly replayed: boolean;
    }
  | {
      readonly ok: false;
      readonly toolCallId: string | undefined;
      readonly modelName: string;
      /** The stepbind error (`STALE_CATALOG`, `TOOL_DENIED`, `APPROVAL_REQUIRED`, ...). */
      readonly error: StepbindError;
    };

/** What a tool's `ToolMessage.artifact` carries (never sent to the model). */
export interface LangChainToolArtifact {
  readonly result: ToolCallResult;
  readonly receipt: CallReceipt;
  readonly replayed: boolean;
}

/** Options of {@link stepToLangChainTools}. */
export type LangChainToolsOptions = AdapterCallOptions<LangChainCallEvent>;
sameKeys<LangChainToolsOptions>()(langChainToolsOptionsSchema);

/**
 * The tools `step` advertises, as LangChain `DynamicStructuredTool`s: same names, descriptions and
 * JSON Schemas (as is: LangChain core 1.x takes JSON Schema for `schema` and checks arguments
 * against it before the call; stepbind checks them again against the frozen schema). Each tool
 * runs `step.prepareCall(name).run(args, ...)`, so every call goes through the admission path of
 * the step the model saw.
 *
 * Invoked with a tool call (`tool.invoke(toolCall)`, as `ToolNode` does), a tool returns a
 * `ToolMessage`: the result as text and standard image/file blocks (status `error` for an MCP
 * `isError` result), `artifact` {@link LangChainToolArtifact}; a refusal or failure
 * (`STALE_CATALOG`, `TOOL_DENIED`, `APPROVAL_REQUIRED`, `INVALID_ARGUMENTS`, `TIMEOUT`, ...) is a
 * `ToolMessage` with status `error` and the text `toToolResult` writes for models, so the loop
 * continues. Invoked with bare arguments, it returns the content and throws the `CallError`.
 *
 * @throws RuntimeError `INVALID_OPTIONS` for an unknown or wrong option (no tools are made).
 */
export function stepToLangChainTools(
  step: McpBinding,
  options: LangChainToolsOptions = {},
): DynamicStructuredTool[] {
  checkOptions(langChainToolsOptionsSchema, options, {
    fn: 'stepToLangChainTools',
    consequence: 'No tools were made; fix the option and call again.',
  });
  const keyed = options.idempotencyKeys !== false && step.journaled;
  const stepKey = options.stepKey ?? randomUUID();
  return step.tools.map((tool) => {
    const modelName = tool.name;
    return new DynamicStructuredTool({
      name: modelName,
      description: tool.description,
      // A copy: LangChain's validator (@cfworker/json-schema) writes into the schema it is given,
      // and stepbind's is frozen.
      schema: structuredClone(tool.inputSchema),
      func: async (input: unknown, _runManager, config) => {
        // `tool.invoke(toolCall)` (and ToolNode) passes the call in the config.
        const toolCallId = (config as ToolRunnableConfig | undefined)?.toolCall?.id;
        const message = (content: string | LangChainContent, fields: ToolMessageFields) =>
          toolCallId === undefined
            ? undefined
            : new ToolMessage({ ...fields, content, tool_call_id: toolCallId, name: modelName });
        try {
          const { result, receipt, replayed } = await step
            .prepareCall(modelName)
            .run(input as Readonly<Record<string, unknown>>, {
              ...(config?.signal === undefined ? {} : { signal: config.signal }),
              ...(options.prepare === undefined ? {} : { prepare: options.prepare }),
              ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
              ...(keyed && toolCallId !== undefined
                ? { idempotencyKey: `${stepKey}:${toolCallId}` }
                : {}),
            });
          options.onCall?.({ ok: true, toolCallId, modelName, result, receipt, replayed });
          const content = toLangChainContent(result);
          const artifact: LangChainToolArtifact = { result, receipt, replayed };
          const status = result.isError === true ? 'error' : 'success';
          return message(content, { status, artifact }) ?? content;
        } catch (error) {
          const shown = forModel(error, modelName);
          options.onCall?.({ ok: false, toolCallId, modelName, error: shown });
          const refused = message(shown.message, { status: 'error' });
          if (refused === undefined) throw shown;
          return refused;
        }
      },
    });
  });
}

type ToolMessageFields = {
  readonly status: 'success' | 'error';
  readonly artifact?: LangChainToolArtifact;
};

/** LangChain standard content blocks (text, base64 image and file). */
export type LangChainContent = (
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'image' | 'file'; readonly data: string; readonly mimeType: string }
)[];

/**
 * An MCP result as LangChain tool message content: one string when every block renders as text
 * (structured content without text as its JSON), otherwise text and base64 `image`/`file`
 * standard blocks (audio goes as a `file` block). The same block rendering as the provider
 * formats.
 */
export function toLangChainContent(result: ToolCallResult): string | LangChainContent {
  const parts = toolResultParts(result);
  if (parts.every((p) => p.kind === 'text')) return parts.map((p) => p.text).join('\n');
  return parts.map((p) =>
    p.kind === 'text'
      ? { type: 'text' as const, text: p.text }
      : {
          type: p.media === 'image' ? ('image' as const) : ('file' as const),
          data: p.data,
          mimeType: p.mimeType,
        },
  );
}
