/**
 * Listing one server's resources, resource templates or prompts (DESIGN §20.3): every page, with
 * the bounds of tool discovery (§4: page budget, item budget, cursor size, a cursor seen twice),
 * and every item checked and frozen. A broken listing is a typed {@link CatalogError} and nothing
 * of it is used; an item that is not valid is dropped and reported, never a crash.
 *
 * @packageDocumentation
 */
import { CatalogError, ErrorCode } from '../errors.js';
import type {
  FeatureMethod,
  StepPrompt,
  StepPromptArgument,
  StepResource,
  StepResourceTemplate,
} from './types.js';

/** Bounds of one resources/prompts listing. A value at the limit passes. */
export interface FeatureListLimits {
  /** Pages per listing. @default 100 */
  readonly maxPages: number;
  /** Items per listing, every page together. @default 10000 */
  readonly maxItems: number;
  /** Length of one cursor, in characters. @default 65536 */
  readonly maxCursorLength: number;
  /** Length of a uri or uri template, in characters. @default 8192 */
  readonly maxUriLength: number;
  /** Length of a description or title, in characters. @default 8192 */
  readonly maxDescriptionLength: number;
  /** Declared arguments of one prompt. @default 64 */
  readonly maxPromptArguments: number;
}

/** The default {@link FeatureListLimits}. */
export const DEFAULT_FEATURE_LIST_LIMITS: FeatureListLimits = Object.freeze({
  maxPages: 100,
  maxItems: 10_000,
  maxCursorLength: 64 * 1024,
  maxUriLength: 8192,
  maxDescriptionLength: 8192,
  maxPromptArguments: 64,
});

/** The three lists. */
export type FeatureListKind = 'resources' | 'resourceTemplates' | 'prompts';

/** The request of each list. */
export const LIST_METHOD: Readonly<Record<FeatureListKind, FeatureMethod>> = Object.freeze({
  resources: 'resources/list',
  resourceTemplates: 'resources/templates/list',
  prompts: 'prompts/list',
});

/** An item left out of a listing, and why. */
export interface DroppedItem {
  /** 1-based page. */
  readonly page: number;
  /** 0-based index on its page. */
  readonly index: number;
  readonly reason: string;
}

/** The item type of each list. */
export interface FeatureItemOf {
  resources: StepResource;
  resourceTemplates: StepResourceTemplate;
  prompts: StepPrompt;
}

/** A whole listing: the valid items in server order, and the dropped ones. */
export interface FeatureListing<K extends FeatureListKind> {
  readonly items: readonly FeatureItemOf[K][];
  readonly dropped: readonly DroppedItem[];
  readonly pages: number;
}

/** Prompt names are tool names (DESIGN §4): the model-facing name is built from them. */
const PROMPT_NAME = /^[A-Za-z0-9._-]{1,128}$/;
/** A uri scheme, as RFC 3986 spells it. */
const URI_SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
const MAX_NAME_LENGTH = 1024;

/**
 * Lists every page of `kind` from `server` through `fetchPage` (one request per call, `cursor`
 * absent on the first) and checks each item.
 *
 * @throws CatalogError `PAGE_LIMIT`, `ITEM_LIMIT`, `CURSOR_TOO_LARGE`, `CURSOR_REPEATED`,
 *   `INVALID_PAGE`, or the request's own failure.
 */
export async function listFeature<K extends FeatureListKind>(
  kind: K,
  server: string,
  fetchPage: (cursor: string | undefined) => Promise<unknown>,
  limits: FeatureListLimits = DEFAULT_FEATURE_LIST_LIMITS,
): Promise<FeatureListing<K>> {
  const method = LIST_METHOD[kind];
  const items: FeatureItemOf[K][] = [];
  const dropped: DroppedItem[] = [];
  const seenKeys = new Set<string>();
  const seenCursors = new Set<string>();
  let cursor: string | undefined;
  for (let page = 1; ; page++) {
    if (page > limits.maxPages) {
      throw new CatalogError(
        ErrorCode.PAGE_LIMIT,
        `${method} of server "${server}" has more than ${limits.maxPages} pages; nothing of it is used. The previous list stays.`,
        { detail: { server, method, limit: limits.maxPages, page } },
      );
    }
    const result = await fetchPage(cursor);
    const field = kind === 'resourceTemplates' ? 'resourceTemplates' : kind;
    const raw = isRecord(result) ? result[field] : undefined;
    if (!Array.isArray(raw)) {
      throw new CatalogError(
        ErrorCode.INVALID_PAGE,
        `${method} of server "${server}" answered page ${page} without a "${field}" array; nothing of it is used.`,
        { detail: { server, method, page } },
      );
    }
    for (let index = 0; index < raw.length; index++) {
      const checked = checkItem(kind, server, raw[index], limits);
      if (typeof checked === 'string') {
        dropped.push({ page, index, reason: checked });
        continue;
      }
      const key = kind === 'resources' ? (checked as StepResource).uri : checked.name;
      if (seenKeys.has(key)) {
        dropped.push({ page, index, reason: `repeats "${key}" listed before` });
        continue;
      }
      seenKeys.add(key);
      if (items.length >= limits.maxItems) {
        throw new CatalogError(
          ErrorCode.ITEM_LIMIT,
          `${method} of server "${server}" lists more than ${limits.maxItems} items; nothing of it is used. The previous list stays.`,
          { detail: { server, method, limit: limits.maxItems, page } },
        );
      }
      items.push(checked as FeatureItemOf[K]);
    }
    const next = isRecord(result) ? result['nextCursor'] : undefined;
    if (next === undefined || next === null) {
      return { items: Object.freeze(items), dropped, pages: page };
    }
    if (typeof next !== 'string') {
      throw new CatalogError(
        ErrorCode.INVALID_PAGE,
        `${method} of server "${server}" answered page ${page} with a nextCursor that is not a string.`,
        { detail: { server, method, page } },
      );
    }
    if (next.length > limits.maxCursorLength) {
      throw new CatalogError(
        ErrorCode.CURSOR_TOO_LARGE,
        `${method} of server "${server}" sent a cursor of ${next.length} characters (limit ${limits.maxCursorLength}).`,
        { detail: { server, method, page, limit: limits.maxCursorLength, bytes: next.length } },
      );
    }
    if (seenCursors.has(next)) {
      throw new CatalogError(
        ErrorCode.CURSOR_REPEATED,
        `${method} of server "${server}" sent a cursor it had sent before (page ${page}): the listing would never end, so nothing of it is used.`,
        { detail: { server, method, page } },
      );
    }
    seenCursors.add(next);
    cursor = next;
  }
}

