/**
 * Provider-native deferred tools over a step (DESIGN §19.4): send a model a few tools up front and
 * let it find the rest with a search that runs here, over `step.search`. Pure functions of the step;
 * the shapes are typed to be assignable to the providers' own SDK types (checked by the tests):
 *
 * - Anthropic Messages: every tool, the deferred ones with `defer_loading: true`, plus a custom
 *   `search_tools` tool whose result is `tool_reference` blocks ({@link toAnthropicDeferredTools}).
 * - OpenAI Responses (`resources/responses`): a client-executed `tool_search` tool and the loaded
 *   tools in one namespace per server; a search answers with a `tool_search_output` item of
 *   namespaces whose functions carry `defer_loading: true` ({@link toOpenAIResponsesDeferredTools}).
 * - Chat Completions and Gemini: the loaded tools plus a portable `search_tools` function whose
 *   result lists the found tools' names, descriptions and input schemas
 *   ({@link toOpenAIChatDeferredTools}, {@link toGeminiDeferredTools}).
 *
 * Which tools are loaded up front is stable: the `alwaysLoaded` ones, then the step's tools in
 * order while the token budget lasts. The same catalog gives byte-identical up-front tools, so
 * prompt caches hold. A found tool is a tool of the step: `step.prepareCall(name)` runs it.
 *
 * @packageDocumentation
 */
import * as z from 'zod/v4';
import { CallError, ErrorCode } from '../errors.js';
import { bagOf, checkOptions, fn } from '../options-check.js';
import {
  toAnthropicTools,
  toGeminiFunctionDeclarations,
  toOpenAIChatTools,
  toOpenAIResponsesTools,
  type AnthropicTool,
  type FormattedTools,
  type GeminiFunctionDeclaration,
  type OpenAIChatTool,
  type OpenAIResponsesTool,
} from './formats.js';
import type { JsonSchemaObject } from './strict.js';
import {
  SEARCH_MAX_LIMIT,
  SEARCH_MAX_QUERY_CHARS,
  searchLimitSchema,
  type ToolSearchHit,
  type ToolSearchOptions,
} from './search.js';
import type { ModelTool } from './view.js';

/** The name of the search tool every deferred format adds. Never a step tool's name (no `__`). */
export const SEARCH_TOOLS_NAME = 'search_tools';

/** What the deferred formats need of a step: `McpBinding` is one. */
export interface SearchableStep {
  readonly tools: readonly ModelTool[];
  /** Bound servers first, in tool order, each with its tool count (as `McpBinding.servers`). */
  readonly servers: readonly (
    | { readonly name: string; readonly bound: true; readonly toolCount: number }
    | { readonly name: string; readonly bound: false }
  )[];
  search(query: string, options?: ToolSearchOptions): readonly ToolSearchHit[];
}

/** Options of every deferred format. */
export interface DeferredToolsOptions {
  /**
   * Tools never deferred: model names (`files__read_file`) or `server:*` for all of a server's.
   * They are sent up front even past the token budget. @default none
   */
  readonly alwaysLoaded?: readonly string[];
  /**
   * Tokens the up-front tool definitions may take: after the `alwaysLoaded` tools, the step's
   * tools are kept loaded in order until the next one would pass the budget. @default 0
   */
  readonly tokenBudget?: number;
  /**
   * Tokens of one provider tool object's JSON text. stepbind ships no tokenizer; pass one
   * (e.g. `gpt-tokenizer`'s `countTokens`) for exact budgets. @default `Math.ceil(text.length / 4)`
   */
  readonly countTokens?: (text: string) => number;
  /** Most tools one search returns (the model may ask for fewer). @default 5 */
  readonly limit?: number;
}

/** Which tools a deferred format sends up front, and which it leaves to search. */
export interface DeferralPlan {
  /** Model names sent up front, in step order. */
  readonly loaded: readonly string[];
  /** Model names left to search, in step order. */
  readonly deferred: readonly string[];
  /** The up-front tool definitions' tokens, by `countTokens`. */
  readonly upFrontTokens: number;
}

