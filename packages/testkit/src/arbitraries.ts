/**
 * fast-check arbitraries for MCP tool catalogs, their pagination, and the junk a misbehaving server
 * can send. Valid shapes ({@link arbTool}, {@link arbCatalog}, {@link arbPageSplit}) always pass
 * stepbind's validation; near-valid and junk shapes ({@link arbNearValidTool},
 * {@link arbListResult}) are meant to be rejected with a typed error or, when they happen to be
 * valid, accepted whole.
 *
 * @packageDocumentation
 */
import fc from 'fast-check';
import { CATALOG_REVISION_META_KEY, type McpToolDefinition } from '@stepbind/binding/internal';

/** Every character a raw MCP tool name may use (`^[A-Za-z0-9._-]{1,128}$`). */
const NAME_UNIT = fc.constantFrom(
  ...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-',
);

/**
 * Valid raw MCP tool names (`^[A-Za-z0-9._-]{1,128}$`): mostly 1–24 characters, sometimes 100–128,
 * including the `.` and `-` that model-facing names must rewrite.
 */
export function arbToolName(): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 9, arbitrary: fc.string({ unit: NAME_UNIT, minLength: 1, maxLength: 24 }) },
    { weight: 1, arbitrary: fc.string({ unit: NAME_UNIT, minLength: 100, maxLength: 128 }) },
  );
}

const propertyKey = fc
  .tuple(
    fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz'),
    fc.string({ unit: NAME_UNIT, maxLength: 8 }),
  )
  .map(([head, tail]) => head + tail);

/** A small JSON Schema for one argument: every form compiles under 2020-12 and draft-07. */
const leafSchema: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  fc.record(
    {
      type: fc.constant('string'),
      maxLength: fc.nat({ max: 200 }),
      description: fc.string({ maxLength: 10 }),
    },
    { requiredKeys: ['type'], noNullPrototype: true },
  ),
  fc.record(
    { type: fc.constantFrom('integer', 'number'), minimum: fc.integer({ min: -100, max: 0 }) },
    { requiredKeys: ['type'], noNullPrototype: true },
  ),
  fc.constant({ type: 'boolean' }),
  fc.constant({ type: 'array', items: { type: 'string' } }),
  fc
    .uniqueArray(fc.string({ maxLength: 8 }), { minLength: 1, maxLength: 4 })
    .map((values) => ({ enum: values })),
  fc.constant({ type: 'object', additionalProperties: { type: 'integer' } }),
);

/** An object schema with a few properties, some required. */
function arbObjectSchema(): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .dictionary(propertyKey, leafSchema, { maxKeys: 4, noNullPrototype: true })
    .chain((properties) =>
      fc
        .record(
          {
            required: fc.subarray(Object.keys(properties)),
            additionalProperties: fc.boolean(),
          },
          { requiredKeys: [], noNullPrototype: true },
        )
        .map((extra) => ({ type: 'object', properties, ...extra })),
    );
}

/** Options of {@link arbTool}. */
export interface ArbToolOptions {
  /** The name arbitrary. @default {@link arbToolName} */
  readonly name?: fc.Arbitrary<string>;
}

/**
 * Valid, small MCP tool definitions: a valid name, an object `inputSchema` with up to four typed
 * properties, and optionally a title, a description, an object `outputSchema` and annotations.
 * Every value passes `validateTool` with the default options.
 */
export function arbTool(options: ArbToolOptions = {}): fc.Arbitrary<McpToolDefinition> {
  return fc
    .record(
      {
        name: options.name ?? arbToolName(),
        title: fc.string({ maxLength: 20 }),
        description: fc.string({ maxLength: 60 }),
        inputSchema: arbObjectSchema(),
        outputSchema: arbObjectSchema(),
        annotations: fc.record(
          {
            readOnlyHint: fc.boolean(),
            destructiveHint: fc.boolean(),
            idempotentHint: fc.boolean(),
            openWorldHint: fc.boolean(),
          },
          { requiredKeys: [], noNullPrototype: true },
        ),
      },
      { requiredKeys: ['name', 'inputSchema'], noNullPrototype: true },
    )
    .map((tool) => tool as unknown as McpToolDefinition);
}

/** Options of {@link arbCatalog}. */
export interface ArbCatalogOptions {
  /** Fewest tools. @default 0 */
  readonly minTools?: number;
  /** Most tools. @default 500 */
  readonly maxTools?: number;
}

/**
 * Valid catalogs: arrays of {@link arbTool} with unique names. Sizes are spread on purpose: about
 * half the catalogs have at most 10 tools, the rest reach up to `maxTools`.
 */
