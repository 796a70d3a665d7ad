/**
 * Strict-schema conversion for OpenAI function tools (`strict: true`, Structured Outputs), and the
 * inverse mapping of the arguments a strict model sends back.
 *
 * The one rule: **every argument object a model can produce under the converted schema, after
 * {@link StrictSchema.restore}, is valid under the original schema**. Conversion may narrow what the
 * model may send (that is what strict mode is for) but never widens it, and never turns one meaning
 * into another. Where that cannot be guaranteed, the tool is not strict and the reason says why.
 *
 * @packageDocumentation
 */
import type { ObjectSchema } from '../validation.js';
import { needsRestore, restoreValue, type Plan } from './restore.js';

/** A JSON Schema object as the provider SDKs type it. */
export interface JsonSchemaObject {
  readonly type: 'object';
  readonly [keyword: string]: unknown;
}

/** A schema that converted: send it with `strict: true`, and restore the arguments that come back. */
export interface StrictSchema {
  readonly strict: true;
  /** The converted schema (fresh; frozen). */
  readonly schema: JsonSchemaObject;
  /**
   * Turns arguments produced under {@link schema} back into arguments for the original schema:
   * removes every `null` the conversion introduced for an optional property (at any depth). Returns
   * the input itself when the conversion introduced nothing to undo.
   */
  restore(this: void, args: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>>;
}

/** A schema that cannot be sent strict, and why (send it with `strict: false`). */
export interface NonStrictSchema {
  readonly strict: false;
  /** What prevents strict mode, e.g. `"minLength" is not supported in strict mode`. */
  readonly reason: string;
  /** JSON pointer of the schema node at fault, `""` for the root. */
  readonly path: string;
}

/** The result of {@link toStrictSchema}. */
export type StrictConversion = StrictSchema | NonStrictSchema;

/** Deepest object/array nesting strict mode accepts. */
export const STRICT_MAX_DEPTH = 10;
/** Most object properties strict mode accepts across one schema. */
export const STRICT_MAX_PROPERTIES = 5000;
/** Most enum values strict mode accepts across one schema. */
export const STRICT_MAX_ENUM_VALUES = 1000;

/** `format` values strict mode understands. */
const STRICT_FORMATS = new Set([
  'date-time',
  'time',
  'date',
  'duration',
  'email',
  'hostname',
  'ipv4',
  'ipv6',
  'uuid',
]);

/** Keywords that only annotate (kept, or folded into `description`), with no validation meaning. */
const ANNOTATIONS = new Set(['description', 'title']);
/** Annotations strict mode rejects; dropping them changes no validation outcome. */
const DROPPED_ANNOTATIONS = new Set([
  '$schema',
  '$comment',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
]);
const TYPE_KEYWORDS: Readonly<Record<string, ReadonlySet<string>>> = {
  string: new Set(['pattern', 'format']),
  number: new Set(['multipleOf', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']),
  integer: new Set(['multipleOf', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']),
  array: new Set(['items', 'minItems', 'maxItems']),
  object: new Set(['properties', 'required', 'additionalProperties']),
  boolean: new Set(),
  null: new Set(),
};
const STRUCTURAL = new Set(['type', 'enum', 'const', 'anyOf', '$ref', 'default']);
const JSON_TYPES = new Set(Object.keys(TYPE_KEYWORDS));

class NotStrict extends Error {
  constructor(
    readonly reason: string,
    readonly path: string,
  ) {
    super(reason);
  }
}

interface Context {
  properties: number;
  enumValues: number;
  /** Converted definitions by ref string (`#/$defs/X`), with their restore plans. */
  readonly defs: Map<
    string,
    { readonly raw: unknown; schema?: Record<string, unknown>; plan: Plan }
  >;
  readonly root: Readonly<Record<string, unknown>>;
  /** Refs used inside `anyOf` branches, with where: their definitions must need no restoring. */
  readonly refsInAnyOf: Map<string, string>;
}

const cache = new WeakMap<object, StrictConversion>();

/**
 * Converts an MCP input schema to the strict subset OpenAI accepts, or says why it cannot.
 * Results are cached per schema object (schemas in a snapshot are frozen and shared).
 *
 * Rules, applied to every schema node:
 * - Every object gets `additionalProperties: false` and lists all its properties in `required`.
 *   An optional property becomes required and nullable (`type: [T, "null"]`, `null` added to its
 *   `enum`, or `anyOf: [S, { type: "null" }]`); {@link StrictSchema.restore} removes those `null`s
 *   again. A property that already accepts `null` cannot also stand for "absent": not strict.
 * - An object that admits other properties explicitly (`additionalProperties: true` or a schema,
 *   i.e. a map) or has no `properties` below the root (free-form JSON) is not strict: closing it
 *   would leave the model no way to send what the tool expects. `required` names that are not
 *   declared properties are not strict.
 * - Supported keywords: `type` (one or a list), `properties`, `required`, `additionalProperties:
 *   false`, `items` (one schema), `enum`, `const`, `anyOf` (not at the root), local `$ref` into
 *   `$defs`/`definitions` (recursion allowed, no sibling keywords but annotations), `description`,
 *   `title`; strings `pattern` and `format` (`date-time`, `time`, `date`, `duration`, `email`,
 *   `hostname`, `ipv4`, `ipv6`, `uuid`); numbers `multipleOf`, `minimum`, `maximum`,
 *   `exclusiveMinimum`, `exclusiveMaximum`; arrays `minItems`, `maxItems`.
 * - Every other validation keyword (`allOf`, `oneOf`, `not`, `if`/`then`/`else`, `minLength`,
 *   `maxLength`, `uniqueItems`, `prefixItems`, `contains`, `patternProperties`, `propertyNames`,
 *   `minProperties`, `dependentRequired`, other formats, boolean sub-schemas, a node without a type
 *   ...) is not strict: dropping it would widen what the model may send.
 * - Pure annotations strict mode rejects (`$schema`, `$comment`, `examples`, `deprecated`,
 *   `readOnly`, `writeOnly`) and vendor extensions (`x-*`, e.g. SEP-2243's `x-mcp-header`) are
 *   dropped; `default` is folded into `description` as
 *   `Default: <json>.` so the model still learns it.
 * - Optional properties inside `anyOf` branches are not strict (which branch a `null` came from
 *   would be ambiguous). Limits: nesting deeper than {@link STRICT_MAX_DEPTH}, more than
 *   {@link STRICT_MAX_PROPERTIES} properties or {@link STRICT_MAX_ENUM_VALUES} enum values is not
 *   strict.
 */
export function toStrictSchema(schema: ObjectSchema): StrictConversion {
  const cached = cache.get(schema);
  if (cached !== undefined) return cached;
  const result = convertRoot(schema);
  cache.set(schema, result);
  return result;
}

function convertRoot(schema: ObjectSchema): StrictConversion {
  const root = schema as Readonly<Record<string, unknown>>;
  const ctx: Context = {
    properties: 0,
    enumValues: 0,
    defs: new Map(),
    root,
    refsInAnyOf: new Map(),
  };
  try {
    if ('anyOf' in root)
      throw new NotStrict('"anyOf" at the root is not supported in strict mode', '');
    const { schema: converted, plan } = convertNode(root, '', 0, ctx, {
      root: true,
      inAnyOf: false,
    });
    for (const key of ['$defs', 'definitions'] as const) {
      const defs = root[key];
      if (defs === undefined) continue;
      if (!isPlainObject(defs)) throw new NotStrict(`"${key}" must be an object`, `/${key}`);
      const out: Record<string, unknown> = {};
      for (const name of Object.keys(defs)) {
        const entry = ctx.defs.get(`#/${key}/${escapePointer(name)}`);
        // Definitions nothing refers to are dropped: they cannot affect validation.
        if (entry?.schema !== undefined) out[name] = entry.schema;
      }
      if (Object.keys(out).length > 0) converted[key] = out;
    }
    const plans = new Map<string, Plan>();
    for (const [ref, entry] of ctx.defs) plans.set(ref, entry.plan);
    for (const [ref, at] of ctx.refsInAnyOf) {
      if (needsRestore(plans.get(ref), plans, new Set())) {
        throw new NotStrict(`${ref} has optional properties and is used inside "anyOf"`, at);
      }
    }
    const frozen = deepFreeze(converted) as JsonSchemaObject;
    const restore = needsRestore(plan, plans, new Set())
      ? (args: Readonly<Record<string, unknown>>) =>
          restoreValue(args, plan, plans, 0) as Readonly<Record<string, unknown>>
      : (args: Readonly<Record<string, unknown>>) => args;
    return Object.freeze({ strict: true as const, schema: frozen, restore });
  } catch (error) {
    if (error instanceof NotStrict) {
      return Object.freeze({ strict: false as const, reason: error.reason, path: error.path });
    }
    throw error;
  }
}

interface NodeOptions {
  readonly root: boolean;
  readonly inAnyOf: boolean;
}

function convertNode(
  node: unknown,
  path: string,
  depth: number,
  ctx: Context,
  options: NodeOptions,
): { schema: Record<string, unknown>; plan: Plan } {
  if (!isPlainObject(node)) {
    throw new NotStrict('boolean or non-object sub-schemas are not supported in strict mode', path);
  }
  if (depth > STRICT_MAX_DEPTH) {
    throw new NotStrict(
      `nesting deeper than ${STRICT_MAX_DEPTH} levels is not supported in strict mode`,
      path,
    );
  }
  if ('$ref' in node) return convertRef(node, path, depth, ctx, options);

  const types = typesOf(node, path) ?? [];
  const out: Record<string, unknown> = {};
  let plan: Plan;
  for (const [key, value] of Object.entries(node)) {
    if (ANNOTATIONS.has(key)) {
      if (typeof value !== 'string')
        throw new NotStrict(`"${key}" must be a string`, `${path}/${key}`);
      out[key] = value;
      continue;
    }
    // Vendor extensions (`x-mcp-header`, `x-order`, ...) are unknown keywords, i.e. annotations in
    // JSON Schema 2020-12: dropping them from what the model sees changes no validation outcome.
    if (DROPPED_ANNOTATIONS.has(key) || key.startsWith('x-')) continue;
    if (key === '$defs' || key === 'definitions') {
      if (options.root) continue;
      throw new NotStrict(
        `"${key}" below the root is not supported in strict mode`,
        `${path}/${key}`,
      );
    }
    if (STRUCTURAL.has(key)) continue;
    if (!types.some((t) => TYPE_KEYWORDS[t]?.has(key) === true)) {
      throw new NotStrict(`"${key}" is not supported in strict mode`, `${path}/${key}`);
    }
  }
  if (typesOf(node, path) === undefined) {
    throw new NotStrict(
      'a schema without "type" (any value) is not supported in strict mode',
      path,
    );
  }
  if ('default' in node) {
    const text = `Default: ${JSON.stringify(node['default'])}.`;
    out['description'] =
      typeof out['description'] === 'string' ? `${out['description']} ${text}` : text;
  }
  if (node['type'] !== undefined) out['type'] = node['type'];
  if ('enum' in node) {
    const values = node['enum'];
    if (!Array.isArray(values)) throw new NotStrict('"enum" must be an array', `${path}/enum`);
    ctx.enumValues += values.length;
    if (ctx.enumValues > STRICT_MAX_ENUM_VALUES) {
      throw new NotStrict(
        `more than ${STRICT_MAX_ENUM_VALUES} enum values are not supported in strict mode`,
        `${path}/enum`,
      );
    }
    out['enum'] = values;
  }
  if ('const' in node) out['const'] = node['const'];
  if ('anyOf' in node) {
    const branches = node['anyOf'];
    if (!Array.isArray(branches) || branches.length === 0) {
      throw new NotStrict('"anyOf" must be a non-empty array', `${path}/anyOf`);
    }
    out['anyOf'] = branches.map(
      (branch, i) =>
        convertNode(branch, `${path}/anyOf/${i}`, depth + 1, ctx, { root: false, inAnyOf: true })
          .schema,
    );
  }
  if (types.includes('string') && typeof node['format'] === 'string') {
    if (!STRICT_FORMATS.has(node['format'])) {
      throw new NotStrict(
        `format "${node['format']}" is not supported in strict mode`,
        `${path}/format`,
      );
    }
  }
  for (const key of [
    'pattern',
    'format',
    'multipleOf',
    'minimum',
    'maximum',
    'exclusiveMinimum',
    'exclusiveMaximum',
    'minItems',
    'maxItems',
  ]) {
    if (key in node) out[key] = node[key];
  }
  if (types.includes('array')) {
    const items = node['items'];
    if (items === undefined) {
      if (types.length === 1)
        throw new NotStrict('an array without "items" is not supported in strict mode', path);
    } else {
      if (Array.isArray(items))
        throw new NotStrict('tuple "items" are not supported in strict mode', `${path}/items`);
      const converted = convertNode(items, `${path}/items`, depth + 1, ctx, {
        root: false,
        inAnyOf: options.inAnyOf,
      });
      out['items'] = converted.schema;
      if (converted.plan !== undefined) plan = { kind: 'array', items: converted.plan };
    }
  }
  if (types.includes('object')) {
    if (types.includes('array')) {
      throw new NotStrict(
        'a node that is both an object and an array is not supported in strict mode',
        path,
      );
    }
    plan = convertObject(node, out, path, depth, ctx, options);
  }
  return { schema: out, plan };
}

function convertObject(
  node: Readonly<Record<string, unknown>>,
  out: Record<string, unknown>,
  path: string,
  depth: number,
  ctx: Context,
  options: NodeOptions,
): Plan {
  const additional = node['additionalProperties'];
  if (additional !== undefined && additional !== false) {
    throw new NotStrict(
      'an object that admits other properties ("additionalProperties" is not false) is not supported in strict mode',
      `${path}/additionalProperties`,
    );
  }
  const properties = node['properties'];
  if (properties !== undefined && !isPlainObject(properties)) {
    throw new NotStrict('"properties" must be an object', `${path}/properties`);
  }
  const names = properties === undefined ? [] : Object.keys(properties);
  if (names.length === 0 && !options.root && additional !== false) {
    throw new NotStrict(
      'a free-form object (no "properties") is not supported in strict mode',
      path,
    );
  }
  const requiredRaw = node['required'] ?? [];
  if (
    !Array.isArray(requiredRaw) ||
    !requiredRaw.every((r): r is string => typeof r === 'string')
  ) {
    throw new NotStrict('"required" must be an array of strings', `${path}/required`);
  }
  const required = new Set(requiredRaw);
  for (const name of required) {
    if (!names.includes(name)) {
      throw new NotStrict(
        `required property "${name}" is not declared in "properties"`,
        `${path}/required`,
      );
    }
  }
  ctx.properties += names.length;
  if (ctx.properties > STRICT_MAX_PROPERTIES) {
    throw new NotStrict(
      `more than ${STRICT_MAX_PROPERTIES} properties are not supported in strict mode`,
      path,
    );
  }
  const props: Record<string, unknown> = {};
  const nulled = new Set<string>();
  const childPlans = new Map<string, Plan>();
  for (const name of names) {
    const propPath = `${path}/properties/${escapePointer(name)}`;
    const converted = convertNode(
      (properties as Record<string, unknown>)[name],
      propPath,
      depth + 1,
      ctx,
      {
        root: false,
        inAnyOf: options.inAnyOf,
      },
    );
    if (converted.plan !== undefined) childPlans.set(name, converted.plan);
    if (required.has(name)) {
      props[name] = converted.schema;
      continue;
    }
    if (options.inAnyOf) {
      throw new NotStrict(
        `optional property "${name}" inside "anyOf" is not supported in strict mode`,
        propPath,
      );
    }
    if (acceptsNull(converted.schema, ctx)) {
      throw new NotStrict(
        `optional property "${name}" already accepts null, so null cannot also mean "absent"`,
        propPath,
      );
    }
    props[name] = nullable(converted.schema);
    nulled.add(name);
  }
  out['type'] = node['type'];
  out['properties'] = props;
  out['required'] = names;
  out['additionalProperties'] = false;
  return nulled.size === 0 && childPlans.size === 0
    ? undefined
    : { kind: 'object', nulled, props: childPlans };
}

function convertRef(
  node: Readonly<Record<string, unknown>>,
  path: string,
  depth: number,
  ctx: Context,
  options: NodeOptions,
): { schema: Record<string, unknown>; plan: Plan } {
  const ref = node['$ref'];
  for (const key of Object.keys(node)) {
    if (key !== '$ref' && !ANNOTATIONS.has(key) && !DROPPED_ANNOTATIONS.has(key)) {
      throw new NotStrict(
        `"$ref" with sibling keyword "${key}" is not supported in strict mode`,
        `${path}/${key}`,
      );
    }
  }
  if (typeof ref !== 'string' || !/^#\/(\$defs|definitions)\/[^/]+$/.test(ref)) {
    throw new NotStrict(
      'only local "$ref"s into "$defs" or "definitions" are supported in strict mode',
      `${path}/$ref`,
    );
  }
  const out: Record<string, unknown> = { $ref: ref };
  for (const key of ANNOTATIONS) if (typeof node[key] === 'string') out[key] = node[key];
  if (options.inAnyOf) ctx.refsInAnyOf.set(ref, `${path}/$ref`);
  let entry = ctx.defs.get(ref);
  if (entry === undefined) {
    const [, container, name] = ref.split('/') as [string, string, string];
    const target = (ctx.root[container] as Record<string, unknown> | undefined)?.[
      unescapePointer(name)
    ];
    if (target === undefined) throw new NotStrict(`"$ref" ${ref} does not resolve`, `${path}/$ref`);
    entry = { raw: target, plan: undefined };
    ctx.defs.set(ref, entry);
    // Each definition is converted once, outside any anyOf (uses inside one are checked at the
    // end); a recursive ref reaches the entry while it is still being built.
    const converted = convertNode(target, ref.slice(1), depth, ctx, {
      root: false,
      inAnyOf: false,
    });
    entry.schema = converted.schema;
    entry.plan = converted.plan;
  }
  return { schema: out, plan: { kind: 'ref', target: ref } };
}

/** The node's JSON types; `[]` for a typeless `enum`/`const`/`anyOf`; `undefined` for "any value". */
function typesOf(
  node: Readonly<Record<string, unknown>>,
  path: string,
): readonly string[] | undefined {
  const type = node['type'];
  if (type === undefined) {
    return 'enum' in node || 'const' in node || 'anyOf' in node ? [] : undefined;
  }
  const list = Array.isArray(type) ? type : [type];
  for (const t of list) {
    if (typeof t !== 'string' || !JSON_TYPES.has(t)) {
      throw new NotStrict(`unknown type ${JSON.stringify(t)}`, `${path}/type`);
    }
  }
  return list as string[];
}

function acceptsNull(schema: Readonly<Record<string, unknown>>, ctx: Context): boolean {
  const type = schema['type'];
  if (type === 'null' || (Array.isArray(type) && type.includes('null'))) return true;
  if (Array.isArray(schema['enum']) && schema['enum'].includes(null)) return true;
  if ('const' in schema && schema['const'] === null) return true;
  if (Array.isArray(schema['anyOf'])) {
    return schema['anyOf'].some((b) => isPlainObject(b) && acceptsNull(b, ctx));
  }
  if (typeof schema['$ref'] === 'string') {
    const target = ctx.defs.get(schema['$ref']);
    if (target === undefined) return true;
    if (target.schema !== undefined) return acceptsNull(target.schema, ctx);
    // Still being built (recursion): only a plain non-null `type` proves it rejects null.
    const raw = target.raw as Record<string, unknown>;
    return !(
      typeof raw['type'] === 'string' &&
      raw['type'] !== 'null' &&
      !('enum' in raw) &&
      !('const' in raw) &&
      !('anyOf' in raw) &&
      !('$ref' in raw)
    );
  }
  return false;
}

/** Adds `null` to what `schema` accepts, in the form strict mode documents. */
function nullable(schema: Record<string, unknown>): Record<string, unknown> {
  if ('$ref' in schema || 'anyOf' in schema || 'const' in schema) {
    return { anyOf: [schema, { type: 'null' }] };
  }
  const out = { ...schema };
  const type = schema['type'];
  if (typeof type === 'string') out['type'] = [type, 'null'];
  else if (Array.isArray(type)) out['type'] = [...(type as unknown[]), 'null'];
  if (Array.isArray(schema['enum'])) out['enum'] = [...(schema['enum'] as unknown[]), null];
  return out;
}

function isPlainObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function escapePointer(part: string): string {
  if (!part.includes('~') && !part.includes('/')) return part;
  return part.replaceAll('~', '~0').replaceAll('/', '~1');
}

function unescapePointer(part: string): string {
  return part.replaceAll('~1', '/').replaceAll('~0', '~');
}

function deepFreeze(value: unknown): unknown {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
