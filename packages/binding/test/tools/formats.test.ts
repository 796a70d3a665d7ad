import type Anthropic from '@anthropic-ai/sdk';
import type { FunctionDeclaration, GenerateContentParameters } from '@google/genai';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import {
  createCatalogSnapshot,
  isStepbindError,
  toAnthropicTools,
  toGeminiFunctionDeclarations,
  modelToolOf,
  toOpenAIChatTools,
  toOpenAIResponsesTools,
  toToolResult,
  type McpToolDefinition,
  type ModelTool,
} from '@stepbind/binding/internal';

function stepTools(server: string, tools: McpToolDefinition[]): readonly ModelTool[] {
  const snapshot = createCatalogSnapshot({
    identity: { name: server, transportDigest: 'sha256:t' },
    audience: 'default',
    policyEpoch: 0,
    revisionProof: 'unversioned',
    discoveryStartedAt: 0,
    pages: [tools],
  });
  return snapshot.tools.map((d) => modelToolOf(d.modelName, d));
}

const READ: McpToolDefinition = {
  name: 'read_file',
  description: 'Read a file.',
  inputSchema: {
    type: 'object',
    properties: { path: { type: 'string' }, limit: { type: 'integer', minimum: 1 } },
    required: ['path'],
  },
};
const TAG: McpToolDefinition = {
  name: 'tag',
  description: 'Tag a file.',
  inputSchema: {
    type: 'object',
    properties: { labels: { type: 'object', additionalProperties: { type: 'string' } } },
    required: ['labels'],
  },
};
const PING: McpToolDefinition = { name: 'ping', inputSchema: { type: 'object' } };

const tools = stepTools('files', [READ, TAG, PING]);

const STRICT_READ = {
  type: 'object',
  properties: { path: { type: 'string' }, limit: { type: ['integer', 'null'], minimum: 1 } },
  required: ['path', 'limit'],
  additionalProperties: false,
} as const;
const CLOSED = {
  type: 'object',
  properties: {},
  required: [],
  additionalProperties: false,
} as const;

describe('toOpenAIResponsesTools', () => {
  it('matches the golden, typed as the openai SDK FunctionTool', () => {
    const golden: OpenAI.Responses.FunctionTool[] = [
      {
        type: 'function',
        name: 'files__read_file',
        description: 'Read a file.',
        parameters: { ...STRICT_READ, required: ['path', 'limit'] },
        strict: true,
      },
      {
        type: 'function',
        name: 'files__tag',
        description: 'Tag a file.',
        parameters: TAG.inputSchema,
        strict: false,
      },
      {
        type: 'function',
        name: 'files__ping',
        parameters: { ...CLOSED, required: [] },
        strict: true,
      },
    ];
    const formatted = toOpenAIResponsesTools(tools);
    const typed: OpenAI.Responses.FunctionTool[] = formatted.tools;
    expect(typed).toEqual(golden);
    expect(formatted.notStrict).toEqual([
      {
        name: 'files__tag',
        reason: expect.stringContaining('admits other properties'),
        path: '/properties/labels/additionalProperties',
      },
    ]);
    // The list goes straight into a request.
    const request: OpenAI.Responses.ResponseCreateParamsNonStreaming = {
      model: 'gpt-test',
      input: 'hi',
      tools: formatted.tools,
    };
    expect(request.tools).toHaveLength(3);
  });

  it('restores the nulls a strict model sends for omitted optional arguments', () => {
    const formatted = toOpenAIResponsesTools(tools);
    expect(formatted.parseArguments('files__read_file', '{"path":"a.txt","limit":null}')).toEqual({
      path: 'a.txt',
    });
    expect(formatted.parseArguments('files__read_file', { path: 'a', limit: 3 })).toEqual({
      path: 'a',
      limit: 3,
    });
    expect(formatted.parseArguments('files__ping', '')).toEqual({});
  });

  it('sends every tool unchanged and non-strict with strict: false', () => {
    const formatted = toOpenAIResponsesTools(tools, { strict: false });
    expect(formatted.tools.map((t) => [t.strict, t.parameters])).toEqual([
      [false, READ.inputSchema],
      [false, TAG.inputSchema],
      [false, PING.inputSchema],
    ]);
    expect(formatted.notStrict).toEqual([]);
    expect(formatted.parseArguments('files__read_file', '{"path":"a","limit":null}')).toEqual({
      path: 'a',
      limit: null,
    });
  });

  it('refuses arguments that are not a JSON object with INVALID_ARGUMENTS a model can read', () => {
    const formatted = toOpenAIResponsesTools(tools);
    for (const raw of ['{"path":', '[1]', 'null']) {
      let error: unknown;
      try {
        formatted.parseArguments('files__read_file', raw);
      } catch (e) {
        error = e;
      }
      expect(isStepbindError(error) && error.code).toBe('INVALID_ARGUMENTS');
      expect(toToolResult(error).content[0].text).toMatch(/not (valid JSON|a JSON object)/);
    }
  });

  it('shares tool objects between steps and hands out a fresh list each time', () => {
    const a = toOpenAIResponsesTools(tools);
    const b = toOpenAIResponsesTools(tools);
    expect(a.tools).not.toBe(b.tools);
    expect(a.tools[0]).toBe(b.tools[0]);
    expect(Object.isFrozen(a.tools[0])).toBe(true);
  });
});