const optionsSchema = bagOf<DeferredToolsOptions>()({
  alwaysLoaded: z.array(z.string()).describe('an array of model names or "server:*"').optional(),
  tokenBudget: z.number().int().min(0).describe('an integer ≥ 0 (tokens)').optional(),
  countTokens: fn<DeferredToolsOptions['countTokens']>('(text) => number').optional(),
  limit: searchLimitSchema.optional(),
});

/** `Math.ceil(text.length / 4)`: the usual four characters a token of English and JSON. */
export const estimateTokens = (text: string): number => Math.ceil(text.length / 4);

/** The JSON Schema of the search tool's arguments. */
function searchParameters(limit: number): JsonSchemaObject {
  return {
    type: 'object',
    properties: {
      query: {
        type: 'string',
        description: 'What the tool should do, in a few words (e.g. "create calendar event").',
      },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: limit,
        description: `Most tools to return (default ${limit}).`,
      },
    },
    required: ['query'],
    additionalProperties: false,
  };
}

function searchDescription(servers: readonly string[]): string {
  return `Find tools by what they do. Returns the best matching tools, which you can then call. Servers searched: ${servers.join(', ')}.`;
}

interface Deferral {
  readonly loaded: readonly ModelTool[];
  readonly deferred: readonly ModelTool[];
  readonly serverOf: ReadonlyMap<string, string>;
  readonly servers: readonly string[];
  readonly limit: number;
  readonly plan: DeferralPlan;
}

/** The server of each step tool: bound servers own consecutive runs of `step.tools`. */
function serversOf(step: SearchableStep): { map: Map<string, string>; servers: string[] } {
  const map = new Map<string, string>();
  const servers: string[] = [];
  let at = 0;
  for (const server of step.servers) {
    if (!server.bound) continue;
    servers.push(server.name);
    for (let i = 0; i < server.toolCount; i++) {
      const tool = step.tools[at++];
      if (tool !== undefined) map.set(tool.name, server.name);
    }
  }
  if (at !== step.tools.length) throw new Error('stepbind: the step tools and servers disagree');
  return { map, servers };
}

function deferralOf(
  step: SearchableStep,
  options: DeferredToolsOptions,
  fnName: string,
  sizeOf: (tool: ModelTool) => string,
): Deferral {
  checkOptions(optionsSchema, options, { fn: fnName });
  const { map: serverOf, servers } = serversOf(step);
  const always = new Set(options.alwaysLoaded ?? []);
  const countTokens = options.countTokens ?? estimateTokens;
  let budget = options.tokenBudget ?? 0;
  let open = true;
  let upFrontTokens = 0;
  const loaded: ModelTool[] = [];
  const deferred: ModelTool[] = [];
  for (const tool of step.tools) {
    const pinned = always.has(tool.name) || always.has(`${serverOf.get(tool.name) ?? ''}:*`);
    const tokens = pinned || open ? countTokens(sizeOf(tool)) : 0;
    if (pinned || (open && tokens <= budget)) {
      loaded.push(tool);
      upFrontTokens += tokens;
      if (!pinned) budget -= tokens;
    } else {
      // The first tool past the budget closes it, so the loaded set is a stable prefix.
      open = false;
      deferred.push(tool);
    }
  }
  return {
    loaded,
    deferred,
    serverOf,
    servers,
    limit: options.limit ?? 5,
    plan: Object.freeze({
      loaded: Object.freeze(loaded.map((t) => t.name)),
      deferred: Object.freeze(deferred.map((t) => t.name)),
      upFrontTokens,
    }),
  };
}

/**
 * Runs the model's search call: parses `{ query, limit? }` and searches the step.
 *
 * @throws CallError `INVALID_ARGUMENTS` when the arguments are not an object with a query string
 *   of 1 to 1,000 characters; send it back with `toToolResult` so the model can correct itself.
 */