export function arbCatalog(
  options: ArbCatalogOptions = {},
): fc.Arbitrary<readonly McpToolDefinition[]> {
  const minLength = options.minTools ?? 0;
  const maxTools = options.maxTools ?? 500;
  if (!Number.isInteger(minLength) || !Number.isInteger(maxTools) || minLength > maxTools) {
    throw new RangeError(`arbCatalog: need integers minTools <= maxTools`);
  }
  const unique = (maxLength: number, size: fc.SizeForArbitrary) =>
    fc.uniqueArray(arbTool(), {
      minLength,
      maxLength,
      size,
      selector: (tool) => tool.name,
    });
  const small = Math.max(minLength, Math.min(maxTools, 10));
  return fc.oneof(
    { weight: 1, arbitrary: unique(small, 'max') },
    { weight: 1, arbitrary: unique(maxTools, 'max') },
  );
}

/** Opaque cursors as servers issue them: `""`, short ASCII, any Unicode, long tokens. */
function arbCursor(): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant('') },
    { weight: 4, arbitrary: fc.string({ maxLength: 12 }) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }) },
    { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9+/=_-]{40,200}$/) },
  );
}

/** Pages of a catalog and the cursors that link them (see {@link arbPageSplit}). */
export interface PageSplit<T> {
  /** The pages, in order; concatenated they are the catalog. Empty pages included. */
  readonly pages: readonly (readonly T[])[];
  /** The `nextCursor` of every page but the last: unique strings, possibly including `""`. */
  readonly cursors: readonly string[];
}

/** Options of {@link arbPageSplit}. */
export interface ArbPageSplitOptions {
  /** Most pages. @default 40 */
  readonly maxPages?: number;
}

/**
 * Random page splits of `items`: page boundaries anywhere (so empty pages at the start, in the
 * middle and at the end), and unique cursors that often include the empty string. Concatenating
 * `pages` always gives `items` back, in order.
 */
export function arbPageSplit<T>(
  items: readonly T[],
  options: ArbPageSplitOptions = {},
): fc.Arbitrary<PageSplit<T>> {
  const maxPages = options.maxPages ?? 40;
  if (!Number.isInteger(maxPages) || maxPages < 1) {
    throw new RangeError('arbPageSplit: maxPages must be an integer >= 1');
  }
  const cut = fc.oneof(
    { weight: 1, arbitrary: fc.constantFrom(0, items.length) },
    { weight: 4, arbitrary: fc.integer({ min: 0, max: items.length }) },
  );
  return fc.array(cut, { maxLength: maxPages - 1 }).chain((cuts) => {
    const bounds = [...cuts].sort((a, b) => a - b);
    const pages: T[][] = [];
    let start = 0;
    for (const end of bounds) {
      pages.push(items.slice(start, end));
      start = end;
    }
    pages.push(items.slice(start));
    return fc
      .uniqueArray(arbCursor(), { minLength: bounds.length, maxLength: bounds.length })
      .map((cursors): PageSplit<T> => ({ pages, cursors }));
  });
}

/** A page graph whose last page sends back a cursor already issued (see {@link arbCursorCycle}). */
export interface CursorCycle {
  /** The pages in traversal order, with unique tool names across all of them. */
  readonly pages: readonly (readonly McpToolDefinition[])[];
  /**
   * The `nextCursor` of each page. All are distinct except the last, which repeats
   * `cursors[loopFrom]` and so leads back to page `loopFrom + 1`.
   */
  readonly cursors: readonly string[];
  /** Index of the cursor the last page repeats. */
  readonly loopFrom: number;
  /** Number of pages in the loop: `pages.length - 1 - loopFrom` (1 is an A→A self-loop). */
  readonly cycleLength: number;
}

/** Options of {@link arbCursorCycle}. */
export interface ArbCursorCycleOptions {
  /** Most pages in the whole graph (at least 2). @default 40 */
  readonly maxPages?: number;
  /** Most tools per page. @default 3 */
  readonly maxToolsPerPage?: number;
}

/**
 * Cursor cycles of every length: `n` pages (2 ≤ n ≤ `maxPages`) linked by distinct cursors, the
 * last of which answers with a cursor issued earlier: A→A self-loops, A→B→A, and long loops. Feed
 * `pages` and `cursors` to {@link pagedSource}; a repeated cursor leads where it first led.
 */
