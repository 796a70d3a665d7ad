/**
 * `@stepbind/runtime/openai-agents`: a runtime as an OpenAI Agents JS MCP server
 * (`MCPServer` of `@openai/agents` 0.20, an optional peer dependency that only this subpath
 * imports), so an agent keeps `mcpServers: [...]` and gets stepbind's steps, stale-call refusal,
 * approvals and receipts; or one step's tools as function tools (`stepToAgentTools`) with the
 * SDK's approval interruptions and the call id as idempotency key.
 *
 * @example
 * ```ts
 * import { Agent, run } from '@openai/agents';
 * import { stepbindServer } from '@stepbind/runtime/openai-agents';
 *
 * const agent = new Agent({
 *   name: 'ops',
 *   instructions: 'You run releases.',
 *   mcpServers: [stepbindServer(runtime, { prepare: (ctx) => ctx.approve() })],
 * });
 * const result = await run(agent, 'Tidy up the release branch.');
 * ```
 *
 * @packageDocumentation
 */
import { tool as agentTool, type RunContext, type Tool } from '@openai/agents';
import type {
  CallToolResult,
  CallToolResultContent,
  MCPCallToolOptions,
  MCPServer,
  MCPToolErrorFunction,
  MCPToolFilterCallable,
  MCPToolFilterStatic,
} from '@openai/agents';
import { randomUUID } from 'node:crypto';
import {
  CallError,
  checkOptions,
  toolResultParts,
  ErrorCode,
  isStepbindError,
  sameKeys,
  type CallReceipt,
  type McpBinding,
  type RunOptions,
  type StepbindError,
  type ToolCallResult,
} from '@stepbind/binding/internal';
import {
  openAiAgentsServerOptionsSchema,
  openAiAgentsToolsOptionsSchema,
} from '../options-schema.js';
import type { McpRuntime } from '../runtime.js';
import { forModel } from './model-error.js';
import type { AdapterCallOptions } from './call-options.js';

export type { AdapterCallOptions } from './call-options.js';

/** A tool as the Agents SDK lists it (`MCPTool`, not exported as a type by `@openai/agents`). */
type MCPTool = Awaited<ReturnType<MCPServer['listTools']>>[number];

/** What {@link OpenAiAgentsServerOptions.onCall} hears about each call. */
export type OpenAiAgentsCallEvent =
  | {
      readonly ok: true;
      readonly modelName: string;
      readonly result: ToolCallResult;
      readonly receipt: CallReceipt;
    }
  | {
      readonly ok: false;
      readonly modelName: string;
      /** The stepbind error (`STALE_CATALOG`, `TOOL_DENIED`, `APPROVAL_REQUIRED`, ...). */
      readonly error: StepbindError;
    };

/** Options of {@link stepbindServer}. */
export interface OpenAiAgentsServerOptions {
  /** The server's name in the Agents SDK (traces, tool filters). @default 'stepbind' */
  readonly name?: string;
  /**
   * Passed to every `PreparedCall.run`: approvals (`ctx.approve()`; without it a call stepbind's
   * policy holds is refused `APPROVAL_REQUIRED`, shown to the model, nothing sent), argument
   * rewriting (under the read lock).
   */
  readonly prepare?: RunOptions['prepare'];
  /** Per-call timeout. @default the server's `callTimeoutMs` */
  readonly timeoutMs?: number;
  /** Called once per call with its receipt, or with the error the model was shown. */
  readonly onCall?: (event: OpenAiAgentsCallEvent) => void;
  /**
   * The Agents SDK's tool filter (static allow/block lists of model names, or a callback the
   * SDK calls per tool with the run context and agent), applied by the SDK to every listing.
   * @default none
   */
  readonly toolFilter?: MCPToolFilterCallable | MCPToolFilterStatic;
}
sameKeys<OpenAiAgentsServerOptions>()(openAiAgentsServerOptionsSchema);