function runSearch(
  step: SearchableStep,
  raw: unknown,
  max: number,
  deferredOnly: ReadonlySet<string>,
): readonly ToolSearchHit[] {
  let args = raw;
  if (typeof raw === 'string') {
    try {
      args = raw.trim() === '' ? {} : JSON.parse(raw);
    } catch {
      throw badSearch('not valid JSON');
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw badSearch('not a JSON object');
  }
  const { query, limit } = args as { query?: unknown; limit?: unknown };
  if (typeof query !== 'string' || query.trim() === '' || query.length > SEARCH_MAX_QUERY_CHARS) {
    throw badSearch(`missing "query" (a string of 1 to ${SEARCH_MAX_QUERY_CHARS} characters)`);
  }
  const wanted =
    typeof limit === 'number' && Number.isInteger(limit) && limit >= 1 ? Math.min(limit, max) : max;
  // Loaded tools are already in the model's context: only deferred ones are worth returning.
  return step
    .search(query, { limit: Math.min(SEARCH_MAX_LIMIT, wanted + step.tools.length) })
    .filter((hit) => deferredOnly.has(hit.name))
    .slice(0, wanted);
}

function badSearch(errors: string): CallError {
  return new CallError(
    ErrorCode.INVALID_ARGUMENTS,
    `The arguments the model sent for "${SEARCH_TOOLS_NAME}" are ${errors}; nothing was searched. Send the tool result back so the model can correct them.`,
    { detail: { modelName: SEARCH_TOOLS_NAME, errors } },
  );
}

const namesOf = (tools: readonly ModelTool[]): Set<string> => new Set(tools.map((t) => t.name));

// ---------------------------------------------------------------- Anthropic Messages

/** An Anthropic client tool, maybe deferred (`Tool` with `defer_loading`). */
export interface AnthropicDeferrableTool extends AnthropicTool {
  readonly defer_loading?: true;
}

/** The `tool_result` of the search tool: one `tool_reference` block per found tool. */
export interface AnthropicToolReferenceResult {
  readonly type: 'tool_result';
  readonly tool_use_id: string;
  readonly content: { readonly type: 'tool_reference'; readonly tool_name: string }[];
}

/** A step's tools for Anthropic Messages with deferred loading. */
export interface AnthropicDeferredTools extends DeferralPlan {
  /** Pass as `tools` of `messages.create`: every tool (deferred ones marked) and the search tool. */
  readonly tools: AnthropicDeferrableTool[];
  /** Arguments of a step tool's `tool_use`, as `toAnthropicTools(...).parseArguments`. */
  readonly parseArguments: FormattedTools<AnthropicTool>['parseArguments'];
  /**
   * Answers a `tool_use` of {@link SEARCH_TOOLS_NAME} (`block.name === SEARCH_TOOLS_NAME`): the
   * `tool_result` block to send back, whose `tool_reference`s load the found tools.
   * @throws CallError `INVALID_ARGUMENTS` for a malformed query.
   */
  search(toolUse: { readonly id: string; readonly input: unknown }): AnthropicToolReferenceResult;
}

/** The step's tools for Anthropic Messages, the ones not loaded up front `defer_loading: true`. */
export function toAnthropicDeferredTools(
  step: SearchableStep,
  options: DeferredToolsOptions = {},
): AnthropicDeferredTools {
  const formatted = toAnthropicTools(step.tools);
  const byName = new Map(formatted.tools.map((t) => [t.name, t]));
  const d = deferralOf(step, options, 'toAnthropicDeferredTools', (t) =>
    JSON.stringify(byName.get(t.name) ?? {}),
  );
  const deferred = namesOf(d.deferred);
  const tools: AnthropicDeferrableTool[] = formatted.tools.map((t) =>
    deferred.has(t.name) ? { ...t, defer_loading: true as const } : t,
  );
  tools.push(
    Object.freeze({
      name: SEARCH_TOOLS_NAME,
      description: searchDescription(d.servers),
      input_schema: searchParameters(d.limit),
    }),
  );
  return {
    ...d.plan,
    tools,
    parseArguments: (name, raw) => formatted.parseArguments(name, raw),
    search: (toolUse) => ({
      type: 'tool_result',
      tool_use_id: toolUse.id,
      content: runSearch(step, toolUse.input, d.limit, deferred).map((hit) => ({
        type: 'tool_reference' as const,
        tool_name: hit.name,
      })),
    }),
  };
}

// ---------------------------------------------------------------- OpenAI Responses

/** A function inside a namespace (`NamespaceTool.Function`). */
export interface OpenAIResponsesNamespaceFunction extends OpenAIResponsesTool {
  readonly defer_loading?: true;
}

/** One server's tools as an OpenAI Responses namespace (`NamespaceTool`). */
export interface OpenAIResponsesNamespace {
  readonly type: 'namespace';
  readonly name: string;
  readonly description: string;
  readonly tools: OpenAIResponsesNamespaceFunction[];
}

/** The client-executed tool search tool (`ToolSearchTool`). */
export interface OpenAIResponsesToolSearch {
  readonly type: 'tool_search';
  readonly execution: 'client';
  readonly description: string;
  readonly parameters: JsonSchemaObject;
}

/** The answer to a `tool_search_call` (`ResponseToolSearchOutputItemParam`). */
export interface OpenAIResponsesToolSearchOutput {
  readonly type: 'tool_search_output';
  readonly call_id: string | null;
  readonly execution: 'client';
  readonly status: 'completed';
  readonly tools: OpenAIResponsesNamespace[];
}

/** A step's tools for the OpenAI Responses API with client-executed tool search. */
export interface OpenAIResponsesDeferredTools extends DeferralPlan {
  /** Pass as `tools` of `responses.create`: the tool search tool, then one namespace per server. */
  readonly tools: (OpenAIResponsesToolSearch | OpenAIResponsesNamespace)[];
  /** Arguments of a `function_call` (its `name` is the model name; `namespace` the server). */
  readonly parseArguments: FormattedTools<OpenAIResponsesTool>['parseArguments'];
  /**
   * Answers a `tool_search_call` output item: the `tool_search_output` input item to send back.
   * @throws CallError `INVALID_ARGUMENTS` for a malformed query.
   */
  search(call: {
    readonly call_id: string | null;
    readonly arguments: unknown;
  }): OpenAIResponsesToolSearchOutput;
}

/**
 * The step's tools for the OpenAI Responses API: loaded tools up front grouped per server as
 * namespaces, the rest found by the client-executed `tool_search` and returned as namespaces of
 * `defer_loading: true` functions. Functions keep their model names, so a `function_call`'s `name`
 * goes straight to `step.prepareCall`.
 */
export function toOpenAIResponsesDeferredTools(
  step: SearchableStep,
  options: DeferredToolsOptions & { readonly strict?: boolean } = {},
): OpenAIResponsesDeferredTools {
  const { strict, ...rest } = options;
  const formatted = toOpenAIResponsesTools(step.tools, strict === undefined ? {} : { strict });
  const byName = new Map(formatted.tools.map((t) => [t.name, t]));
  const d = deferralOf(step, rest, 'toOpenAIResponsesDeferredTools', (t) =>
    JSON.stringify(byName.get(t.name) ?? {}),
  );
  const deferred = namesOf(d.deferred);
  const grouped = (names: readonly string[], defer: boolean): OpenAIResponsesNamespace[] => {
    const groups = new Map<string, OpenAIResponsesNamespaceFunction[]>();
    for (const name of names) {
      const tool = byName.get(name);
      const server = d.serverOf.get(name);
      if (tool === undefined || server === undefined) continue;
      let group = groups.get(server);
      if (group === undefined) groups.set(server, (group = []));
      group.push(defer ? { ...tool, defer_loading: true } : tool);
    }
    return [...groups].map(([server, tools]) => ({
      type: 'namespace',
      name: server,
      description: `Tools of the MCP server "${server}".`,
      tools,
    }));
  };
  return {
    ...d.plan,
    tools: [
      {
        type: 'tool_search',
        execution: 'client',
        description: searchDescription(d.servers),
        parameters: searchParameters(d.limit),
      },
      ...grouped(d.plan.loaded, false),
    ],
    parseArguments: (name, raw) => formatted.parseArguments(name, raw),
    search: (call) => ({
      type: 'tool_search_output',
      call_id: call.call_id,
      execution: 'client',
      status: 'completed',
      tools: grouped(
        runSearch(step, call.arguments, d.limit, deferred).map((h) => h.name),
        true,
      ),
    }),
  };
}

// ---------------------------------------------------------------- portable search_tools

/** One found tool as the portable `search_tools` function returns it to the model. */
export interface FoundTool {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: ModelTool['inputSchema'];
}

/** The result of a portable `search_tools` call. */
export interface PortableSearchResult<T> {
  /** The function result for the model: `{ tools: FoundTool[] }`. */
  readonly result: { readonly tools: readonly FoundTool[] };
  /** The found tools in the provider's shape: add them to the next request's `tools`. */
  readonly tools: readonly T[];
}

/** A step's tools with a portable `search_tools` function (Chat Completions, Gemini). */
export interface PortableDeferredTools<T> extends DeferralPlan {
  /** The loaded tools, then the `search_tools` function. */
  readonly tools: T[];
  /** Arguments of a step tool's call, as the plain format's `parseArguments`. */
  readonly parseArguments: FormattedTools<T>['parseArguments'];
  /**
   * Runs a `search_tools` call (its arguments, a JSON string or an object).
   * @throws CallError `INVALID_ARGUMENTS` for a malformed query.
   */
  search(args: unknown): PortableSearchResult<T>;
}

function portable<T>(
  step: SearchableStep,
  options: DeferredToolsOptions,
  fnName: string,
  formatted: FormattedTools<T>,
  nameOf: (tool: T) => string,
  searchTool: (description: string, parameters: JsonSchemaObject) => T,
): PortableDeferredTools<T> {
  const byName = new Map(formatted.tools.map((t) => [nameOf(t), t]));
  const d = deferralOf(step, options, fnName, (t) => JSON.stringify(byName.get(t.name) ?? {}));
  const loaded = namesOf(d.loaded);
  const deferred = namesOf(d.deferred);
  const tools = formatted.tools.filter((t) => loaded.has(nameOf(t)));
  tools.push(searchTool(searchDescription(d.servers), searchParameters(d.limit)));
  return {
    ...d.plan,
    tools,
    parseArguments: (name, raw) => formatted.parseArguments(name, raw),
    search: (args) => {
      const hits = runSearch(step, args, d.limit, deferred);
      return {
        result: {
          tools: hits.map((h) => ({
            name: h.name,
            description: h.tool.description,
            inputSchema: h.tool.inputSchema,
          })),
        },
        tools: hits.flatMap((h) => {
          const tool = byName.get(h.name);
          return tool === undefined ? [] : [tool];
        }),
      };
    },
  };
}

/** The step's tools for OpenAI Chat Completions: the loaded ones and a `search_tools` function. */
export function toOpenAIChatDeferredTools(
  step: SearchableStep,
  options: DeferredToolsOptions & { readonly strict?: boolean } = {},
): PortableDeferredTools<OpenAIChatTool> {
  const { strict, ...rest } = options;
  return portable(
    step,
    rest,
    'toOpenAIChatDeferredTools',
    toOpenAIChatTools(step.tools, strict === undefined ? {} : { strict }),
    (t) => t.function.name,
    (description, parameters) => ({
      type: 'function',
      function: { name: SEARCH_TOOLS_NAME, description, parameters, strict: false },
    }),
  );
}

/** The step's tools for Gemini: the loaded declarations and a `search_tools` declaration. */
export function toGeminiDeferredTools(
  step: SearchableStep,
  options: DeferredToolsOptions = {},
): PortableDeferredTools<GeminiFunctionDeclaration> {
  return portable(
    step,
    options,
    'toGeminiDeferredTools',
    toGeminiFunctionDeclarations(step.tools),
    (t) => t.name,
    (description, parametersJsonSchema) => ({
      name: SEARCH_TOOLS_NAME,
      description,
      parametersJsonSchema,
    }),
  );
}
