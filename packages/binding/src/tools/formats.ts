/**
 * Provider tool formats over a step: pure functions from the tools a step advertises
 * (`step.tools`, {@link ModelTool}[]) to the request shapes of OpenAI Chat Completions, OpenAI
 * Responses, Anthropic Messages and Google Gemini. The shapes are plain objects typed to be
 * assignable to each provider's official SDK types (`openai`, `@anthropic-ai/sdk`, `@google/genai`),
 * which the golden tests check; stepbind depends on none of them.
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode } from '../errors.js';
import { toStrictSchema, type JsonSchemaObject } from './strict.js';
import type { ModelTool } from './view.js';

/** An OpenAI Chat Completions function tool (`ChatCompletionFunctionTool`). */
export interface OpenAIChatTool {
  readonly type: 'function';
  readonly function: {
    readonly name: string;
    readonly description?: string;
    readonly parameters: JsonSchemaObject;
    readonly strict: boolean;
  };
}

/** An OpenAI Responses API function tool (`FunctionTool`). */
export interface OpenAIResponsesTool {
  readonly type: 'function';
  readonly name: string;
  readonly description?: string;
  readonly parameters: JsonSchemaObject;
  /** Always explicit: the Responses API treats a missing `strict` as `true`. */
  readonly strict: boolean;
}

/** An Anthropic Messages API client tool (`Tool`). */
export interface AnthropicTool {
  readonly name: string;
  readonly description?: string;
  readonly input_schema: JsonSchemaObject;
}

/**
 * A Gemini function declaration (`FunctionDeclaration`), with the JSON Schema passed as
 * `parametersJsonSchema` (as `@google/genai`'s own `mcpToTool` does), not converted to OpenAPI.
 */
export interface GeminiFunctionDeclaration {
  readonly name: string;
  readonly description?: string;
  readonly parametersJsonSchema: JsonSchemaObject;
}

/** A tool sent with `strict: false`, and why strict mode could not be used for it. */
export interface NotStrictTool {
  readonly name: string;
  readonly reason: string;
  /** JSON pointer into the tool's input schema, `""` for the root. */
  readonly path: string;
}

/** A tool left out of a provider's list because that provider cannot accept it. */
export interface OmittedTool {
  readonly name: string;
  readonly reason: string;
}

/** The tools of one step in one provider's shape. */
export interface FormattedTools<T> {
  /**
   * The provider tool list, in `step.tools` order. A fresh array (append your own tools freely);
   * the tool objects in it are frozen and shared between steps.
   */
  readonly tools: T[];
  /** Tools sent with `strict: false` and the reason for each (OpenAI formats only). */
  readonly notStrict: readonly NotStrictTool[];
  /** Tools the provider cannot accept, left out of {@link tools}. */
  readonly omitted: readonly OmittedTool[];
  /**
   * The arguments of a model's call, ready for `step.prepareCall(name).run(args)`: parses a JSON
   * string (an empty string is `{}`) and, for a tool sent strict, removes the `null`s that stand for
   * omitted optional properties. A name the step does not know is returned unchanged
   * (`prepareCall` then reports `UNKNOWN_TOOL`).
   *
   * @throws CallError `INVALID_ARGUMENTS` when the arguments are not valid JSON or not an object;
   *   render it with `toToolResult` so the model can correct itself.
   */
  parseArguments(
    name: string,
    raw: string | Readonly<Record<string, unknown>>,
  ): Readonly<Record<string, unknown>>;
}

/** Options of the OpenAI formats. */
export interface OpenAIToolsOptions {
  /**
   * Send each tool with `strict: true` where its schema converts without changing its meaning
   * (see `toStrictSchema` for the rules), and `strict: false` with a reason otherwise. `false`
   * sends every tool non-strict with its schema unchanged.
   * @default true
   */
  readonly strict?: boolean;
}

type Restore = (args: Readonly<Record<string, unknown>>) => Readonly<Record<string, unknown>>;

interface Built<T> {
  readonly tool: T;
  readonly restore?: Restore;
  readonly notStrict?: NotStrictTool;
}

/** One cache per (format, option) so steps that share a view share provider objects too. */
const caches = new Map<string, WeakMap<ModelTool, Built<unknown>>>();

function format<T>(
  key: string,
  tools: readonly ModelTool[],
  build: (tool: ModelTool) => Built<T> | OmittedTool,
): FormattedTools<T> {
  let cache = caches.get(key);
  if (cache === undefined) caches.set(key, (cache = new WeakMap()));
  const out: T[] = [];
  const notStrict: NotStrictTool[] = [];
  const omitted: OmittedTool[] = [];
  const restores = new Map<string, Restore>();
  for (const tool of tools) {
    let built = cache.get(tool) as Built<T> | OmittedTool | undefined;
    if (built === undefined) {
      built = build(tool);
      cache.set(tool, built as Built<unknown>);
    }
    if ('reason' in built) {
      omitted.push(built);
      continue;
    }
    out.push(built.tool);
    if (built.notStrict !== undefined) notStrict.push(built.notStrict);
    if (built.restore !== undefined) restores.set(tool.name, built.restore);
  }
  return {
    tools: out,
    notStrict: Object.freeze(notStrict),
    omitted: Object.freeze(omitted),
    parseArguments: (name, raw) => parseArguments(name, raw, restores.get(name)),
  };
}

