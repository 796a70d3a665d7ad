import type Anthropic from '@anthropic-ai/sdk';
import type { FunctionDeclaration, GenerateContentParameters } from '@google/genai';
import type OpenAI from 'openai';
import {
  SEARCH_TOOLS_NAME,
  isStepbindError,
  toAnthropicDeferredTools,
  toGeminiDeferredTools,
  toOpenAIChatDeferredTools,
  toOpenAIResponsesDeferredTools,
} from '@stepbind/binding';
import { describe, expect, it } from 'vitest';
import { stepOf, tool } from '../support/steps.js';

const step = stepOf({
  files: [
    tool('read_file', 'Read a file.', ['path']),
    tool('write_file', 'Write a file.', ['path', 'content']),
  ],
  calendar: [
    tool('create_event', 'Create a calendar event with attendees.', ['start', 'attendees']),
    tool('delete_event', 'Cancel an event.', ['eventId']),
  ],
});

describe('Anthropic deferred tools', () => {
  it('sends every tool, the deferred ones with defer_loading, and a custom search tool', () => {
    const deferred = toAnthropicDeferredTools(step, { alwaysLoaded: ['files__read_file'] });
    const tools: Anthropic.Messages.ToolUnion[] = deferred.tools;
    const request: Anthropic.Messages.MessageCreateParamsNonStreaming = {
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      messages: [{ role: 'user', content: 'hi' }],
      tools,
    };
    expect(request.tools).toHaveLength(5);
    expect(deferred.tools.map((t) => [t.name, t.defer_loading ?? false])).toEqual([
      ['files__read_file', false],
      ['files__write_file', true],
      ['calendar__create_event', true],
      ['calendar__delete_event', true],
      [SEARCH_TOOLS_NAME, false],
    ]);
    expect(deferred.loaded).toEqual(['files__read_file']);
  });

  it('answers the search tool_use with tool_reference blocks of deferred tools only', () => {
    const deferred = toAnthropicDeferredTools(step, { alwaysLoaded: ['calendar:*'] });
    const result: Anthropic.Messages.ToolResultBlockParam = deferred.search({
      id: 'toolu_1',
      input: { query: 'calendar event attendees' },
    });
    expect(result).toEqual({ type: 'tool_result', tool_use_id: 'toolu_1', content: [] });
    const files = deferred.search({ id: 'toolu_2', input: { query: 'write file' } });
    expect(files.content[0]).toEqual({ type: 'tool_reference', tool_name: 'files__write_file' });
    const message: Anthropic.Messages.MessageParam = { role: 'user', content: [files] };
    expect(message.content).toHaveLength(1);
  });
});

describe('OpenAI Responses deferred tools', () => {
  it('sends a client tool_search and the loaded tools grouped per server as namespaces', () => {
    const deferred = toOpenAIResponsesDeferredTools(step, { alwaysLoaded: ['calendar:*'] });
    const request: OpenAI.Responses.ResponseCreateParamsNonStreaming = {
      model: 'gpt-5.4',
      input: 'hi',
      tools: deferred.tools,
    };
    expect(request.tools?.[0]).toMatchObject({ type: 'tool_search', execution: 'client' });
    expect(request.tools?.slice(1)).toMatchObject([
      {
        type: 'namespace',
        name: 'calendar',
        tools: [{ name: 'calendar__create_event' }, { name: 'calendar__delete_event' }],
      },
    ]);
  });

  it('answers a tool_search_call with namespaces of defer_loading functions', () => {
    const deferred = toOpenAIResponsesDeferredTools(step);
    const output: OpenAI.Responses.ResponseToolSearchOutputItemParam = deferred.search({
      call_id: 'call_1',
      arguments: { query: 'cancel an event' },
    });
    const input: OpenAI.Responses.ResponseInputItem[] = [output];
    expect(input[0]).toMatchObject({
      type: 'tool_search_output',
      call_id: 'call_1',
      execution: 'client',
      status: 'completed',
    });
    const [namespace] = output.tools as OpenAI.Responses.NamespaceTool[];
    expect(namespace?.name).toBe('calendar');
    expect(namespace?.tools[0]).toMatchObject({
      type: 'function',
      name: 'calendar__delete_event',
      defer_loading: true,
    });
  });
});