/**
 * An Agents SDK `MCPServer` over `runtime`. Each `listTools` (the SDK lists once per agent turn)
 * captures a new step and releases the previous one (its calls still running finish); the model
 * sees that step's tools under their model names (`server__tool`), and every `callTool` of the
 * turn runs through that step's `PreparedCall`: a catalog that changed since the listing is
 * `STALE_CATALOG` (nothing sent), refused by the policy `TOOL_DENIED`, and so on. Refusals are
 * shown to the model as its tool output (the server's `errorFunction` returns the text
 * `toToolResult` writes for models), so the run continues.
 *
 * One server serves one run at a time: two concurrent runs would take each other's steps; make
 * one server per concurrent run (they are cheap: the runtime is shared). `connect` does nothing
 * (the application opened the runtime); `close` releases the last step, not the runtime.
 *
 * Not available through this interface in `@openai/agents` 0.20: the tool call id (the SDK does
 * not pass it to `callTool`, so calls run without idempotency keys) and the SDK's approval
 * interruptions (it marks no local MCP tool `needsApproval`): approvals go through `prepare`.
 *
 * @throws RuntimeError `INVALID_OPTIONS` for an unknown or wrong option.
 */
export function stepbindServer(
  runtime: McpRuntime,
  options: OpenAiAgentsServerOptions = {},
): MCPServer {
  checkOptions(openAiAgentsServerOptionsSchema, options, {
    fn: 'stepbindServer',
    consequence: 'No server was made; fix the option and call again.',
  });
  return new StepbindMcpServer(runtime, options);
}

class StepbindMcpServer implements MCPServer {
  readonly name: string;
  /** Every listing captures a new step: nothing for the SDK to cache. */
  cacheToolsList = false;
  toolFilter?: MCPToolFilterCallable | MCPToolFilterStatic;
  /** The model sees a refusal's model-facing text, not the SDK's generic wrapper. */
  errorFunction: MCPToolErrorFunction = ({ error }) =>
    isStepbindError(error) ? error.message : forModel(error, 'unknown').message;
  readonly #runtime: McpRuntime;
  readonly #options: OpenAiAgentsServerOptions;
  #step: McpBinding | undefined;

  constructor(runtime: McpRuntime, options: OpenAiAgentsServerOptions) {
    this.name = options.name ?? 'stepbind';
    if (options.toolFilter !== undefined) this.toolFilter = options.toolFilter;
    this.#runtime = runtime;
    this.#options = options;
  }

  async connect(): Promise<void> {
    // The application opened the runtime; its servers are already connected or lazy.
  }

  async close(): Promise<void> {
    this.#step?.release();
    this.#step = undefined;
  }

  async listTools(): Promise<MCPTool[]> {
    const step = await this.#runtime.captureBinding();
    this.#step?.release();
    this.#step = step;
    return step.tools.map((tool) => ({
      name: tool.name,
      ...(tool.description === '' ? {} : { description: tool.description }),
      inputSchema: tool.inputSchema as MCPTool['inputSchema'],
    }));
  }

  async callTool(
    toolName: string,
    args: Record<string, unknown> | null,
    _meta?: Record<string, unknown> | null,
    options?: MCPCallToolOptions,
  ): Promise<CallToolResultContent> {
    return (await this.callToolResult(toolName, args, _meta, options)).content;
  }

  async callToolResult(
    toolName: string,
    args: Record<string, unknown> | null,
    _meta?: Record<string, unknown> | null,
    options?: MCPCallToolOptions,
  ): Promise<CallToolResult> {
    const { prepare, timeoutMs, onCall } = this.#options;
    try {
      const step = this.#step;
      if (step === undefined) {
        throw new CallError(
          ErrorCode.UNKNOWN_TOOL,
          `No tools were listed yet, so "${toolName}" was not run. Call only the tools advertised in this step.`,
          { detail: { modelName: toolName, delivery: 'not-sent' } },
        );
      }
      const { result, receipt } = await step.prepareCall(toolName).run(args ?? {}, {
        ...(options?.signal === undefined ? {} : { signal: options.signal }),
        ...(prepare === undefined ? {} : { prepare }),
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
      });
      onCall?.({ ok: true, modelName: toolName, result, receipt });
      return { ...result, content: [...(result.content ?? [])] as CallToolResultContent };
    } catch (error) {
      const shown = forModel(error, toolName);
      onCall?.({ ok: false, modelName: toolName, error: shown });
      throw shown;
    }
  }

  async invalidateToolsCache(): Promise<void> {
    // Nothing cached: the next listing captures a new step.
  }
}

