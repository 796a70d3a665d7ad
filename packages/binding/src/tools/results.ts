/**
 * MCP tool results into each provider's tool-result message: the reverse of `formats.ts`. Pure
 * functions over a `tools/call` result (or `toToolResult(error)`), typed to be assignable to the
 * providers' official SDK types.
 *
 * What each provider receives, block by block:
 *
 * | MCP block | OpenAI Chat | OpenAI Responses | Anthropic | Gemini |
 * |---|---|---|---|---|
 * | text | tool message text | `input_text` | `text` | `response.output` text |
 * | image (png, jpeg, gif, webp) | a follow-up user message with `image_url` | `input_image` | `image` | `parts[].inlineData` |
 * | audio | follow-up `input_audio` (wav, mp3) | note | note | `parts[].inlineData` |
 * | resource link | text (name, uri, type) | text | text | text |
 * | embedded text resource | text with its uri | text | text | text |
 * | embedded blob | image/audio as above; PDF as `file` | PDF as `input_file` | PDF as `document` | `parts[].inlineData` |
 * | `structuredContent` | JSON text when no content | JSON text when no content | JSON text when no content | `response.output` object |
 * | `isError` | `Error: ` first | `Error: ` first | `is_error: true` | `response.error` |
 *
 * A block a provider cannot take is replaced by a short note saying what was left out and why
 * (for example `[audio/ogg audio omitted: Anthropic tool results do not accept audio]`), so the model
 * never silently loses content. Empty text blocks are dropped (Anthropic rejects them).
 *
 * @packageDocumentation
 */
import type { McpContentBlock } from './content.js';

/** What the renderers read from a `tools/call` result (an `ErrorToolResult` fits as well). */
export interface ToolResultLike {
  readonly content?: readonly McpContentBlock[];
  readonly structuredContent?: Readonly<Record<string, unknown>>;
  readonly isError?: boolean;
}

/** A Chat Completions tool message (`ChatCompletionToolMessageParam`). */
export interface OpenAIChatToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

/** A Chat Completions user content part (`ChatCompletionContentPart`). */
export type OpenAIChatContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string } }
  | { type: 'input_audio'; input_audio: { data: string; format: 'wav' | 'mp3' } }
  | { type: 'file'; file: { file_data: string; filename: string } };

/** A Chat Completions user message (`ChatCompletionUserMessageParam`) carrying a result's media. */
export interface OpenAIChatUserMessage {
  role: 'user';
  content: OpenAIChatContentPart[];
}

/** One part of a Responses `function_call_output` (`ResponseFunctionCallOutputItem`). */
export type OpenAIResponsesOutputPart =
  | { type: 'input_text'; text: string }
  | { type: 'input_image'; image_url: string; detail: 'auto' }
  | { type: 'input_file'; file_data: string; filename: string };

/** A Responses input item (`ResponseInputItem.FunctionCallOutput`). */
export interface OpenAIFunctionCallOutput {
  type: 'function_call_output';
  call_id: string;
  /** A string when the result is text only, otherwise a list of parts. */
  output: string | OpenAIResponsesOutputPart[];
}

/** Image types Anthropic and OpenAI accept. */
type WebImageType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp';

/** A block of an Anthropic `tool_result` (`TextBlockParam | ImageBlockParam | DocumentBlockParam`). */
export type AnthropicToolResultContent =
  | { type: 'text'; text: string }
  | { type: 'image'; source: { type: 'base64'; media_type: WebImageType; data: string } }
  | {
      type: 'document';
      source: { type: 'base64'; media_type: 'application/pdf'; data: string };
      title?: string;
    };

/** An Anthropic `tool_result` content block (`ToolResultBlockParam`), for the next user message. */
export interface AnthropicToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: AnthropicToolResultContent[];
  is_error?: boolean;
}

/** A Gemini `functionResponse` part (`Part`), for the next `user` content. */
export interface GeminiFunctionResponsePart {
  functionResponse: {
    /** The `functionCall.id` it answers, when the model gave one. */
    id?: string;
    name: string;
    /** `{ output }` on success (the structured content, or the text), `{ error }` on a tool error. */
    response: Record<string, unknown>;
    /** Media of the result (Gemini's multimodal function responses). */
    parts?: { inlineData: { mimeType: string; data: string; displayName: string } }[];
  };
}

/**
 * A result block in provider-neutral form: text (resource links and embedded text resources
 * rendered as text), or media with base64 data. What every provider renderer here starts from; use
 * it to write one for another framework.
 */
export type ToolResultPart =
  | { readonly kind: 'text'; readonly text: string }
  | {
      readonly kind: 'media';
      readonly media: 'image' | 'audio' | 'file';
      readonly mimeType: string;
      /** Base64 data. */
      readonly data: string;
      /** A label: `image-1`, `audio-2`, or the file name of an embedded blob. */
      readonly name: string;
    };

type Part = ToolResultPart;

const WEB_IMAGES: ReadonlySet<string> = new Set([
  'image/jpeg',
  'image/png',
  'image/gif',
  'image/webp',
]);