describe('portable search_tools', () => {
  it('gives Chat Completions the loaded tools, search_tools, and the found tools to add', () => {
    const deferred = toOpenAIChatDeferredTools(step, { alwaysLoaded: ['files__read_file'] });
    const tools: OpenAI.Chat.ChatCompletionTool[] = deferred.tools;
    expect(tools.map((t) => t.type === 'function' && t.function.name)).toEqual([
      'files__read_file',
      SEARCH_TOOLS_NAME,
    ]);
    const found = deferred.search('{"query":"create a calendar event"}');
    expect(found.result.tools[0]).toMatchObject({
      name: 'calendar__create_event',
      description: 'Create a calendar event with attendees.',
      inputSchema: { type: 'object' },
    });
    const next: OpenAI.Chat.ChatCompletionTool[] = [...tools, ...found.tools];
    expect(next).toHaveLength(2 + found.tools.length);
  });

  it('gives Gemini the loaded declarations and a search_tools declaration', () => {
    const deferred = toGeminiDeferredTools(step);
    const declarations: FunctionDeclaration[] = deferred.tools;
    const request: GenerateContentParameters = {
      model: 'gemini-2.5-flash',
      contents: 'hi',
      config: { tools: [{ functionDeclarations: declarations }] },
    };
    expect(request.config?.tools).toHaveLength(1);
    expect(declarations.map((d) => d.name)).toEqual([SEARCH_TOOLS_NAME]);
    expect(deferred.search({ query: 'write file' }).result.tools[0]?.name).toBe(
      'files__write_file',
    );
  });

  it('refuses a search call without a query with INVALID_ARGUMENTS', () => {
    const deferred = toGeminiDeferredTools(step);
    for (const args of [{}, 'not json', { query: '' }, ['q']]) {
      let error: unknown;
      try {
        deferred.search(args);
      } catch (e) {
        error = e;
      }
      expect(isStepbindError(error, 'INVALID_ARGUMENTS'), JSON.stringify(args)).toBe(true);
    }
  });
});

describe('the up-front set', () => {
  it('keeps tools loaded in step order until the token budget is used', () => {
    const count = (text: string): number => text.length;
    const all = toAnthropicDeferredTools(step, { tokenBudget: 1e9, countTokens: count });
    expect(all.deferred).toEqual([]);
    const first = JSON.stringify(all.tools[0]).length;
    const some = toAnthropicDeferredTools(step, { tokenBudget: first, countTokens: count });
    expect(some.loaded).toEqual(['files__read_file']);
    expect(some.upFrontTokens).toBe(first);
  });

  it('stops at the first tool past the budget, so the loaded set is a prefix', () => {
    const sizes = new Map([
      ['files__read_file', 10],
      ['files__write_file', 100],
    ]);
    const plan = toGeminiDeferredTools(step, {
      tokenBudget: 50,
      countTokens: (text) => sizes.get((JSON.parse(text) as { name: string }).name) ?? 1,
    });
    expect(plan.loaded).toEqual(['files__read_file']);
  });

  it('is byte-identical for the same catalog, so prompt caches hold', () => {
    const again = stepOf({
      files: [
        tool('read_file', 'Read a file.', ['path']),
        tool('write_file', 'Write a file.', ['path', 'content']),
      ],
      calendar: [
        tool('create_event', 'Create a calendar event with attendees.', ['start', 'attendees']),
        tool('delete_event', 'Cancel an event.', ['eventId']),
      ],
    });
    for (const format of [
      toAnthropicDeferredTools,
      toOpenAIResponsesDeferredTools,
      toOpenAIChatDeferredTools,
      toGeminiDeferredTools,
    ]) {
      const options = { alwaysLoaded: ['calendar:*'], tokenBudget: 40 };
      expect(JSON.stringify(format(again, options).tools)).toBe(
        JSON.stringify(format(step, options).tools),
      );
    }
  });

  it('refuses an unknown option with INVALID_OPTIONS', () => {
    let error: unknown;
    try {
      toAnthropicDeferredTools(step, { alwaysLoad: [] } as never);
    } catch (e) {
      error = e;
    }
    expect(isStepbindError(error, 'INVALID_OPTIONS')).toBe(true);
  });
});