describe('toOpenAIChatTools', () => {
  it('matches the golden, typed as the openai SDK ChatCompletionTool', () => {
    const golden: OpenAI.Chat.Completions.ChatCompletionTool[] = [
      {
        type: 'function',
        function: {
          name: 'files__read_file',
          description: 'Read a file.',
          parameters: { ...STRICT_READ, required: ['path', 'limit'] },
          strict: true,
        },
      },
      {
        type: 'function',
        function: {
          name: 'files__tag',
          description: 'Tag a file.',
          parameters: TAG.inputSchema,
          strict: false,
        },
      },
      {
        type: 'function',
        function: { name: 'files__ping', parameters: { ...CLOSED, required: [] }, strict: true },
      },
    ];
    const formatted = toOpenAIChatTools(tools);
    const typed: OpenAI.Chat.Completions.ChatCompletionTool[] = formatted.tools;
    expect(typed).toEqual(golden);
    const request: OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming = {
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'hi' }],
      tools: formatted.tools,
    };
    expect(request.tools).toHaveLength(3);
    expect(formatted.parseArguments('files__read_file', '{"path":"p","limit":null}')).toEqual({
      path: 'p',
    });
  });
});

describe('toAnthropicTools', () => {
  it('matches the golden, typed as the @anthropic-ai/sdk Tool, schemas unchanged', () => {
    const golden: Anthropic.Messages.Tool[] = [
      {
        name: 'files__read_file',
        description: 'Read a file.',
        input_schema: READ.inputSchema as Anthropic.Messages.Tool.InputSchema,
      },
      {
        name: 'files__tag',
        description: 'Tag a file.',
        input_schema: TAG.inputSchema as Anthropic.Messages.Tool.InputSchema,
      },
      { name: 'files__ping', input_schema: { type: 'object' } },
    ];
    const formatted = toAnthropicTools(tools);
    const typed: Anthropic.Messages.ToolUnion[] = formatted.tools;
    expect(typed).toEqual(golden);
    expect(formatted.tools[0]?.input_schema).toBe(READ.inputSchema);
    const request: Anthropic.Messages.MessageCreateParamsNonStreaming = {
      model: 'claude-test',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
      tools: formatted.tools,
    };
    expect(request.tools).toHaveLength(3);
    expect(formatted.parseArguments('files__read_file', { path: 'x' })).toEqual({ path: 'x' });
  });
});

describe('toGeminiFunctionDeclarations', () => {
  it('matches the golden, typed as the @google/genai FunctionDeclaration', () => {
    const golden: FunctionDeclaration[] = [
      {
        name: 'files__read_file',
        description: 'Read a file.',
        parametersJsonSchema: READ.inputSchema,
      },
      { name: 'files__tag', description: 'Tag a file.', parametersJsonSchema: TAG.inputSchema },
      { name: 'files__ping', parametersJsonSchema: { type: 'object' } },
    ];
    const formatted = toGeminiFunctionDeclarations(tools);
    const typed: FunctionDeclaration[] = formatted.tools;
    expect(typed).toEqual(golden);
    const request: GenerateContentParameters = {
      model: 'gemini-test',
      contents: 'hi',
      config: { tools: [{ functionDeclarations: formatted.tools }] },
    };
    expect(request.config?.tools).toHaveLength(1);
  });

  it('leaves out names Gemini rejects and says why', () => {
    const formatted = toGeminiFunctionDeclarations(stepTools('9lives', [PING]));
    expect(formatted.tools).toEqual([]);
    expect(formatted.omitted).toEqual([
      { name: '9lives__ping', reason: expect.stringContaining('start with a letter') },
    ]);
  });
});