function strictOf(
  tool: ModelTool,
  strict: boolean,
): {
  parameters: JsonSchemaObject;
  strict: boolean;
  restore?: Restore;
  notStrict?: NotStrictTool;
} {
  if (!strict) return { parameters: tool.inputSchema, strict: false };
  const conversion = toStrictSchema(tool.inputSchema);
  if (conversion.strict) {
    return { parameters: conversion.schema, strict: true, restore: conversion.restore };
  }
  return {
    parameters: tool.inputSchema,
    strict: false,
    notStrict: Object.freeze({ name: tool.name, reason: conversion.reason, path: conversion.path }),
  };
}

const described = (tool: ModelTool): { description?: string } =>
  tool.description === '' ? {} : { description: tool.description };

/** The step's tools for OpenAI Chat Completions (`tools` of `chat.completions.create`). */
export function toOpenAIChatTools(
  tools: readonly ModelTool[],
  options: OpenAIToolsOptions = {},
): FormattedTools<OpenAIChatTool> {
  const strict = options.strict ?? true;
  return format(`chat:${strict}`, tools, (tool) => {
    const s = strictOf(tool, strict);
    return {
      tool: Object.freeze({
        type: 'function' as const,
        function: Object.freeze({
          name: tool.name,
          ...described(tool),
          parameters: s.parameters,
          strict: s.strict,
        }),
      }),
      ...(s.restore === undefined ? {} : { restore: s.restore }),
      ...(s.notStrict === undefined ? {} : { notStrict: s.notStrict }),
    };
  });
}

/** The step's tools for the OpenAI Responses API (`tools` of `responses.create`). */
export function toOpenAIResponsesTools(
  tools: readonly ModelTool[],
  options: OpenAIToolsOptions = {},
): FormattedTools<OpenAIResponsesTool> {
  const strict = options.strict ?? true;
  return format(`responses:${strict}`, tools, (tool) => {
    const s = strictOf(tool, strict);
    return {
      tool: Object.freeze({
        type: 'function' as const,
        name: tool.name,
        ...described(tool),
        parameters: s.parameters,
        strict: s.strict,
      }),
      ...(s.restore === undefined ? {} : { restore: s.restore }),
      ...(s.notStrict === undefined ? {} : { notStrict: s.notStrict }),
    };
  });
}

/**
 * The step's tools for the Anthropic Messages API (`tools` of `messages.create`), schemas
 * unchanged. Anthropic hands `tool_use.input` back as an object; `parseArguments` accepts it as is.
 */
export function toAnthropicTools(tools: readonly ModelTool[]): FormattedTools<AnthropicTool> {
  return format('anthropic', tools, (tool) => ({
    tool: Object.freeze({ name: tool.name, ...described(tool), input_schema: tool.inputSchema }),
  }));
}

/** Gemini's function name rule: a letter or `_` first, then letters, digits, `_ . : -`, ≤ 128. */
const GEMINI_NAME = /^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$/;

/**
 * The step's tools as Gemini function declarations: pass them as
 * `config.tools: [{ functionDeclarations: tools }]` to `models.generateContent`. Names Gemini
 * rejects (a model name starting with a digit or `-`, from such a server name) are left out and
 * listed in `omitted`.
 */
export function toGeminiFunctionDeclarations(
  tools: readonly ModelTool[],
): FormattedTools<GeminiFunctionDeclaration> {
  return format('gemini', tools, (tool) =>
    GEMINI_NAME.test(tool.name)
      ? {
          tool: Object.freeze({
            name: tool.name,
            ...described(tool),
            parametersJsonSchema: tool.inputSchema,
          }),
        }
      : Object.freeze({
          name: tool.name,
          reason:
            'Gemini requires function names to start with a letter or "_"; rename the server so its name starts with a letter.',
        }),
  );
}

function parseArguments(
  name: string,
  raw: string | Readonly<Record<string, unknown>>,
  restore: Restore | undefined,
): Readonly<Record<string, unknown>> {
  let args: unknown = raw;
  if (typeof raw === 'string') {
    if (raw.trim() === '') {
      args = {};
    } else {
      try {
        args = JSON.parse(raw);
      } catch (error) {
        throw invalid(
          name,
          `not valid JSON (${error instanceof Error ? error.message : String(error)})`,
        );
      }
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw invalid(name, 'not a JSON object');
  }
  if (restore === undefined) return args as Readonly<Record<string, unknown>>;
  try {
    return restore(args as Readonly<Record<string, unknown>>);
  } catch (error) {
    throw invalid(name, error instanceof Error ? error.message : String(error));
  }
}

function invalid(name: string, errors: string): CallError {
  return new CallError(
    ErrorCode.INVALID_ARGUMENTS,
    `The arguments the model sent for "${name}" are ${errors}; nothing was run. Send the tool result back so the model can correct them.`,
    { detail: { modelName: name, errors } },
  );
}