/**
 * The blocks of a result in provider-neutral form, in order: empty texts dropped, unknown block
 * types noted, and `structuredContent` as JSON text first when the result has no text at all.
 */
export function toolResultParts(result: ToolResultLike): ToolResultPart[] {
  return partsOf(result);
}

function partsOf(result: ToolResultLike): Part[] {
  const parts: Part[] = [];
  let media = 0;
  for (const block of result.content ?? []) {
    switch (block.type) {
      case 'text':
        if (block.text !== '') parts.push({ kind: 'text', text: block.text });
        break;
      case 'image':
      case 'audio':
        parts.push({
          kind: 'media',
          media: block.type,
          mimeType: block.mimeType,
          data: block.data,
          name: `${block.type}-${++media}`,
        });
        break;
      case 'resource_link': {
        const label = block.title ?? block.name;
        const extra = [block.mimeType, block.size === undefined ? undefined : `${block.size} bytes`]
          .filter((x) => x !== undefined)
          .join(', ');
        const description = block.description === undefined ? '' : `: ${block.description}`;
        parts.push({
          kind: 'text',
          text: `[resource link] ${label} <${block.uri}>${extra === '' ? '' : ` (${extra})`}${description}`,
        });
        break;
      }
      case 'resource': {
        const r = block.resource;
        const mimeType = r.mimeType ?? 'application/octet-stream';
        if ('text' in r && typeof r.text === 'string') {
          parts.push({
            kind: 'text',
            text: `[resource] <${r.uri}>${r.mimeType === undefined ? '' : ` (${r.mimeType})`}\n${r.text}`,
          });
        } else if ('blob' in r && typeof r.blob === 'string') {
          const kind = mimeType.startsWith('image/')
            ? 'image'
            : mimeType.startsWith('audio/')
              ? 'audio'
              : 'file';
          parts.push({
            kind: 'media',
            media: kind,
            mimeType,
            data: r.blob,
            name: fileName(r.uri, ++media),
          });
        }
        break;
      }
      default: {
        // A content type from a newer protocol: say so rather than drop it.
        const type = (block as { type?: unknown }).type;
        parts.push({
          kind: 'text',
          text: `[${String(type)} content omitted: not understood by stepbind]`,
        });
      }
    }
  }
  // MCP asks servers to mirror structured content as text; when one does not, the text is made here.
  if (!parts.some((p) => p.kind === 'text') && result.structuredContent !== undefined) {
    parts.unshift({ kind: 'text', text: JSON.stringify(result.structuredContent) });
  }
  return parts;
}

function fileName(uri: string, n: number): string {
  const last = uri.split(/[/\\]/).pop() ?? '';
  return /^[\w.-]{1,128}$/.test(last) ? last : `file-${n}`;
}

const dataUrl = (mimeType: string, data: string): string => `data:${mimeType};base64,${data}`;

const omitted = (p: Extract<Part, { kind: 'media' }>, why: string): string =>
  `[${p.mimeType} ${p.media} omitted: ${why}]`;

const withErrorMark = (parts: Part[], isError: boolean): Part[] =>
  !isError
    ? parts
    : parts[0]?.kind === 'text'
      ? [{ kind: 'text', text: `Error: ${parts[0].text}` }, ...parts.slice(1)]
      : [{ kind: 'text', text: 'Error:' }, ...parts];

/**
 * A result as Chat Completions messages: the `tool` message answering `toolCallId`, then (only
 * when the result has media Chat can take) one `user` message with those media, since Chat tool
 * messages carry text only. Append all of them, in order, after the assistant message.
 */
export function toOpenAIChatToolMessages(
  toolCallId: string,
  result: ToolResultLike,
): [OpenAIChatToolMessage, ...OpenAIChatUserMessage[]] {
  const texts: string[] = [];
  const media: OpenAIChatContentPart[] = [];
  let attachments = 0;
  for (const p of withErrorMark(partsOf(result), result.isError === true)) {
    if (p.kind === 'text') {
      texts.push(p.text);
      continue;
    }
    const n = attachments + 1;
    if (p.media === 'image' && WEB_IMAGES.has(p.mimeType)) {
      media.push({ type: 'text', text: `Attachment ${n} of tool call ${toolCallId}:` });
      media.push({ type: 'image_url', image_url: { url: dataUrl(p.mimeType, p.data) } });
      texts.push(`[image attachment ${n} (${p.mimeType}) follows in the next message]`);
      attachments++;
    } else if (p.media === 'audio' && audioFormat(p.mimeType) !== undefined) {
      media.push({ type: 'text', text: `Attachment ${n} of tool call ${toolCallId}:` });
      media.push({
        type: 'input_audio',
        input_audio: { data: p.data, format: audioFormat(p.mimeType) as 'wav' | 'mp3' },
      });
      texts.push(`[audio attachment ${n} (${p.mimeType}) follows in the next message]`);
      attachments++;
    } else if (p.mimeType === 'application/pdf') {
      media.push({ type: 'text', text: `Attachment ${n} of tool call ${toolCallId}:` });
      media.push({
        type: 'file',
        file: { file_data: dataUrl(p.mimeType, p.data), filename: p.name },
      });
      texts.push(`[file attachment ${n} (${p.mimeType}) follows in the next message]`);
      attachments++;
    } else {
      texts.push(omitted(p, 'Chat Completions does not accept this type'));
    }
  }
  const tool: OpenAIChatToolMessage = {
    role: 'tool',
    tool_call_id: toolCallId,
    content: texts.join('\n'),
  };
  return media.length === 0 ? [tool] : [tool, { role: 'user', content: media }];
}

