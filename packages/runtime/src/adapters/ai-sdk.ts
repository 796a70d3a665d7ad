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
import { randomUUID } from 'node:crypto';
import { dynamicTool, jsonSchema, type Tool, type ToolSet } from 'ai';
import {
  checkOptions,
  sameKeys,
  type StepbindError,
  toolResultParts,
  type CallReceipt,
  type McpBinding,
  type RunOptions,
  type ToolCallResult,
} from '@stepbind/binding/internal';
import { aiSdkToolsOptionsSchema } from '../options-schema.js';
import { forModel } from './model-error.js';
import type { AdapterCallOptions } from './call-options.js';

export type { AdapterCallOptions } from './call-options.js';

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
      /** True when the journal replayed the result of a repeated key: nothing was sent. */
      readonly replayed: boolean;
    }
  | {
      readonly ok: false;
      readonly toolCallId: string;
      readonly modelName: string;
      /** The stepbind error (`STALE_CATALOG`, `TOOL_DENIED`, `INVALID_ARGUMENTS`, ...). */
      readonly error: StepbindError;
    };

/** Options of {@link stepToAiSdkTools}. */
export interface AiSdkToolsOptions extends AdapterCallOptions<AiSdkCallEvent> {
  /**
   * Who gives the approvals stepbind's policy asks for (`approval` mode, DESIGN §7):
   * - `ai-sdk`: a tool whose call needs one is marked `needsApproval`, so `generateText` and
   *   `streamText` stop with a `tool-approval-request`; when the application answers with an
   *   approved `tool-approval-response`, the AI SDK runs the call and it runs with that approval
   *   (a denied one is never run). `prepare`, if given, still runs after and may veto.
   * - `prepare`: nothing is marked; the `prepare` hook approves (`ctx.approve()`) or the call is
   *   refused `APPROVAL_REQUIRED`, as with `PreparedCall.run`.
   * @default `prepare` when a `prepare` hook is given, else `ai-sdk`
   */
  readonly approvals?: 'ai-sdk' | 'prepare';
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
 * Idempotency (DESIGN §13, §20.4): each call runs under the key `${stepKey}:${toolCallId}`, so
 * a tool call the AI SDK or a workflow runs again replays its recorded result; give a `stepKey`
 * that survives a restart to make that hold across processes. Approvals: a call stepbind's
 * policy holds for an approval is marked `needsApproval` (unless a `prepare` hook gives the
 * approvals, see {@link AiSdkToolsOptions.approvals}) and runs with the approval the user gives
 * through the AI SDK's `tool-approval-response`.
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
  const approvals = options.approvals ?? (options.prepare === undefined ? 'ai-sdk' : 'prepare');
  const keyed = options.idempotencyKeys !== false && step.journaled;
  const stepKey = options.stepKey ?? randomUUID();
  const tools: ToolSet = {};
  for (const tool of step.tools) {
    const modelName = tool.name;
    tools[modelName] = dynamicTool({
      ...(tool.description === '' ? {} : { description: tool.description }),
      inputSchema: jsonSchema(tool.inputSchema as Parameters<typeof jsonSchema>[0]),
      ...(approvals === 'ai-sdk' ? { needsApproval: () => needsApproval(step, modelName) } : {}),
      execute: async (input, { abortSignal, toolCallId, messages }) => {
        const approvedBySdk = approvals === 'ai-sdk' && approvedInMessages(messages, toolCallId);
        const prepare = approvedBySdk ? approveThen(options.prepare) : options.prepare;
        try {
          const { result, receipt, replayed } = await step
            .prepareCall(modelName)
            .run(input as Readonly<Record<string, unknown>>, {
              ...(abortSignal === undefined ? {} : { signal: abortSignal }),
              ...(prepare === undefined ? {} : { prepare }),
              ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
              ...(keyed ? { idempotencyKey: `${stepKey}:${toolCallId}` } : {}),
            });
          options.onCall?.({ ok: true, toolCallId, modelName, result, receipt, replayed });
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
 * Whether stepbind's policy asks an approval for a call of `modelName` now. A call that would be
 * refused anyway (revoked, new policy epoch, released step) is not held for an approval: it runs
 * and the model sees the refusal.
 */
function needsApproval(step: McpBinding, modelName: string): boolean {
  try {
    return step.approvalRequired(modelName);
  } catch {
    return false;
  }
}

/** A part of a model message, as far as the approval parts need it (AI SDK 6 and 7). */
interface MessagePart {
  readonly type: string;
  readonly toolCallId?: string;
  readonly approvalId?: string;
  readonly approved?: boolean;
}

/**
 * True when the messages the AI SDK runs an approved call with hold an approved
 * `tool-approval-response` for an approval request of `toolCallId` (the AI SDK runs approved
 * calls with the messages that carry the response; it never runs a denied one).
 */
function approvedInMessages(messages: readonly unknown[], toolCallId: string): boolean {
  const requested = new Set<string>();
  const approved = new Set<string>();
  for (const message of messages as readonly { readonly content?: unknown }[]) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content as readonly MessagePart[]) {
      if (part.type === 'tool-approval-request' && part.toolCallId === toolCallId) {
        if (part.approvalId !== undefined) requested.add(part.approvalId);
      } else if (part.type === 'tool-approval-response' && part.approved === true) {
        if (part.approvalId !== undefined) approved.add(part.approvalId);
      }
    }
  }
  for (const id of requested) if (approved.has(id)) return true;
  return false;
}

/** A `prepare` hook that gives the AI SDK user's approval, then runs the application's hook. */
function approveThen(prepare: RunOptions['prepare']): NonNullable<RunOptions['prepare']> {
  return (ctx) => {
    ctx.approve();
    return prepare?.(ctx);
  };
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
