/**
 * Resource contents and prompts in each provider's shape (DESIGN §20.3), next to the tool formats:
 * the contents `step.readResource` returned become user-message content blocks for OpenAI Chat
 * Completions, OpenAI Responses, Anthropic Messages and Gemini, and a prompt's messages become
 * provider messages. They go through the same block renderer as tool results (`tools/results.ts`):
 *
 * | contents | OpenAI Chat | OpenAI Responses | Anthropic | Gemini |
 * |---|---|---|---|---|
 * | text | `text` with its uri | `input_text` | `text` | `text` |
 * | image blob (png, jpeg, gif, webp) | `image_url` (data URL) | `input_image` | `image` | `inlineData` |
 * | PDF blob | `file` | `input_file` | `document` | `inlineData` |
 * | other blob | a note | a note | a note | `inlineData` |
 *
 * A block a provider cannot take is replaced by a note saying what was left out and why, never
 * silently dropped. Typed to be assignable to the providers' SDK types (checked by the tests).
 *
 * @packageDocumentation
 */
import type { McpContentBlock, McpResourceContents } from '../tools/content.js';
import {
  toolResultParts,
  type AnthropicToolResultContent,
  type OpenAIChatContentPart,
  type OpenAIResponsesOutputPart,
  type ToolResultPart,
} from '../tools/results.js';
import type { PromptResult, ResourceContents } from './step.js';

/** A Gemini content part (`Part`): text or inline data. */
export type GeminiResourcePart =
  { text: string } | { inlineData: { mimeType: string; data: string; displayName: string } };

/** What the helpers take: `readResource`'s answer, or its `contents`. */
export type ResourceContentsLike = ResourceContents | readonly McpResourceContents[];

/** Image types Anthropic and OpenAI accept. */
type WebImageType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp';

const WEB_IMAGES: ReadonlySet<string> = new Set([
  'image/jpeg',
  'image/png',
  'image/gif',
  'image/webp',
]);

/** The contents in provider-neutral form (see `toolResultParts`), in order. */
export function resourceParts(contents: ResourceContentsLike): ToolResultPart[] {
  const items = 'contents' in contents ? contents.contents : contents;
  return toolResultParts({
    content: items.map((resource): McpContentBlock => ({ type: 'resource', resource })),
  });
}

type Media = Extract<ToolResultPart, { kind: 'media' }>;
const dataUrl = (p: Media): string => `data:${p.mimeType};base64,${p.data}`;
const note = (p: Media, provider: string): string =>
  `[${p.mimeType} ${p.media} ${p.name} omitted: ${provider} does not accept this type]`;

/** Resource contents as Chat Completions user content parts (`ChatCompletionContentPart[]`). */
export function toOpenAIChatResourceParts(contents: ResourceContentsLike): OpenAIChatContentPart[] {
  return resourceParts(contents).map((p): OpenAIChatContentPart => {
    if (p.kind === 'text') return { type: 'text', text: p.text };
    if (p.media === 'image' && WEB_IMAGES.has(p.mimeType)) {
      return { type: 'image_url', image_url: { url: dataUrl(p) } };
    }
    if (p.mimeType === 'application/pdf') {
      return { type: 'file', file: { file_data: dataUrl(p), filename: p.name } };
    }
    return { type: 'text', text: note(p, 'Chat Completions') };
  });
}

/** Resource contents as Responses input content (`ResponseInputContent[]`). */
export function toOpenAIResponsesResourceParts(
  contents: ResourceContentsLike,
): OpenAIResponsesOutputPart[] {
  return resourceParts(contents).map((p): OpenAIResponsesOutputPart => {
    if (p.kind === 'text') return { type: 'input_text', text: p.text };
    if (p.media === 'image' && WEB_IMAGES.has(p.mimeType)) {
      return { type: 'input_image', image_url: dataUrl(p), detail: 'auto' };
    }
    if (p.mimeType === 'application/pdf') {
      return { type: 'input_file', file_data: dataUrl(p), filename: p.name };
    }
    return { type: 'input_text', text: note(p, 'the Responses API') };
  });
}

