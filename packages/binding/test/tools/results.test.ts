import type Anthropic from '@anthropic-ai/sdk';
import type { Content, Part } from '@google/genai';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import {
  CallError,
  toAnthropicToolResult,
  toGeminiFunctionResponse,
  toOpenAIChatToolMessages,
  toOpenAIResponsesOutput,
  toToolResult,
  type ToolCallResult,
} from '@stepbind/binding';

const PNG = 'iVBORw0KGgo=';
const WAV = 'UklGRg==';
const PDF = 'JVBERi0=';

/** One block of every MCP content type, plus structured content. */
const EVERYTHING: ToolCallResult = {
  content: [
    { type: 'text', text: 'Found 2 files.' },
    { type: 'image', data: PNG, mimeType: 'image/png' },
    { type: 'audio', data: WAV, mimeType: 'audio/wav' },
    {
      type: 'resource_link',
      uri: 'file:///tmp/a.txt',
      name: 'a.txt',
      mimeType: 'text/plain',
      description: 'The first file',
    },
    {
      type: 'resource',
      resource: { uri: 'file:///tmp/b.txt', mimeType: 'text/plain', text: 'B!' },
    },
    {
      type: 'resource',
      resource: { uri: 'file:///tmp/report.pdf', mimeType: 'application/pdf', blob: PDF },
    },
    { type: 'text', text: '' },
  ],
  structuredContent: { count: 2 },
};

const LINK = '[resource link] a.txt <file:///tmp/a.txt> (text/plain): The first file';
const EMBEDDED = '[resource] <file:///tmp/b.txt> (text/plain)\nB!';

const stale = toToolResult(
  new CallError('STALE_CATALOG', 'stale', { detail: { server: 'files', tool: 'read' } }),
);

describe('toOpenAIChatToolMessages', () => {
  it('matches the golden: text in the tool message, media in one follow-up user message', () => {
    const golden: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      {
        role: 'tool',
        tool_call_id: 'call_1',
        content: [
          'Found 2 files.',
          '[image attachment 1 (image/png) follows in the next message]',
          '[audio attachment 2 (audio/wav) follows in the next message]',
          LINK,
          EMBEDDED,
          '[file attachment 3 (application/pdf) follows in the next message]',
        ].join('\n'),
      },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Attachment 1 of tool call call_1:' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
          { type: 'text', text: 'Attachment 2 of tool call call_1:' },
          { type: 'input_audio', input_audio: { data: WAV, format: 'wav' } },
          { type: 'text', text: 'Attachment 3 of tool call call_1:' },
          {
            type: 'file',
            file: { file_data: `data:application/pdf;base64,${PDF}`, filename: 'report.pdf' },
          },
        ],
      },
    ];
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = toOpenAIChatToolMessages(
      'call_1',
      EVERYTHING,
    );
    expect(messages).toEqual(golden);
  });

  it('sends a refusal as one tool message that starts with Error:', () => {
    const messages = toOpenAIChatToolMessages('call_2', stale);
    expect(messages).toEqual([
      {
        role: 'tool',
        tool_call_id: 'call_2',
        content: expect.stringMatching(/^Error: The tool catalog of server "files" changed/),
      },
    ]);
  });
});

describe('toOpenAIResponsesOutput', () => {
  it('matches the golden function_call_output item, typed as the openai SDK input item', () => {
    const golden: OpenAI.Responses.ResponseInputItem.FunctionCallOutput = {
      type: 'function_call_output',
      call_id: 'fc_1',
      output: [
        { type: 'input_text', text: 'Found 2 files.' },
        { type: 'input_image', image_url: `data:image/png;base64,${PNG}`, detail: 'auto' },
        {
          type: 'input_text',
          text: '[audio/wav audio omitted: Responses function outputs do not accept this type]',
        },
        { type: 'input_text', text: LINK },
        { type: 'input_text', text: EMBEDDED },
        {
          type: 'input_file',
          file_data: `data:application/pdf;base64,${PDF}`,
          filename: 'report.pdf',
        },
      ],
    };
    const item: OpenAI.Responses.ResponseInputItem = toOpenAIResponsesOutput('fc_1', EVERYTHING);
    expect(item).toEqual(golden);
  });

  it('sends text-only results as a string, structured content as JSON when there is no text', () => {
    expect(toOpenAIResponsesOutput('fc_2', { structuredContent: { n: 1 } }).output).toBe('{"n":1}');
    expect(toOpenAIResponsesOutput('fc_3', stale).output).toMatch(/^Error: The tool catalog/);
  });
});

describe('toAnthropicToolResult', () => {
  it('matches the golden tool_result block, typed as @anthropic-ai/sdk ToolResultBlockParam', () => {
    const golden: Anthropic.Messages.ToolResultBlockParam = {
      type: 'tool_result',
      tool_use_id: 'toolu_1',
      content: [
        { type: 'text', text: 'Found 2 files.' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
        {
          type: 'text',
          text: '[audio/wav audio omitted: Anthropic tool results do not accept audio]',
        },
        { type: 'text', text: LINK },
        { type: 'text', text: EMBEDDED },
        {
          type: 'document',
          source: { type: 'base64', media_type: 'application/pdf', data: PDF },
          title: 'report.pdf',
        },
      ],
    };
    const block: Anthropic.Messages.ToolResultBlockParam = toAnthropicToolResult(
      'toolu_1',
      EVERYTHING,
    );
    expect(block).toEqual(golden);
    const next: Anthropic.Messages.MessageParam = { role: 'user', content: [block] };
    expect(next.content).toHaveLength(1);
  });

  it('marks refusals and tool errors with is_error and notes unsupported images', () => {
    expect(toAnthropicToolResult('toolu_2', stale)).toMatchObject({ is_error: true });
    expect(
      toAnthropicToolResult('toolu_3', {
        isError: true,
        content: [{ type: 'image', data: 'x', mimeType: 'image/svg+xml' }],
      }),
    ).toEqual({
      type: 'tool_result',
      tool_use_id: 'toolu_3',
      is_error: true,
      content: [
        {
          type: 'text',
          text: '[image/svg+xml image omitted: Anthropic tool results do not accept this type]',
        },
      ],
    });
  });
});

describe('toGeminiFunctionResponse', () => {
  it('matches the golden functionResponse part, typed as @google/genai Part', () => {
    const golden: Part = {
      functionResponse: {
        id: 'call-9',
        name: 'files__list',
        response: { output: { count: 2 } },
        parts: [
          { inlineData: { mimeType: 'image/png', data: PNG, displayName: 'image-1' } },
          { inlineData: { mimeType: 'audio/wav', data: WAV, displayName: 'audio-2' } },
          { inlineData: { mimeType: 'application/pdf', data: PDF, displayName: 'report.pdf' } },
        ],
      },
    };
    const part: Part = toGeminiFunctionResponse('files__list', EVERYTHING, { id: 'call-9' });
    expect(part).toEqual(golden);
    const next: Content = { role: 'user', parts: [part] };
    expect(next.parts).toHaveLength(1);
  });

  it('answers with the text as output, or as error for a refusal', () => {
    expect(
      toGeminiFunctionResponse('f', { content: [{ type: 'text', text: 'ok' }] }).functionResponse,
    ).toEqual({ name: 'f', response: { output: 'ok' } });
    expect(toGeminiFunctionResponse('f', stale).functionResponse.response).toEqual({
      error: expect.stringContaining('changed; this call was not run'),
    });
  });
});