export function arbCursorCycle(options: ArbCursorCycleOptions = {}): fc.Arbitrary<CursorCycle> {
  const maxPages = options.maxPages ?? 40;
  const maxToolsPerPage = options.maxToolsPerPage ?? 3;
  if (!Number.isInteger(maxPages) || maxPages < 2) {
    throw new RangeError('arbCursorCycle: maxPages must be an integer >= 2');
  }
  return fc.integer({ min: 2, max: maxPages }).chain((n) =>
    fc
      .tuple(
        fc.integer({ min: 0, max: n - 2 }),
        fc.uniqueArray(arbCursor(), { minLength: n - 1, maxLength: n - 1 }),
        fc.array(fc.nat({ max: maxToolsPerPage }), { minLength: n, maxLength: n }),
      )
      .map(([loopFrom, distinct, counts]): CursorCycle => {
        const pages = counts.map((count, p) =>
          Array.from({ length: count }, (_, i): McpToolDefinition => ({
            name: `p${p}_t${i}`,
            inputSchema: { type: 'object' },
          })),
        );
        const cursors = [...distinct, distinct[loopFrom] as string];
        return { pages, cursors, loopFrom, cycleLength: n - 1 - loopFrom };
      }),
  );
}

/** Nesting `value` `depth` times with `wrap`, without recursion (depth can be in the thousands). */
function nest(depth: number, leaf: unknown, wrap: (inner: unknown) => unknown): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = wrap(value);
  return value;
}

const REMOTE_REFS = [
  'https://example.com/schema.json',
  'http://example.com/s#/$defs/d',
  'other.json',
  'other.json#/$defs/d',
  'urn:uuid:7c9e6679-7425-40de-944b-e07fc1f90ae7',
  '//host/path',
  'file:///etc/passwd',
  '../d',
  'd',
];
const UNRESOLVED_REFS = [
  '#/$defs/missing',
  '#/properties/nope',
  '#/$defs/d/properties/x',
  '#/definitions/d',
  '#no-such-anchor',
  '#/$defs/d~1x',
  '#/%',
  '#%ZZ',
  '#/~2',
  '#/$defs/d#x',
  '#//',
];
const RECURSIVE_REFS = ['#', '#/properties/p', '#/$defs/loop', '#/$defs/a'];
const NON_SCHEMA_REFS = [
  '#/required',
  '#/required/0',
  '#/type',
  '#/properties/p/$ref',
  '#/$defs/d/type',
  '#/$defs/e/enum/0',
  '#/description',
  '#/$defs',
  '#/properties',
  '#/$defs/e/enum',
  '#/',
];

/** A tool whose input or output schema carries one odd `$ref` (or a ref-like keyword). */
function arbOddRefTool(base: fc.Arbitrary<McpToolDefinition>): fc.Arbitrary<unknown> {
  const ref = fc.oneof(
    fc.constantFrom(...REMOTE_REFS),
    fc.constantFrom(...UNRESOLVED_REFS),
    fc.constantFrom(...RECURSIVE_REFS),
    fc.constantFrom(...NON_SCHEMA_REFS),
    fc.string({ maxLength: 10 }).map((s) => `#/${s}`),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const keyword = fc.constantFrom('$ref', '$ref', '$ref', '$dynamicRef', '$recursiveRef');
  const site = fc.constantFrom('property', 'root', 'allOf', 'defs');
  const extras = fc.record(
    {
      $id: fc.constantFrom('https://example.com/root', 'urn:root', '#frag', 'relative'),
      $anchor: fc.constantFrom('a', 'no-such-anchor', '1bad'),
      $schema: fc.constantFrom(
        'https://json-schema.org/draft/2020-12/schema',
        'http://json-schema.org/draft-07/schema#',
        'http://json-schema.org/draft-04/schema#',
      ),
    },
    { requiredKeys: [], noNullPrototype: true },
  );
  return fc
    .tuple(base, ref, keyword, site, extras, fc.constantFrom('inputSchema', 'outputSchema'))
    .map(([tool, target, kw, where, more, field]) => {
      const refNode = { [kw]: target };
      const schema: Record<string, unknown> = {
        type: 'object',
        description: 'odd ref',
        required: ['p'],
        properties: { p: where === 'property' ? refNode : { type: 'string' } },
        $defs: {
          d: { type: 'string' },
          e: { enum: ['x', { type: 'string' }] },
          loop: { $ref: '#/$defs/loop' },
          a: { $ref: '#/$defs/b' },
          b: { allOf: [{ $ref: '#/$defs/a' }] },
          ...(where === 'defs' ? { r: refNode } : {}),
        },
        ...more,
      };
      if (where === 'root') Object.assign(schema, refNode);
      if (where === 'allOf') schema['allOf'] = [refNode];
      return { ...tool, [field]: schema };
    });
}

const BAD_NAMES: readonly unknown[] = [
  42,
  null,
  true,
  [],
  {},
  '',
  ' ',
  'has space',
  'a/b',
  'ünïcode',
  'tab\tname',
  'x'.repeat(129),
  '__proto__',
  'constructor',
];
const BAD_SCHEMAS: readonly unknown[] = [
  null,
  [],
  'object',
  42,
  {},
  { type: 'string' },
  { type: ['object', 'null'] },
  { type: 'object', properties: [] },
  { type: 'object', properties: { a: 5 } },
  { type: 'object', required: 'a' },
  { type: 'object', additionalProperties: 'no' },
  { type: 'object', $schema: 'http://json-schema.org/draft-04/schema#' },
  { type: 'object', $schema: 42 },
  { type: 'object', $schema: 'https://json-schema.org/draft/2019-09/schema' },
  { type: 'object', properties: { a: { type: 'strin' } } },
  { type: 'object', properties: { a: { pattern: '([' } } },
  { type: 'object', patternProperties: { '([': {} } },
  { type: 'object', nullable: true },
  { type: 'object', $async: true },
  { type: 'object', minProperties: -1 },
  { type: 'object', properties: { a: true, b: false } },
  // An own "__proto__" member, as JSON.parse produces it (an object literal would set the prototype).
  JSON.parse('{"type":"object","__proto__":{"type":"string"}}') as unknown,
  JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}') as unknown,
];

