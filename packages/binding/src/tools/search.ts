/**
 * Tool search over a step (DESIGN §19.4): a BM25 index (`search-index.ts`) of a step view's tools, built
 * lazily once per {@link BindingView}. A view is shared by every binding captured until the next
 * publication or catalog swap, so the index is built once per published catalog, not per step, and
 * the next catalog (after `list_changed`) gets its own index with its own view.
 *
 * What a tool is found by: its model name, its raw name split into words (snake_case, camelCase,
 * kebab-case, dots, the `server__tool` separator), its title, its description and the names of its
 * parameters (nested ones too). Everything a server sends is bounded before it is indexed, so no
 * catalog can make indexing or a search slow: see the `SEARCH_*` constants.
 *
 * @packageDocumentation
 */
import * as z from 'zod/v4';
import { bagOf, checkOptions } from '../options-check.js';
import { TermIndexBuilder, type TermIndex } from './search-index.js';
import type { BindingView, BoundTool, ModelTool } from './view.js';

/** Most characters of a search query. */
export const SEARCH_MAX_QUERY_CHARS = 1000;
/** Most distinct words of a query that are looked up (the rest are ignored). */
export const SEARCH_MAX_QUERY_TERMS = 32;
/** Largest `limit` of one search. */
export const SEARCH_MAX_LIMIT = 100;
/** `limit` of a search that names none. */
export const SEARCH_DEFAULT_LIMIT = 10;
/** Characters of a tool's description that are indexed (the rest is not searchable). */
export const SEARCH_MAX_DESCRIPTION_CHARS = 4096;
/** Characters of a tool's name or title that are indexed. */
export const SEARCH_MAX_NAME_CHARS = 256;
/** Parameter names indexed per tool, and the schema depth they are collected from. */
export const SEARCH_MAX_PARAMETERS = 64;
/** Nesting depth of the input schema that parameter names are collected from (1: top level). */
export const SEARCH_MAX_PARAMETER_DEPTH = 3;

/** Options of `McpBinding.search`. */
export interface ToolSearchOptions {
  /** Most hits returned, an integer from 1 to {@link SEARCH_MAX_LIMIT}. @default 10 */
  readonly limit?: number;
  /** Search only the tools of these servers. @default every bound server of the step */
  readonly servers?: readonly string[];
}

/** One tool found by a search: a tool of the step, so `step.prepareCall(hit.name)` runs it. */
export interface ToolSearchHit {
  /** The model-facing name (`server__tool`): pass it to `step.prepareCall`. */
  readonly name: string;
  /** The server the tool belongs to. */
  readonly server: string;
  /** The tool's name on its server (the raw MCP name). */
  readonly toolName: string;
  /** BM25 relevance, higher is better; comparable only within one search. */
  readonly score: number;
  /** The model tool, as in `step.tools`. */
  readonly tool: ModelTool;
}

const STOP_WORDS = new Set(
  'a an and are as at be by can could do for from give how i in into is it its me my of on or please show some that the their them then this to tool tools use want what when which with would you your'.split(
    ' ',
  ),
);

/**
 * The words of `text`, lower-cased: split at every non-letter/digit (so `_`, `-`, `.`, `__` and
 * spaces) and at camelCase boundaries (`readFile` → `read file`, `HTTPServer` → `http server`).
 */
export function searchWordsOf(text: string): string[] {
  return text
    .replace(/([\p{Ll}\p{N}])(\p{Lu})/gu, '$1 $2')
    .replace(/(\p{Lu}+)(\p{Lu}\p{Ll})/gu, '$1 $2')
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w !== '');
}

/** A light stemmer applied to indexed and query words alike: plurals and `-ing`/`-ed`. */
function termOf(word: string): string | null {
  if (STOP_WORDS.has(word)) return null;
  if (word.length > 4 && word.endsWith('ies')) return `${word.slice(0, -3)}y`;
  if (word.length > 5 && word.endsWith('ing')) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith('ed') && !word.endsWith('eed')) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss') && !word.endsWith('us')) {
    return word.slice(0, -1);
  }
  return word;
}

interface ToolIndex {
  readonly search: TermIndex;
  readonly entries: readonly BoundTool[];
  readonly tools: readonly ModelTool[];
}

/** The indexed fields, in this order, and their boosts. */
const FIELDS = [
  { boost: 3 }, // the model name and the raw name, split into words
  { boost: 2 }, // the title
  { boost: 1.5 }, // the description
  { boost: 0.5 }, // parameter names
] as const;

/**
 * A query term found in more than this share of the tools, and in more than
 * {@link COMMON_TERM_MIN} tools, is left out of the search (unless every term is): its BM25 weight
 * is low, but scoring it would visit a large part of the index (about 1 µs a tool).
 */
const COMMON_TERM_SHARE = 0.2;
/** Below this many tools with a term, the term is always looked up. */
const COMMON_TERM_MIN = 64;

const indexes = new WeakMap<BindingView, ToolIndex>();

const clip = (value: unknown, max: number): string =>
  typeof value === 'string' ? value.slice(0, max) : '';

/**
 * The names of the properties of `schema` and of its nested object schemas (`properties`, `items`),
 * breadth first, at most {@link SEARCH_MAX_PARAMETERS} names down to
 * {@link SEARCH_MAX_PARAMETER_DEPTH} levels. Stops reading a `properties` object once enough names
 * are found, so a 10,000-property schema costs the same as a 64-property one.
 */