function audioFormat(mimeType: string): 'wav' | 'mp3' | undefined {
  if (mimeType === 'audio/wav' || mimeType === 'audio/x-wav' || mimeType === 'audio/wave')
    return 'wav';
  if (mimeType === 'audio/mpeg' || mimeType === 'audio/mp3') return 'mp3';
  return undefined;
}

/**
 * A result as a Responses `function_call_output` item answering `callId` (the `call_id` of the
 * model's `function_call`): a string when it is text only, otherwise `input_text`, `input_image`
 * and `input_file` parts.
 */
export function toOpenAIResponsesOutput(
  callId: string,
  result: ToolResultLike,
): OpenAIFunctionCallOutput {
  const parts: OpenAIResponsesOutputPart[] = [];
  for (const p of withErrorMark(partsOf(result), result.isError === true)) {
    if (p.kind === 'text') parts.push({ type: 'input_text', text: p.text });
    else if (p.media === 'image' && WEB_IMAGES.has(p.mimeType)) {
      parts.push({ type: 'input_image', image_url: dataUrl(p.mimeType, p.data), detail: 'auto' });
    } else if (p.media === 'file' && p.mimeType === 'application/pdf') {
      parts.push({ type: 'input_file', file_data: dataUrl(p.mimeType, p.data), filename: p.name });
    } else {
      parts.push({
        type: 'input_text',
        text: omitted(p, 'Responses function outputs do not accept this type'),
      });
    }
  }
  const textOnly = parts.every((p) => p.type === 'input_text');
  return {
    type: 'function_call_output',
    call_id: callId,
    output: textOnly ? parts.map((p) => (p as { text: string }).text).join('\n') : parts,
  };
}

/**
 * A result as an Anthropic `tool_result` block answering `toolUseId` (the `id` of the model's
 * `tool_use`); put it first in the next `user` message. Sets `is_error` for tool errors.
 */
export function toAnthropicToolResult(
  toolUseId: string,
  result: ToolResultLike,
): AnthropicToolResultBlock {
  const content: AnthropicToolResultContent[] = [];
  for (const p of partsOf(result)) {
    if (p.kind === 'text') content.push({ type: 'text', text: p.text });
    else if (p.media === 'image' && WEB_IMAGES.has(p.mimeType)) {
      content.push({
        type: 'image',
        source: { type: 'base64', media_type: p.mimeType as WebImageType, data: p.data },
      });
    } else if (p.mimeType === 'application/pdf') {
      content.push({
        type: 'document',
        source: { type: 'base64', media_type: 'application/pdf', data: p.data },
        title: p.name,
      });
    } else {
      content.push({
        type: 'text',
        text: omitted(
          p,
          `Anthropic tool results do not accept ${p.media === 'audio' ? 'audio' : 'this type'}`,
        ),
      });
    }
  }
  return {
    type: 'tool_result',
    tool_use_id: toolUseId,
    content,
    ...(result.isError === true ? { is_error: true } : {}),
  };
}

/** Options of {@link toGeminiFunctionResponse}. */
export interface GeminiFunctionResponseOptions {
  /** The `functionCall.id` the response answers, when the model sent one. */
  readonly id?: string;
}

/**
 * A result as a Gemini `functionResponse` part for the function `name` (the `functionCall.name`).
 * `response` is `{ output }` (the structured content when there is any, otherwise the text) or
 * `{ error }` (the text) for a tool error; media go into `parts` as inline data.
 */
export function toGeminiFunctionResponse(
  name: string,
  result: ToolResultLike,
  options: GeminiFunctionResponseOptions = {},
): GeminiFunctionResponsePart {
  const texts: string[] = [];
  const media: { inlineData: { mimeType: string; data: string; displayName: string } }[] = [];
  for (const p of partsOf(result)) {
    if (p.kind === 'text') texts.push(p.text);
    else {
      media.push({ inlineData: { mimeType: p.mimeType, data: p.data, displayName: p.name } });
      texts.push(`[${p.media} ${p.name} (${p.mimeType}) attached]`);
    }
  }
  const text = texts.join('\n');
  const response: Record<string, unknown> =
    result.isError === true ? { error: text } : { output: result.structuredContent ?? text };
  return {
    functionResponse: {
      ...(options.id === undefined ? {} : { id: options.id }),
      name,
      response,
      ...(media.length === 0 ? {} : { parts: media }),
    },
  };
}