/** A valid tool with one member replaced by a wrong type or a hostile value. */
function arbWrongTypeTool(base: fc.Arbitrary<McpToolDefinition>): fc.Arbitrary<unknown> {
  const replacement = fc.oneof(
    fc.record({ key: fc.constant('name'), value: fc.constantFrom(...BAD_NAMES) }),
    fc.record({
      key: fc.constantFrom('inputSchema', 'outputSchema'),
      value: fc.constantFrom(...BAD_SCHEMAS),
    }),
    fc.record({
      key: fc.constantFrom('description', 'title', 'annotations', '_meta', 'icons'),
      value: fc.jsonValue({ maxDepth: 3 }),
    }),
    fc.record({
      key: fc.constantFrom('name', 'inputSchema', 'outputSchema', 'annotations'),
      value: fc.jsonValue({ maxDepth: 3 }),
    }),
  );
  const drop = fc.constantFrom('name', 'inputSchema');
  return fc.oneof(
    {
      weight: 5,
      arbitrary: fc.tuple(base, replacement).map(([t, r]) => ({ ...t, [r.key]: r.value })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(base, drop).map(([t, key]) => {
        const copy: Record<string, unknown> = { ...t };
        delete copy[key];
        return copy;
      }),
    },
  );
}

/** A valid tool with a very large string somewhere (description, property name, enum, name). */
function arbHugeStringTool(base: fc.Arbitrary<McpToolDefinition>): fc.Arbitrary<unknown> {
  return fc
    .tuple(
      base,
      fc.integer({ min: 10_000, max: 150_000 }),
      fc.constantFrom('description', 'propertyName', 'enum', 'name', 'default', 'annotation'),
      fc.constantFrom('x', 'é', '😀', '\u0000'),
    )
    .map(([tool, length, where, unit]) => {
      const text = unit.repeat(Math.ceil(length / unit.length));
      switch (where) {
        case 'description':
          return { ...tool, description: text };
        case 'name':
          return { ...tool, name: text };
        case 'annotation':
          return { ...tool, annotations: { title: text } };
        case 'propertyName':
          return { ...tool, inputSchema: { type: 'object', properties: { [text]: {} } } };
        case 'enum':
          return { ...tool, inputSchema: { type: 'object', properties: { a: { enum: [text] } } } };
        case 'default':
          return { ...tool, inputSchema: { type: 'object', default: { a: text } } };
      }
    });
}

const NESTINGS = {
  properties: (inner: unknown) => ({ type: 'object', properties: { a: inner } }),
  allOf: (inner: unknown) => ({ allOf: [inner] }),
  not: (inner: unknown) => ({ not: inner }),
  items: (inner: unknown) => ({ type: 'array', items: inner }),
  anyOf: (inner: unknown) => ({ anyOf: [inner, { type: 'null' }] }),
  array: (inner: unknown) => [inner],
  object: (inner: unknown) => ({ x: inner }),
} as const;

/** A valid tool with a deeply nested value in a schema position or in plain data. */
function arbDeepTool(
  base: fc.Arbitrary<McpToolDefinition>,
  maxDepth: number,
): fc.Arbitrary<unknown> {
  return fc
    .tuple(
      base,
      fc.oneof(
        fc.integer({ min: 1, max: Math.min(300, maxDepth) }),
        fc.integer({ min: 1, max: maxDepth }),
      ),
      fc.constantFrom(...(Object.keys(NESTINGS) as (keyof typeof NESTINGS)[])),
      fc.constantFrom('inputSchema', 'outputSchema', 'default', 'annotations', '_meta'),
    )
    .map(([tool, depth, kind, where]) => {
      const deep = nest(depth, { type: 'string' }, NESTINGS[kind]);
      switch (where) {
        case 'inputSchema':
        case 'outputSchema':
          return {
            ...tool,
            [where]:
              kind === 'array' || kind === 'object'
                ? { type: 'object', const: deep }
                : { type: 'object', properties: { deep } },
          };
        case 'default':
          return { ...tool, inputSchema: { type: 'object', default: deep } };
        case 'annotations':
        case '_meta':
          return { ...tool, [where]: { deep } };
      }
    });
}

/** Options of {@link arbNearValidTool} and {@link arbListResult}. */
export interface ArbNearValidToolOptions {
  /** Deepest nesting generated (schema keywords or plain arrays/objects). @default 20000 */
  readonly maxDepth?: number;
}

/**
 * Near-valid tool definitions, each one step away from a valid {@link arbTool}: a member of the
 * wrong type or missing, a hostile name, a broken schema, a huge string (10k–150k characters), deep
 * nesting (up to `maxDepth` levels, in schema positions and in plain data), or an odd `$ref`
 * (remote, unresolved, `#` recursion, same-instance loops, `$ref`s to non-schema locations,
 * non-string refs, `$dynamicRef`/`$recursiveRef`, `$id` tricks). Some happen to be valid; the rest
 * must be refused with a typed error.
 */
export function arbNearValidTool(options: ArbNearValidToolOptions = {}): fc.Arbitrary<unknown> {
  const maxDepth = options.maxDepth ?? 20_000;
  if (!Number.isInteger(maxDepth) || maxDepth < 1) {
    throw new RangeError('arbNearValidTool: maxDepth must be an integer >= 1');
  }
  const base = arbTool();
  return fc.oneof(
    { weight: 4, arbitrary: arbWrongTypeTool(base) },
    { weight: 4, arbitrary: arbOddRefTool(base) },
    { weight: 1, arbitrary: arbHugeStringTool(base) },
    { weight: 2, arbitrary: arbDeepTool(base, maxDepth) },
  );
}

/**
 * Raw `tools/list` results as a hostile or broken server might send them: any JSON value
 * (`fc.jsonValue`), and result-like objects whose `tools` mix valid, near-valid and junk entries,
 * with odd `nextCursor`s (absent, `""`, long, non-strings) and odd revision `_meta`. `options` is
 * passed to {@link arbNearValidTool}.
 */
export function arbListResult(options: ArbNearValidToolOptions = {}): fc.Arbitrary<unknown> {
  const toolish = fc.oneof(
    { weight: 5, arbitrary: arbTool() },
    { weight: 3, arbitrary: arbNearValidTool(options) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  );
  const absent = fc.constant(undefined);
  const nextCursor = fc.oneof(
    { weight: 6, arbitrary: absent },
    { weight: 3, arbitrary: fc.string({ maxLength: 8 }) },
    { weight: 1, arbitrary: fc.integer({ min: 65_537, max: 70_000 }).map((n) => 'c'.repeat(n)) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }) },
  );
  const meta = fc.oneof(
    { weight: 6, arbitrary: absent },
    {
      weight: 3,
      arbitrary: fc.record({ [CATALOG_REVISION_META_KEY]: fc.string({ maxLength: 4 }) }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ [CATALOG_REVISION_META_KEY]: fc.jsonValue({ maxDepth: 1 }) }),
    },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  );
  const tools = fc.oneof(
    { weight: 8, arbitrary: fc.array(toolish, { maxLength: 6 }) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  );
  const resultLike = fc.tuple(tools, nextCursor, meta).map(([list, cursor, m]) => {
    const result: Record<string, unknown> = { tools: list };
    if (cursor !== undefined) result['nextCursor'] = cursor;
    if (m !== undefined) result['_meta'] = m;
    return result;
  });
  return fc.oneof({ weight: 1, arbitrary: fc.jsonValue() }, { weight: 6, arbitrary: resultLike });
}