export function parameterNamesOf(schema: unknown): string[] {
  const names: string[] = [];
  let level: unknown[] = [schema];
  for (let depth = 0; depth < SEARCH_MAX_PARAMETER_DEPTH && level.length > 0; depth++) {
    const next: unknown[] = [];
    for (const node of level) {
      if (typeof node !== 'object' || node === null) continue;
      const items: unknown = (node as { items?: unknown }).items;
      if (typeof items === 'object' && items !== null && !Array.isArray(items)) next.push(items);
      const properties: unknown = (node as { properties?: unknown }).properties;
      if (typeof properties !== 'object' || properties === null) continue;
      for (const key in properties) {
        if (names.length >= SEARCH_MAX_PARAMETERS) return names;
        if (!Object.hasOwn(properties, key)) continue;
        names.push(key.slice(0, SEARCH_MAX_NAME_CHARS));
        next.push((properties as Record<string, unknown>)[key]);
      }
    }
    level = next;
  }
  return names;
}

/** The words of each field of a tool, in {@link FIELDS}' order. */
function fieldWordsOf(bound: BoundTool, tool: ModelTool): string[][] {
  const raw = bound.descriptor.raw as {
    readonly title?: unknown;
    readonly annotations?: { readonly title?: unknown };
  };
  const title = typeof raw.title === 'string' ? raw.title : raw.annotations?.title;
  const rawName = bound.descriptor.name.slice(0, SEARCH_MAX_NAME_CHARS);
  return [
    searchWordsOf(`${tool.name.slice(0, SEARCH_MAX_NAME_CHARS * 2)} ${rawName}`),
    searchWordsOf(clip(title, SEARCH_MAX_NAME_CHARS)),
    searchWordsOf(tool.description.slice(0, SEARCH_MAX_DESCRIPTION_CHARS)),
    searchWordsOf(parameterNamesOf(tool.inputSchema).join(' ')),
  ];
}

/** The index of `view`, built on first use and kept as long as the view is. */
function indexOf(view: BindingView): ToolIndex {
  const known = indexes.get(view);
  if (known !== undefined) return known;
  const builder = new TermIndexBuilder(FIELDS);
  const entries: BoundTool[] = [];
  for (const tool of view.tools) {
    const bound = view.byModelName.get(tool.name);
    if (bound === undefined) throw new Error('stepbind: a step tool is missing from its view');
    entries.push(bound);
    builder.add(fieldWordsOf(bound, tool), termOf);
  }
  const index: ToolIndex = { search: builder.build(), entries, tools: view.tools };
  indexes.set(view, index);
  return index;
}

/**
 * The terms of a query worth looking up: processed like indexed words, deduplicated, at most
 * {@link SEARCH_MAX_QUERY_TERMS}, without the ones most tools contain (unless all are).
 */
function queryTermsOf(query: string, index: ToolIndex): string[] {
  const terms = new Set<string>();
  for (const word of searchWordsOf(query)) {
    if (terms.size >= SEARCH_MAX_QUERY_TERMS) break;
    const term = termOf(word);
    if (term !== null) terms.add(term);
  }
  const common = Math.max(COMMON_TERM_MIN, index.entries.length * COMMON_TERM_SHARE);
  const kept = [...terms].filter((t) => index.search.frequency(t) <= common);
  if (kept.length > 0 || terms.size === 0) return kept;
  const rarest = [...terms].sort(
    (a, b) => index.search.frequency(a) - index.search.frequency(b),
  )[0];
  return rarest === undefined ? [] : [rarest];
}

const querySchema = z
  .string()
  .min(1)
  .max(SEARCH_MAX_QUERY_CHARS)
  .describe(`a string of 1 to ${SEARCH_MAX_QUERY_CHARS} characters`);

/** @internal The `limit` of a search, here and in the deferred formats' search tools. */
export const searchLimitSchema = z
  .number()
  .int()
  .min(1)
  .max(SEARCH_MAX_LIMIT)
  .describe(`an integer from 1 to ${SEARCH_MAX_LIMIT}`);

const searchOptionsSchema = bagOf<ToolSearchOptions>()({
  limit: searchLimitSchema.optional(),
  servers: z.array(z.string()).max(10_000).describe('an array of server names').optional(),
});

/**
 * The tools of `view` that match `query`, best first (ties in the step's tool order), at most
 * `options.limit`. Frozen hits of frozen tools. Builds the view's index on first use.
 *
 * @throws RuntimeError `INVALID_OPTIONS` when `query` is not a string of 1 to
 *   {@link SEARCH_MAX_QUERY_CHARS} characters or an option is unknown or out of range.
 */
export function searchTools(
  view: BindingView,
  query: string,
  options: ToolSearchOptions = {},
): readonly ToolSearchHit[] {
  checkOptions(querySchema, query, { fn: 'McpBinding.search', root: 'query' });
  checkOptions(searchOptionsSchema, options, { fn: 'McpBinding.search' });
  const limit = options.limit ?? SEARCH_DEFAULT_LIMIT;
  const index = indexOf(view);
  const terms = queryTermsOf(query, index);
  if (terms.length === 0) return Object.freeze([]);
  const servers = options.servers === undefined ? undefined : new Set(options.servers);
  const ranked = index.search.search(
    terms.map((term) => ({
      term,
      prefix: term.length >= 4,
      // A typo is a word no tool has: only those are matched fuzzily (fuzzy lookups are the slow ones).
      maxDistance:
        term.length >= 5 && !index.search.has(term)
          ? Math.min(2, Math.round(term.length * 0.2))
          : 0,
    })),
    limit,
    servers === undefined ? undefined : (id) => servers.has(index.entries[id]?.server.name ?? ''),
  );
  return Object.freeze(
    ranked.map(({ id, score }) => {
      const entry = index.entries[id] as BoundTool;
      return Object.freeze({
        name: entry.modelName,
        server: entry.server.name,
        toolName: entry.descriptor.name,
        score,
        tool: index.tools[id] as ModelTool,
      });
    }),
  );
}