/** One item checked and frozen, or why it is dropped. */
function checkItem(
  kind: FeatureListKind,
  server: string,
  raw: unknown,
  limits: FeatureListLimits,
): StepResource | StepResourceTemplate | StepPrompt | string {
  if (!isRecord(raw)) return 'not an object';
  const name = raw['name'];
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_LENGTH) {
    return `its name is not a string of 1 to ${MAX_NAME_LENGTH} characters`;
  }
  const texts = optionalTexts(raw, limits);
  if (typeof texts === 'string') return texts;
  if (kind === 'prompts') {
    if (!PROMPT_NAME.test(name)) return `prompt name "${name}" is not ^[A-Za-z0-9._-]{1,128}$`;
    const args = promptArguments(raw['arguments'], limits);
    if (typeof args === 'string') return args;
    return Object.freeze({ modelName: '', server, name, ...texts, arguments: args });
  }
  const uriKey = kind === 'resources' ? 'uri' : 'uriTemplate';
  const uri = raw[uriKey];
  if (typeof uri !== 'string' || uri.length > limits.maxUriLength || !URI_SCHEME.test(uri)) {
    return `its ${uriKey} is not a uri with a scheme of at most ${limits.maxUriLength} characters`;
  }
  const mimeType = raw['mimeType'];
  if (mimeType !== undefined && (typeof mimeType !== 'string' || mimeType.length > 255)) {
    return 'its mimeType is not a short string';
  }
  const mime = mimeType === undefined ? {} : { mimeType };
  if (kind === 'resourceTemplates') {
    return Object.freeze({ server, uriTemplate: uri, name, ...texts, ...mime });
  }
  const size = raw['size'];
  if (size !== undefined && !(Number.isSafeInteger(size) && (size as number) >= 0)) {
    return 'its size is not a non-negative integer';
  }
  return Object.freeze({
    server,
    uri,
    name,
    ...texts,
    ...mime,
    ...(size === undefined ? {} : { size: size as number }),
  });
}

function optionalTexts(
  raw: Record<string, unknown>,
  limits: FeatureListLimits,
): { title?: string; description?: string } | string {
  const out: { title?: string; description?: string } = {};
  for (const key of ['title', 'description'] as const) {
    const value = raw[key];
    if (value === undefined) continue;
    if (typeof value !== 'string') return `its ${key} is not a string`;
    if (value.length > limits.maxDescriptionLength) {
      return `its ${key} is longer than ${limits.maxDescriptionLength} characters`;
    }
    out[key] = value;
  }
  return out;
}

function promptArguments(
  raw: unknown,
  limits: FeatureListLimits,
): readonly StepPromptArgument[] | string {
  if (raw === undefined) return Object.freeze([]);
  if (!Array.isArray(raw)) return 'its arguments are not an array';
  if (raw.length > limits.maxPromptArguments) {
    return `it declares more than ${limits.maxPromptArguments} arguments`;
  }
  const out: StepPromptArgument[] = [];
  const names = new Set<string>();
  for (const arg of raw) {
    if (!isRecord(arg)) return 'an argument is not an object';
    const name = arg['name'];
    if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME_LENGTH) {
      return 'an argument has no valid name';
    }
    if (names.has(name)) return `argument "${name}" is declared twice`;
    names.add(name);
    const description = arg['description'];
    if (
      description !== undefined &&
      (typeof description !== 'string' || description.length > limits.maxDescriptionLength)
    ) {
      return `argument "${name}" has a description that is not a bounded string`;
    }
    out.push(
      Object.freeze({
        name,
        ...(description === undefined ? {} : { description }),
        required: arg['required'] === true,
      }),
    );
  }
  return Object.freeze(out);
}

/** @internal */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
