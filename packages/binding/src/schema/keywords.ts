/**
 * The one vocabulary of schema positions and the structural rules both schema checks apply: the
 * full walk (`walk.ts`) and the plain-schema fast path (`plain.ts`) read the keyword sets and call
 * the rule functions here, so a rule is written once.
 *
 * @packageDocumentation
 */

/** Keywords whose value is one subschema. */
export const SCHEMA_VALUED: ReadonlySet<string> = new Set([
  'additionalProperties',
  'additionalItems',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
  'unevaluatedItems',
  'unevaluatedProperties',
  'contentSchema',
  'items',
]);

/** Keywords whose value is an array of subschemas (`items` in its draft-07 tuple form). */
export const SCHEMA_ARRAYS: ReadonlySet<string> = new Set([
  'allOf',
  'anyOf',
  'oneOf',
  'prefixItems',
  'items',
]);

/** Keywords whose value maps names to subschemas. */
export const SCHEMA_MAPS: ReadonlySet<string> = new Set([
  'properties',
  'patternProperties',
  '$defs',
  'definitions',
  'dependentSchemas',
  'dependencies',
]);

/** Keywords whose subschemas apply to the same instance: a cycle through them never terminates. */
export const IN_PLACE: ReadonlySet<string> = new Set([
  'allOf',
  'anyOf',
  'oneOf',
  'not',
  'if',
  'then',
  'else',
  'dependentSchemas',
  'dependencies',
]);

/** Keywords whose references only Ajv can resolve: such a schema is compiled to prove it. */
export const EAGER_KEYWORDS: readonly string[] = [
  '$dynamicRef',
  '$dynamicAnchor',
  '$recursiveRef',
  '$recursiveAnchor',
];

/** The seven JSON Schema type names. */
export const JSON_TYPES: ReadonlySet<unknown> = new Set([
  'array',
  'boolean',
  'integer',
  'null',
  'number',
  'object',
  'string',
]);

/** A plain-name anchor (`$id: "#name"` in draft-07). */
export const ANCHOR = /^[a-z_][-a-z0-9._]*$/i;

/**
 * True when a member named `name` of the map keyword `keyword` is one Ajv skips (it filters out
 * `__proto__` in these maps): such a schema is compiled from a rewritten copy (`own.ts`).
 */
export function isProtoSkipped(keyword: string, name: string): boolean {
  return name === '__proto__' && PROTO_SKIPPED.has(keyword);
}

const PROTO_SKIPPED = new Set(['properties', 'patternProperties', 'dependencies']);

/**
 * The problem with a schema regular expression (`pattern`, a `patternProperties` key), or
 * `undefined` when ECMAScript accepts it with the `u` flag, as Ajv compiles it.
 */
export function regexProblem(source: string): string | undefined {
  try {
    new RegExp(source, 'u');
    return undefined;
  } catch {
    return `has an invalid regular expression ${JSON.stringify(source)}`;
  }
}

/**
 * `members` as a set, each of which must belong to `of`: how the fast path names the subset of
 * schema positions it follows, so it can never follow a position the walk does not know.
 *
 * @throws Error at module load when a member is not in `of`.
 */
export function subsetOf(of: ReadonlySet<string>, members: readonly string[]): ReadonlySet<string> {
  for (const m of members) {
    if (!of.has(m)) throw new Error(`stepbind: ${m} is not a schema position of this kind`);
  }
  return new Set(members);
}