/** Options of {@link stepToAgentTools}. */
export interface OpenAiAgentsToolsOptions extends AdapterCallOptions<OpenAiAgentsCallEvent> {
  /**
   * Who gives the approvals stepbind's policy asks for: `agents` marks such a tool
   * `needsApproval`, so the run stops with a `RunToolApprovalItem` interruption and the call runs
   * with the approval given through `state.approve(item)` (a rejected one never runs); `prepare`
   * leaves it to the `prepare` hook.
   * @default `prepare` when a `prepare` hook is given, else `agents`
   */
  readonly approvals?: 'agents' | 'prepare';
}
sameKeys<OpenAiAgentsToolsOptions>()(openAiAgentsToolsOptionsSchema);

/**
 * The tools `step` advertises as Agents SDK function tools (`tool()`, non-strict JSON Schema as
 * is): `new Agent({ tools: stepToAgentTools(step) })` for one turn or one run over a step the
 * application captured. Each call runs through `step.prepareCall(name).run` under the key
 * `${stepKey}:${callId}`; a tool stepbind's policy holds for an approval is `needsApproval`, and
 * runs once the user approves the interruption. A refusal or failure is the tool's output, the
 * text `toToolResult` writes for models, so the run continues.
 *
 * @throws RuntimeError `INVALID_OPTIONS` for an unknown or wrong option (no tools are made).
 */
export function stepToAgentTools(step: McpBinding, options: OpenAiAgentsToolsOptions = {}): Tool[] {
  checkOptions(openAiAgentsToolsOptionsSchema, options, {
    fn: 'stepToAgentTools',
    consequence: 'No tools were made; fix the option and call again.',
  });
  const approvals = options.approvals ?? (options.prepare === undefined ? 'agents' : 'prepare');
  const keyed = options.idempotencyKeys !== false && step.journaled;
  const stepKey = options.stepKey ?? randomUUID();
  return step.tools.map((t) => {
    const modelName = t.name;
    return agentTool({
      name: modelName,
      description: t.description,
      // The schema as is (the SDK's type wants the shape it builds itself for MCP tools).
      parameters: structuredClone(t.inputSchema) as unknown as NonStrictSchema,
      strict: false,
      ...(approvals === 'agents'
        ? { needsApproval: async () => needsApproval(step, modelName) }
        : {}),
      execute: async (input: unknown, runContext?: RunContext, details?) => {
        const callId = details?.toolCall?.callId;
        const approved =
          approvals === 'agents' &&
          callId !== undefined &&
          runContext?.isToolApproved({ toolName: modelName, callId }) === true;
        const prepare = approved ? approveThen(options.prepare) : options.prepare;
        try {
          const { result, receipt } = await step
            .prepareCall(modelName)
            .run((input ?? {}) as Readonly<Record<string, unknown>>, {
              ...(details?.signal === undefined ? {} : { signal: details.signal }),
              ...(prepare === undefined ? {} : { prepare }),
              ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
              ...(keyed && callId !== undefined ? { idempotencyKey: `${stepKey}:${callId}` } : {}),
            });
          options.onCall?.({ ok: true, modelName, result, receipt });
          return toAgentOutput(result);
        } catch (error) {
          const shown = forModel(error, modelName);
          options.onCall?.({ ok: false, modelName, error: shown });
          return shown.message;
        }
      },
    });
  });
}

/** `JsonObjectSchemaNonStrict` of the Agents SDK, which `@openai/agents` does not export. */
interface NonStrictSchema {
  readonly type: 'object';
  readonly properties: Record<string, Record<string, unknown>>;
  readonly required: string[];
  readonly additionalProperties: true;
}

/** Whether stepbind asks an approval for `modelName` now; a call refused anyway is not held. */
function needsApproval(step: McpBinding, modelName: string): boolean {
  try {
    return step.approvalRequired(modelName);
  } catch {
    return false;
  }
}

/** A `prepare` hook that gives the SDK user's approval, then runs the application's hook. */
function approveThen(prepare: RunOptions['prepare']): NonNullable<RunOptions['prepare']> {
  return (ctx) => {
    ctx.approve();
    return prepare?.(ctx);
  };
}

/** An MCP result as a function tool's output text (media blocks named, not sent). */
function toAgentOutput(result: ToolCallResult): string {
  const parts = toolResultParts(result);
  const texts = parts.flatMap((p) => (p.kind === 'text' ? [p.text] : []));
  const media = parts.length - texts.length;
  const note = media === 0 ? '' : `\n[${media} attachment(s) omitted]`;
  return `${result.isError === true ? 'Tool error: ' : ''}${texts.join('\n')}${note}`;
}