/** Resource contents as Anthropic user content blocks (text, `image`, `document`). */
export function toAnthropicResourceBlocks(
  contents: ResourceContentsLike,
): AnthropicToolResultContent[] {
  return resourceParts(contents).map((p): AnthropicToolResultContent => {
    if (p.kind === 'text') return { type: 'text', text: p.text };
    if (p.media === 'image' && WEB_IMAGES.has(p.mimeType)) {
      return {
        type: 'image',
        source: { type: 'base64', media_type: p.mimeType as WebImageType, data: p.data },
      };
    }
    if (p.mimeType === 'application/pdf') {
      return {
        type: 'document',
        source: { type: 'base64', media_type: 'application/pdf', data: p.data },
        title: p.name,
      };
    }
    return { type: 'text', text: note(p, 'Anthropic') };
  });
}

/** Resource contents as Gemini parts (`Part[]`): text, or inline data for any blob. */
export function toGeminiResourceParts(contents: ResourceContentsLike): GeminiResourcePart[] {
  return resourceParts(contents).map((p): GeminiResourcePart =>
    p.kind === 'text'
      ? { text: p.text }
      : { inlineData: { mimeType: p.mimeType, data: p.data, displayName: p.name } },
  );
}

/** A prompt message for Anthropic (`MessageParam`). */
export interface AnthropicPromptMessage {
  role: 'user' | 'assistant';
  content: AnthropicToolResultContent[];
}

/**
 * A prompt's messages for Anthropic Messages (`MessageParam[]`), each block rendered as a tool
 * result block would be (an embedded resource as its text or document, a link as text).
 */
export function toAnthropicPromptMessages(prompt: PromptResult): AnthropicPromptMessage[] {
  return prompt.messages.map((m) => ({
    role: m.role,
    content: blocksOf(m.content, toAnthropicBlocks),
  }));
}

/** A prompt message for Chat Completions (`ChatCompletionMessageParam`). */
export type OpenAIChatPromptMessage =
  { role: 'user'; content: OpenAIChatContentPart[] } | { role: 'assistant'; content: string };

/**
 * A prompt's messages for Chat Completions: user messages keep their media parts; assistant
 * messages are text (Chat takes no media from the assistant), media noted.
 */
export function toOpenAIChatPromptMessages(prompt: PromptResult): OpenAIChatPromptMessage[] {
  return prompt.messages.map((m): OpenAIChatPromptMessage => {
    const parts = blocksOf(m.content, toChatParts);
    if (m.role === 'user') return { role: 'user', content: parts };
    return {
      role: 'assistant',
      content: parts
        .map((p) =>
          p.type === 'text' ? p.text : `[${p.type} omitted: assistant messages are text]`,
        )
        .join('\n'),
    };
  });
}

/** A prompt message for Gemini (`Content`): `user` or `model`. */
export interface GeminiPromptContent {
  role: 'user' | 'model';
  parts: GeminiResourcePart[];
}

/** A prompt's messages as Gemini contents (assistant becomes `model`). */
export function toGeminiPromptContents(prompt: PromptResult): GeminiPromptContent[] {
  return prompt.messages.map((m) => ({
    role: m.role === 'assistant' ? 'model' : 'user',
    parts: blocksOf(m.content, toGeminiParts),
  }));
}

function blocksOf<T>(block: McpContentBlock, render: (parts: ToolResultPart[]) => T[]): T[] {
  return render(toolResultParts({ content: [block] }));
}

function toAnthropicBlocks(parts: ToolResultPart[]): AnthropicToolResultContent[] {
  return parts.flatMap((p) =>
    p.kind === 'text'
      ? [{ type: 'text' as const, text: p.text }]
      : toAnthropicResourceBlocks(resourceOfMedia(p)),
  );
}

function toChatParts(parts: ToolResultPart[]): OpenAIChatContentPart[] {
  return parts.flatMap((p) =>
    p.kind === 'text'
      ? [{ type: 'text' as const, text: p.text }]
      : toOpenAIChatResourceParts(resourceOfMedia(p)),
  );
}

function toGeminiParts(parts: ToolResultPart[]): GeminiResourcePart[] {
  return parts.map((p): GeminiResourcePart =>
    p.kind === 'text'
      ? { text: p.text }
      : { inlineData: { mimeType: p.mimeType, data: p.data, displayName: p.name } },
  );
}

/** A media part as a blob resource, so one rule renders media for resources and prompts alike. */
function resourceOfMedia(p: Media): McpResourceContents[] {
  return [{ uri: p.name, mimeType: p.mimeType, blob: p.data }];
}
