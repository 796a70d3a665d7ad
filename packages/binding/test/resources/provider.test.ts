import type Anthropic from '@anthropic-ai/sdk';
import type { Content, Part } from '@google/genai';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import {
  toAnthropicPromptMessages,
  toAnthropicResourceBlocks,
  toGeminiPromptContents,
  toGeminiResourceParts,
  toOpenAIChatPromptMessages,
  toOpenAIChatResourceParts,
  toOpenAIResponsesResourceParts,
  type PromptResult,
  type ResourceContents,
} from '@stepbind/binding';

const PNG = 'iVBORw0KGgo=';
const PDF = 'JVBERi0xLjQ=';

const CONTENTS: ResourceContents = {
  server: 'docs',
  uri: 'file:///guide',
  contents: [
    { uri: 'file:///guide.md', mimeType: 'text/markdown', text: '# Guide' },
    { uri: 'file:///logo.png', mimeType: 'image/png', blob: PNG },
    { uri: 'file:///spec.pdf', mimeType: 'application/pdf', blob: PDF },
    { uri: 'file:///data.bin', mimeType: 'application/octet-stream', blob: 'AAAA' },
  ],
};

const PROMPT: PromptResult = {
  server: 'docs',
  modelName: 'docs__review',
  messages: [
    { role: 'user', content: { type: 'text', text: 'Review this:' } },
    { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
    { role: 'assistant', content: { type: 'text', text: 'Sure.' } },
  ],
};

describe('resource contents as provider content blocks', () => {
  it('OpenAI Chat: text, image_url, file for PDF, a note for other blobs', () => {
    const parts: OpenAI.Chat.Completions.ChatCompletionContentPart[] =
      toOpenAIChatResourceParts(CONTENTS);
    expect(parts).toEqual([
      { type: 'text', text: '[resource] <file:///guide.md> (text/markdown)\n# Guide' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
      {
        type: 'file',
        file: { file_data: `data:application/pdf;base64,${PDF}`, filename: 'spec.pdf' },
      },
      {
        type: 'text',
        text: '[application/octet-stream file data.bin omitted: Chat Completions does not accept this type]',
      },
    ]);
    const message: OpenAI.Chat.Completions.ChatCompletionMessageParam = {
      role: 'user',
      content: parts,
    };
    expect(message.role).toBe('user');
  });

  it('OpenAI Responses: input_text, input_image, input_file', () => {
    const parts: OpenAI.Responses.ResponseInputContent[] = toOpenAIResponsesResourceParts(
      CONTENTS.contents,
    );
    expect(parts.map((p) => p.type)).toEqual([
      'input_text',
      'input_image',
      'input_file',
      'input_text',
    ]);
    const item: OpenAI.Responses.ResponseInputItem = { role: 'user', content: parts };
    expect(item).toBeDefined();
  });

  it('Anthropic: text, image, document', () => {
    const blocks: Anthropic.Messages.ContentBlockParam[] = toAnthropicResourceBlocks(CONTENTS);
    expect(blocks[1]).toEqual({
      type: 'image',
      source: { type: 'base64', media_type: 'image/png', data: PNG },
    });
    expect(blocks[2]).toEqual({
      type: 'document',
      source: { type: 'base64', media_type: 'application/pdf', data: PDF },
      title: 'spec.pdf',
    });
    const message: Anthropic.Messages.MessageParam = { role: 'user', content: blocks };
    expect(message.content).toHaveLength(4);
  });

  it('Gemini: text and inline data for every blob', () => {
    const parts: Part[] = toGeminiResourceParts(CONTENTS);
    expect(parts[3]).toEqual({
      inlineData: { mimeType: 'application/octet-stream', data: 'AAAA', displayName: 'data.bin' },
    });
    const content: Content = { role: 'user', parts };
    expect(content.parts).toHaveLength(4);
  });
});

describe('prompt messages as provider messages', () => {
  it('Anthropic, OpenAI Chat and Gemini keep the roles and render media as the provider takes it', () => {
    const anthropic: Anthropic.Messages.MessageParam[] = toAnthropicPromptMessages(PROMPT);
    expect(anthropic[1]?.content).toEqual([
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
    ]);
    const chat: OpenAI.Chat.Completions.ChatCompletionMessageParam[] =
      toOpenAIChatPromptMessages(PROMPT);
    expect(chat[2]).toEqual({ role: 'assistant', content: 'Sure.' });
    expect(chat[1]).toEqual({
      role: 'user',
      content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } }],
    });
    const gemini: Content[] = toGeminiPromptContents(PROMPT);
    expect(gemini.map((c) => c.role)).toEqual(['user', 'user', 'model']);
  });
});
