/**
 * The MCP `tools/call` result types (protocol 2025-06-18 and later), as plain readonly interfaces:
 * binding does not import the SDK. The runtime's SDK adapter returns results of exactly this shape
 * (the SDK validates every `tools/call` response against the protocol schema).
 *
 * @packageDocumentation
 */

/** Optional MCP annotations on a content block (audience, priority, lastModified). */
export interface McpAnnotations {
  readonly audience?: readonly ('user' | 'assistant')[];
  readonly priority?: number;
  readonly lastModified?: string;
  readonly [key: string]: unknown;
}

/** Fields every content block may carry besides its own. */
interface BlockBase {
  readonly annotations?: McpAnnotations;
  readonly _meta?: Readonly<Record<string, unknown>>;
  readonly [key: string]: unknown;
}

/** Text content. */
export interface McpTextContent extends BlockBase {
  readonly type: 'text';
  readonly text: string;
}

/** Base64-encoded image content. */
export interface McpImageContent extends BlockBase {
  readonly type: 'image';
  /** Base64 data. */
  readonly data: string;
  readonly mimeType: string;
}

/** Base64-encoded audio content. */
export interface McpAudioContent extends BlockBase {
  readonly type: 'audio';
  /** Base64 data. */
  readonly data: string;
  readonly mimeType: string;
}

/** A link to a resource the client may read (`resources/read`); its content is not included. */
export interface McpResourceLink extends BlockBase {
  readonly type: 'resource_link';
  readonly uri: string;
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly mimeType?: string;
  readonly size?: number;
}

/** The text or blob of an embedded resource. */
export type McpResourceContents =
  | {
      readonly uri: string;
      readonly mimeType?: string;
      readonly text: string;
      readonly _meta?: Readonly<Record<string, unknown>>;
      readonly [key: string]: unknown;
    }
  | {
      readonly uri: string;
      readonly mimeType?: string;
      /** Base64 data. */
      readonly blob: string;
      readonly _meta?: Readonly<Record<string, unknown>>;
      readonly [key: string]: unknown;
    };

/** A resource embedded in the result. */
export interface McpEmbeddedResource extends BlockBase {
  readonly type: 'resource';
  readonly resource: McpResourceContents;
}

/** One block of a tool result's `content`. */
export type McpContentBlock =
  McpTextContent | McpImageContent | McpAudioContent | McpResourceLink | McpEmbeddedResource;
