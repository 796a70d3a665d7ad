/**
 * JSON Schema handling for tool schemas: dialect detection, a structural walk (local references,
 * regular expressions, the few keyword combinations Ajv refuses to compile), meta-schema validation
 * and a validator cache keyed by schema digest.
 *
 * @packageDocumentation
 */
import { Ajv, MissingRefError } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { PatternRefusedError, planPattern, re2Engine, withRegexBudget } from './regex.js';

/** The JSON Schema dialects stepbind can validate: 2020-12 (the MCP default) and draft-07. */
export type SchemaDialect = '2020-12' | 'draft-07';

/** Canonical `$schema` URI of each supported dialect. */
export const SCHEMA_DIALECT_URIS: Readonly<Record<SchemaDialect, string>> = Object.freeze({
  '2020-12': 'https://json-schema.org/draft/2020-12/schema',
  'draft-07': 'http://json-schema.org/draft-07/schema#',
});

/** Both supported dialects, the default allowlist. */
export const DEFAULT_SCHEMA_DIALECTS: readonly SchemaDialect[] = Object.freeze([
  '2020-12',
  'draft-07',
]);

/**
 * The dialect a `$schema` value names, or `undefined` when it names none stepbind supports.
 * An absent `$schema` (`undefined`) means 2020-12. `http`/`https` and a trailing empty fragment
 * (`#`) are accepted for both dialects.
 */
export function dialectOf(schemaUri: unknown): SchemaDialect | undefined {
  if (schemaUri === undefined) return '2020-12';
  if (typeof schemaUri !== 'string') return undefined;
  const bare = schemaUri.replace(/^https?:\/\//, '').replace(/#$/, '');
  if (bare === 'json-schema.org/draft/2020-12/schema') return '2020-12';
  if (bare === 'json-schema.org/draft-07/schema') return 'draft-07';
  return undefined;
}

/** Outcome of validating one value against a tool schema. `errors` is Ajv's text, for humans. */
export type ValidationResult =
  { readonly ok: true } | { readonly ok: false; readonly errors: string };

/**
 * A validator for one schema. Compiles on the first {@link SchemaValidator.validate} call unless the
 * schema was compiled during catalog validation; every schema that reaches a validator has already
 * passed the checks that make compilation succeed.
 */
export interface SchemaValidator {
  /** `sha256:` digest of the schema's canonical JSON; the cache key. */
  readonly digest: string;
  /** The dialect the schema is validated under. */
  readonly dialect: SchemaDialect;
  /** True once the schema has been compiled. */
  readonly compiled: boolean;
  /** Validate a value (tool arguments or `structuredContent`). Never throws for a checked schema. */
  validate(value: unknown): ValidationResult;
}

/** Counters for tests and benchmarks. */
export interface SchemaCacheStats {
  /** Distinct schemas (by digest) that passed the checks. */
  readonly schemas: number;
  /** Ajv compilations performed. Identical schemas compile once. */
  readonly compiles: number;
  /**
   * Meta-schema validations performed (by Ajv, or by the fast path for plain schemas). Identical
   * schemas are validated once.
   */
  readonly metaValidations: number;
  /** Checks answered from the cache. */
  readonly hits: number;
}

/**
 * @internal A pattern of a checked schema that stepbind does not enforce (see `planPattern`):
 * where it is, relative to the schema root, and why.
 */
export interface UnenforcedSchemaPattern {
  /** JSON pointer segments to the `pattern` keyword, or to the `patternProperties` key. */
  readonly path: readonly string[];
  readonly pattern: string;
  readonly reason: string;
}

const NO_PATTERNS: readonly UnenforcedSchemaPattern[] = Object.freeze([]);

/** A failed schema check: what went wrong and where, relative to the schema root. */
export interface SchemaProblem {
  readonly code: 'REMOTE_REF' | 'UNRESOLVED_REF' | 'SCHEMA_INVALID';
  /** JSON pointer segments from the schema root to the offending keyword. */
  readonly path: readonly string[];
  readonly message: string;
  readonly ref?: string;
  readonly cause?: unknown;
}

interface Entry {
  readonly digest: string;
  readonly dialect: SchemaDialect;
  readonly schema: object;
  /**
   * What Ajv compiles: `schema`, or a copy rewritten where Ajv ignores own properties named
   * `__proto__` (see {@link ownPropertySafe}).
   */
  readonly compiled: object;
  /** Schemas with `$id`s compile in a private Ajv instance so ids never clash across schemas. */
  readonly isolated: boolean;
  readonly unenforced: readonly UnenforcedSchemaPattern[];
  fn: ValidateFunction | undefined;
  handle: SchemaValidator | undefined;
}

/**
 * Every Ajv instance of stepbind. `ownProperties`: `required`, `properties`, `dependentRequired`...
 * and the property loops judge own properties only. `code.regExp`: patterns run on RE2
 * (`regex.ts`), never on `RegExp`. `code.process`: evaluated-property sets without a prototype.
 * `strict: false` also keeps Ajv from testing `patternProperties` against `properties` names
 * with `RegExp` at compile time. Formats are not validated at all.
 */
const AJV_OPTIONS = {
  strict: false,
  validateSchema: false,
  validateFormats: false,
  allErrors: false,
  logger: false,
  ownProperties: true,
  code: { regExp: re2Engine, process: nullPrototypeEvaluated },
} as const;

/**
 * Ajv tracks the properties an `unevaluatedProperties` keyword has seen in `{}` objects: a data
 * property named `constructor`, `toString` or `__proto__` then reads as seen (it is on
 * `Object.prototype`), and `props["__proto__"] = true` sets nothing. This rewrites the two forms
 * that create those sets (`propsN = {}` and `propsN = propsN || {}`) to `Object.create(null)`,
 * outside string literals (the only place schema text appears in generated code).
 */
function nullPrototypeEvaluated(code: string): string {
  return code.replace(EVALUATED_SET, (match: string, name?: string, fallback?: string) =>
    name === undefined ? match : `${name} = ${fallback ?? ''}Object.create(null)`,
  );
}

const EVALUATED_SET = /"(?:[^"\\]|\\.)*"|(?<![.$\w])(props\d+) = (\1 \|\| )?\{\}/g;

/**
 * Compiled validators and check results, cached by schema digest: identical schemas are checked
 * and compiled once, across tools, pages and refreshes that share the cache. The cache grows with
 * the number of distinct schemas seen; use one per runtime.
 */
export class SchemaValidatorCache {
  #entries = new Map<string, Entry>();
  #ajv2020: Ajv2020 | undefined;
  #ajv07: Ajv | undefined;
  #compiles = 0;
  #metaValidations = 0;
  #hits = 0;

  /** Counters: distinct schemas, compilations, meta-schema validations, cache hits. */
  stats(): SchemaCacheStats {
    return {
      schemas: this.#entries.size,
      compiles: this.#compiles,
      metaValidations: this.#metaValidations,
      hits: this.#hits,
    };
  }

  /** True when a schema with this digest has passed the checks. */
  has(digest: string): boolean {
    return this.#entries.has(digest);
  }

  /**
   * Check a schema (structural walk, meta-schema, and compilation when `compile` is `'eager'` or the
   * schema uses features whose references only Ajv can resolve: nested `$id`, `$dynamicRef`,
   * `$recursiveRef`, nested `$schema`, or a reference into a non-schema location). Results are
   * cached by `digest`; a failure is returned, not cached. Plain schemas (the common shape of tool
   * schemas: no references, ids or anchors, only well-known keywords with well-formed values) are
   * proven valid by one fast walk instead of the structural walk plus Ajv's meta-schema; anything
   * else, including every invalid schema, takes the full path and gets its exact problem.
   *
   * @returns `undefined` when the schema is usable, else the problem.
   */
  check(
    schema: object,
    digest: string,
    dialect: SchemaDialect,
    compile: 'lazy' | 'eager',
  ): SchemaProblem | undefined {
    const known = this.#entries.get(digest);
    if (known !== undefined) {
      this.#hits++;
      if (compile === 'eager' && known.fn === undefined) return this.#compileEntry(known);
      return undefined;
    }
    let isolated = false;
    let needsCompile = false;
    let unenforced = NO_PATTERNS;
    let compiled = schema;
    if (isPlainSchema(schema, dialect, true, 0)) {
      // Proven valid without Ajv: the common shape of tool schemas (see isPlainSchema).
      this.#metaValidations++;
    } else {
      const walked = inspectSchema(schema, dialect);
      if (!walked.ok) return walked.problem;
      this.#metaValidations++;
      const meta = metaValidator(dialect);
      if (meta(schema) !== true) {
        return {
          code: 'SCHEMA_INVALID',
          path: pointerSegments(meta.errors?.[0]?.instancePath ?? ''),
          message: `does not match the JSON Schema ${dialect} meta-schema: ${errorsText(meta.errors)}`,
        };
      }
      isolated = walked.hasIds;
      if (walked.unenforced.length > 0) unenforced = Object.freeze(walked.unenforced);
      if (walked.protoKeys) compiled = ownPropertySafe(schema, dialect);
      // Outside the proven plain shape, a meta-valid schema can still fail to compile (Ajv refuses
      // an empty `enum`, for one): compile now, so such a catalog is never published.
      needsCompile = true;
    }
    const entry: Entry = {
      digest,
      dialect,
      schema,
      compiled,
      isolated,
      unenforced,
      fn: undefined,
      handle: undefined,
    };
    if (compile === 'eager' || needsCompile) {
      const problem = this.#compileEntry(entry);
      if (problem !== undefined) return problem;
    }
    this.#entries.set(digest, entry);
    return undefined;
  }

  /**
   * The validator for a checked schema. It compiles lazily, on its first `validate` call.
   *
   * @throws Error when no schema with this digest passed {@link SchemaValidatorCache.check}.
   */
  getValidator(digest: string): SchemaValidator {
    const entry = this.#entries.get(digest);
    if (entry === undefined) throw new Error(`stepbind: no checked schema with digest ${digest}`);
    if (entry.handle !== undefined) return entry.handle;
    const handle = new LazyValidator(entry, (e) => this.#ensureCompiled(e));
    entry.handle = handle;
    return handle;
  }

  /**
   * @internal The patterns of a checked schema that stepbind does not enforce (usually none).
   *
   * @throws Error when no schema with this digest passed {@link SchemaValidatorCache.check}.
   */
  unenforcedPatterns(digest: string): readonly UnenforcedSchemaPattern[] {
    const entry = this.#entries.get(digest);
    if (entry === undefined) throw new Error(`stepbind: no checked schema with digest ${digest}`);
    return entry.unenforced;
  }

  #ensureCompiled(entry: Entry): ValidateFunction {
    if (entry.fn !== undefined) return entry.fn;
    const problem = this.#compileEntry(entry);
    if (problem !== undefined || entry.fn === undefined) {
      // Unreachable for schemas that passed check(); kept loud rather than silently permissive.
      throw new Error(`stepbind: schema ${entry.digest} failed to compile: ${problem?.message}`, {
        cause: problem?.cause,
      });
    }
    return entry.fn;
  }

  #compileEntry(entry: Entry): SchemaProblem | undefined {
    this.#compiles++;
    try {
      const ajv = entry.isolated ? createInstance(entry.dialect) : this.#instance(entry.dialect);
      entry.fn = ajv.compile(entry.compiled);
      return undefined;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof MissingRefError) {
        return {
          code: 'UNRESOLVED_REF',
          path: [],
          message: `has a $ref that does not resolve: ${message}`,
          ref: error.missingRef,
          cause: error,
        };
      }
      return {
        code: 'SCHEMA_INVALID',
        path: [],
        message: `cannot be compiled: ${message}`,
        cause: error,
      };
    }
  }

  #instance(dialect: SchemaDialect): Ajv | Ajv2020 {
    if (dialect === '2020-12') {
      this.#ajv2020 ??= configure(new Ajv2020(AJV_OPTIONS));
      return this.#ajv2020;
    }
    this.#ajv07 ??= configure(new Ajv(AJV_OPTIONS));
    return this.#ajv07;
  }
}

/**
 * Meta-schema validators, shared by every cache of the process: they hold no user schema (so
 * sharing leaks nothing), and compiling the 2020-12 meta-schema costs tens of milliseconds.
 */
const metaInstances: { '2020-12'?: Ajv | Ajv2020; 'draft-07'?: Ajv | Ajv2020 } = {};

function metaInstance(dialect: SchemaDialect): Ajv | Ajv2020 {
  return (metaInstances[dialect] ??= createInstance(dialect));
}

function metaValidator(dialect: SchemaDialect): ValidateFunction {
  const id =
    dialect === '2020-12'
      ? SCHEMA_DIALECT_URIS['2020-12']
      : 'http://json-schema.org/draft-07/schema';
  const fn = metaInstance(dialect).getSchema(id);
  if (fn === undefined) throw new Error(`stepbind: Ajv has no meta-schema ${id}`);
  return fn;
}

/**
 * @internal Ajv errors as text: each error's instance path (`(root)` for the value itself) and message,
 * `; `-separated, for example `(root) must have required property 'a'` or `/b/0 must be string`.
 */
export function errorsText(errors: ErrorObject[] | null | undefined): string {
  if (errors === null || errors === undefined || errors.length === 0) return 'invalid';
  let out = '';
  for (const e of errors) {
    if (out !== '') out += '; ';
    out += `${e.instancePath === '' ? '(root)' : e.instancePath} ${e.message ?? 'is invalid'}`;
  }
  return out;
}

function createInstance(dialect: SchemaDialect): Ajv | Ajv2020 {
  return dialect === '2020-12'
    ? configure(new Ajv2020(AJV_OPTIONS))
    : configure(new Ajv(AJV_OPTIONS));
}

/** Ajv refuses to compile the legacy `id` keyword; JSON Schema says unknown keywords are ignored. */
function configure<T extends Ajv | Ajv2020>(ajv: T): T {
  ajv.removeKeyword('id');
  ajv.addKeyword({ keyword: 'id' });
  return ajv;
}

class LazyValidator implements SchemaValidator {
  readonly #entry: Entry;
  readonly #compile: (entry: Entry) => ValidateFunction;

  constructor(entry: Entry, compile: (entry: Entry) => ValidateFunction) {
    this.#entry = entry;
    this.#compile = compile;
  }

  get digest(): string {
    return this.#entry.digest;
  }

  get dialect(): SchemaDialect {
    return this.#entry.dialect;
  }

  get compiled(): boolean {
    return this.#entry.fn !== undefined;
  }

  validate(value: unknown): ValidationResult {
    const fn = this.#entry.fn ?? this.#compile(this.#entry);
    let valid: boolean;
    try {
      valid = withRegexBudget(() => fn(value) === true);
    } catch (error) {
      // Patterns that would cost more than the regex budget refuse the value (see regex.ts).
      if (error instanceof PatternRefusedError) return { ok: false, errors: error.message };
      // Only a value nested deeper than the stack allows gets here; refuse it rather than crash.
      if (error instanceof RangeError) {
        return { ok: false, errors: 'value is nested too deeply to validate' };
      }
      throw error;
    }
    if (valid) return OK;
    return { ok: false, errors: errorsText(fn.errors) };
  }
}

const OK: ValidationResult = Object.freeze({ ok: true });

// ---------------------------------------------------------------------------------------------
// Fast path for plain schemas

const SIMPLE_TYPES: ReadonlySet<unknown> = new Set([
  'array',
  'boolean',
  'integer',
  'null',
  'number',
  'object',
  'string',
]);

/** Deepest nesting the fast path follows; deeper schemas take the full path. */
const PLAIN_MAX_DEPTH = 64;

/**
 * @internal True only when `node` certainly passes both the structural walk (no `$ref`, `$id`,
 * anchors, nested `$schema`, `$async` or `nullable`; every `pattern` compiles as a `u` regular
 * expression and is enforced on RE2; no property named `__proto__`) and the meta-schema of `dialect`, so Ajv's meta-validation can be skipped. The
 * keyword set is a whitelist whose value rules are those of the 2020-12 and draft-07 meta-schemas,
 * taking the stricter rule where they differ (draft-07 `enum` must be non-empty with unique items).
 * Anything else (another keyword, an unusual value, deep nesting) returns false and takes the full
 * path, which then reports the exact problem. A property test checks this against Ajv.
 */
export function isPlainSchema(
  node: unknown,
  dialect: SchemaDialect,
  isRoot: boolean,
  depth: number,
): boolean {
  if (typeof node === 'boolean') return !isRoot;
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return false;
  if (depth > PLAIN_MAX_DEPTH) return false;
  const s = node as Record<string, unknown>;
  for (const key of Object.keys(s)) {
    const v = s[key];
    switch (key) {
      case 'type':
        if (!isTypeKeyword(v)) return false;
        break;
      case 'properties':
        if (!isSchemaMap(v, dialect, depth)) return false;
        break;
      case 'required':
        if (!isUniqueStrings(v)) return false;
        break;
      case 'title':
      case 'description':
      case '$comment':
      case 'format':
      case 'contentMediaType':
      case 'contentEncoding':
        if (typeof v !== 'string') return false;
        break;
      case 'default':
      case 'const':
        if (v === undefined) return false;
        break;
      case 'examples':
        if (!Array.isArray(v)) return false;
        break;
      case 'enum':
        // Ajv refuses to compile an empty enum in every dialect.
        if (!Array.isArray(v) || v.length === 0) return false;
        if (dialect === 'draft-07' && !isUniquePrimitives(v)) return false;
        break;
      case 'minimum':
      case 'maximum':
      case 'exclusiveMinimum':
      case 'exclusiveMaximum':
        if (typeof v !== 'number' || !Number.isFinite(v)) return false;
        break;
      case 'multipleOf':
        if (typeof v !== 'number' || !Number.isFinite(v) || !(v > 0)) return false;
        break;
      case 'minLength':
      case 'maxLength':
      case 'minItems':
      case 'maxItems':
      case 'minProperties':
      case 'maxProperties':
        if (!Number.isSafeInteger(v) || (v as number) < 0) return false;
        break;
      case 'uniqueItems':
      case 'readOnly':
      case 'writeOnly':
      case 'deprecated':
        if (typeof v !== 'boolean') return false;
        break;
      case 'pattern':
        // An unenforced pattern takes the full path, which records where it is.
        if (typeof v !== 'string' || !compilesAsUnicode(v) || !planPattern(v).enforced) {
          return false;
        }
        break;
      case 'items':
      case 'additionalProperties':
      case 'propertyNames':
      case 'contains':
      case 'not':
      case 'if':
      case 'then':
      case 'else':
        if (!isPlainSchema(v, dialect, false, depth + 1)) return false;
        break;
      case 'allOf':
      case 'anyOf':
      case 'oneOf':
        if (!isSchemaArray(v, dialect, depth)) return false;
        break;
      case '$schema':
        // The root's $schema already named this dialect (dialectOf); a nested one needs Ajv.
        if (!isRoot || typeof v !== 'string') return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

function isTypeKeyword(v: unknown): boolean {
  if (typeof v === 'string') return SIMPLE_TYPES.has(v);
  if (!Array.isArray(v) || v.length === 0) return false;
  for (let i = 0; i < v.length; i++) {
    if (!SIMPLE_TYPES.has(v[i])) return false;
    for (let j = 0; j < i; j++) if (v[j] === v[i]) return false;
  }
  return true;
}

function isSchemaMap(v: unknown, dialect: SchemaDialect, depth: number): boolean {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const map = v as Record<string, unknown>;
  for (const key of Object.keys(map)) {
    // Ajv ignores a property named __proto__: the full path rewrites the schema for it.
    if (key === '__proto__' || !isPlainSchema(map[key], dialect, false, depth + 1)) return false;
  }
  return true;
}

function isSchemaArray(v: unknown, dialect: SchemaDialect, depth: number): boolean {
  if (!Array.isArray(v) || v.length === 0) return false;
  for (let i = 0; i < v.length; i++) {
    if (!isPlainSchema(v[i], dialect, false, depth + 1)) return false;
  }
  return true;
}

function isUniqueStrings(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false;
  return v.length < 2 || new Set(v).size === v.length;
}

/** Non-empty, and every item a string, finite number, boolean or null, no two equal. */
function isUniquePrimitives(v: readonly unknown[]): boolean {
  if (v.length === 0) return false;
  for (let i = 0; i < v.length; i++) {
    const item = v[i];
    if (
      item !== null &&
      typeof item !== 'string' &&
      typeof item !== 'boolean' &&
      !(typeof item === 'number' && Number.isFinite(item))
    ) {
      return false;
    }
  }
  return v.length < 2 || new Set(v).size === v.length;
}

function compilesAsUnicode(source: string): boolean {
  try {
    new RegExp(source, 'u');
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Structural walk

const SCHEMA_VALUED = new Set([
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
const SCHEMA_ARRAYS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items']);
const SCHEMA_MAPS = new Set([
  'properties',
  'patternProperties',
  '$defs',
  'definitions',
  'dependentSchemas',
  'dependencies',
]);
const EAGER_KEYWORDS = ['$dynamicRef', '$dynamicAnchor', '$recursiveRef', '$recursiveAnchor'];
const ANCHOR = /^[a-z_][-a-z0-9._]*$/i;
const JSON_TYPES = new Set(['array', 'boolean', 'integer', 'null', 'number', 'object', 'string']);

interface PendingRef {
  readonly ref: string;
  readonly site: object;
  readonly resource: object;
  readonly path: readonly string[];
}

/** Keywords whose subschemas apply to the same instance: a cycle through them never terminates. */
const IN_PLACE = new Set([
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

/** @internal */
export type WalkResult =
  | {
      readonly ok: true;
      readonly needsCompile: boolean;
      readonly hasIds: boolean;
      /** Patterns RE2 cannot run, in walk order. */
      readonly unenforced: UnenforcedSchemaPattern[];
      /** True when a property map has an own `__proto__` key that Ajv would skip. */
      readonly protoKeys: boolean;
    }
  | { readonly ok: false; readonly problem: SchemaProblem };

class Fail extends Error {
  constructor(readonly problem: SchemaProblem) {
    super(problem.message);
  }
}

/**
 * @internal Walk every subschema in a schema position: reject remote and unresolvable `$ref`s,
 * invalid regular expressions and the `nullable`/`$async` forms Ajv cannot compile; report whether
 * the schema needs eager compilation to prove its references, which patterns RE2 cannot run, and
 * whether a property map has a `__proto__` key. A `$ref` target outside every schema position is
 * walked too, since Ajv compiles it as a schema.
 */
export function inspectSchema(root: object, dialect: SchemaDialect): WalkResult {
  const anchors = new Map<object, Map<string, unknown>>();
  const schemaNodes = new Set<object>();
  const pending: PendingRef[] = [];
  const path: string[] = [];
  // Schema nodes on the way from the root to the node being visited, and every node that is an
  // ancestor of some $ref: a $ref into one of those is recursive, which only Ajv can prove.
  const stack: object[] = [];
  const refAncestors = new Set<object>();
  let needsCompile = false;
  let hasIds = false;
  let protoKeys = false;
  const unenforced: UnenforcedSchemaPattern[] = [];

  const notePattern = (source: string): void => {
    const plan = planPattern(source);
    if (!plan.enforced) unenforced.push({ path: [...path], pattern: source, reason: plan.reason });
  };

  const fail = (code: SchemaProblem['code'], message: string, ref?: string): never => {
    throw new Fail({ code, path: [...path], message, ...(ref === undefined ? {} : { ref }) });
  };

  // Edges between schemas that apply to the same instance (in-place applicators and $ref).
  const edges = new Map<object, object[]>();
  const addEdge = (from: object, to: object): void => {
    const list = edges.get(from);
    if (list === undefined) edges.set(from, [to]);
    else list.push(to);
  };

  const visit = (node: unknown, resource: object, isRoot: boolean, inPlaceFrom?: object): void => {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return;
    if (inPlaceFrom !== undefined) addEdge(inPlaceFrom, node);
    if (schemaNodes.has(node)) return;
    schemaNodes.add(node);
    const s = node as Record<string, unknown>;
    let scope = resource;
    if (s.$id !== undefined) {
      hasIds = true;
      if (!isRoot) needsCompile = true;
      if (typeof s.$id === 'string' && s.$id.startsWith('#')) {
        const name = s.$id.slice(1);
        path.push('$id');
        if (!ANCHOR.test(name)) fail('SCHEMA_INVALID', `has an invalid anchor "${s.$id}"`);
        path.pop();
        anchorsOf(anchors, resource).set(name, node);
      } else if (!isRoot) {
        scope = node;
      }
    }
    if (!isRoot && s.$schema !== undefined) needsCompile = true;
    for (const keyword of EAGER_KEYWORDS) {
      if (s[keyword] !== undefined) needsCompile = true;
    }
    if (typeof s.$anchor === 'string') anchorsOf(anchors, scope).set(s.$anchor, node);
    if (typeof s.$dynamicAnchor === 'string') anchorsOf(anchors, scope).set(s.$dynamicAnchor, node);
    for (const keyword of ['$ref', '$dynamicRef', '$recursiveRef']) {
      const ref = s[keyword];
      if (typeof ref !== 'string') continue;
      path.push(keyword);
      if (!ref.startsWith('#')) {
        fail(
          'REMOTE_REF',
          `has a non-local $ref "${ref}"; only references inside the schema ("#...") are allowed`,
          ref,
        );
      }
      if (keyword === '$ref') {
        pending.push({ ref, site: node, resource: scope, path: [...path] });
        refAncestors.add(node);
        for (const ancestor of stack) refAncestors.add(ancestor);
      }
      path.pop();
    }
    if (s.$async !== undefined) {
      path.push('$async');
      fail('SCHEMA_INVALID', 'uses $async, which tool schemas cannot use');
    }
    checkNullable(s, path, fail);
    if (typeof s.pattern === 'string') {
      path.push('pattern');
      checkRegExp(s.pattern, fail);
      notePattern(s.pattern);
      path.pop();
    }
    stack.push(node);
    for (const key of Object.keys(s)) {
      const value = s[key];
      if (typeof value !== 'object' || value === null) continue;
      const from = IN_PLACE.has(key) ? node : undefined;
      path.push(key);
      if (Array.isArray(value)) {
        if (SCHEMA_ARRAYS.has(key)) {
          for (let i = 0; i < value.length; i++) {
            path.push(String(i));
            visit(value[i], scope, false, from);
            path.pop();
          }
        }
      } else if (SCHEMA_MAPS.has(key)) {
        if (key === '$defs' && dialect === 'draft-07') needsCompile = true;
        for (const member of Object.keys(value)) {
          path.push(member);
          if (member === '__proto__' && PROTO_SKIPPED.has(key)) protoKeys = true;
          if (key === 'patternProperties') {
            checkRegExp(member, fail);
            notePattern(member);
          }
          visit((value as Record<string, unknown>)[member], scope, false, from);
          path.pop();
        }
      } else if (SCHEMA_VALUED.has(key)) {
        visit(value, scope, false, from);
      }
      path.pop();
    }
    stack.pop();
  };

  try {
    visit(root, root, true);
    // Visiting an outside target can add references: the loop sees them as they are pushed.
    for (const { ref, site, resource, path: refPath } of pending) {
      const target = resolveLocal(ref, resource, anchors);
      if (target === NOT_FOUND) {
        path.length = 0;
        path.push(...refPath);
        fail('UNRESOLVED_REF', `has a $ref "${ref}" that points to nothing in the schema`, ref);
      }
      if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
        // A target outside any schema position was not meta-validated, and a recursive target
        // can loop forever in Ajv: let Ajv prove both.
        if (!schemaNodes.has(target) || refAncestors.has(target)) needsCompile = true;
        addEdge(site, target);
        if (!schemaNodes.has(target)) {
          // Ajv compiles it as a schema: walk it for its patterns (and the other checks), at its
          // own pointer when it is one into the root resource.
          path.length = 0;
          path.push(...(resource === root ? (refPointer(ref) ?? refPath) : refPath));
          visit(target, resource, false);
        }
      } else if (typeof target !== 'boolean') {
        path.length = 0;
        path.push(...refPath);
        fail('UNRESOLVED_REF', `has a $ref "${ref}" that does not point to a schema`, ref);
      }
    }
    if (pending.length > 0) {
      const cycle = findCycle(edges);
      if (cycle !== undefined) {
        const at = pending.find((p) => cycle.has(p.site));
        path.length = 0;
        path.push(...(at?.path ?? []));
        fail(
          'SCHEMA_INVALID',
          `has a $ref cycle that applies to the same value forever${at === undefined ? '' : ` ("${at.ref}")`}`,
          at?.ref,
        );
      }
    }
  } catch (error) {
    if (error instanceof Fail) return { ok: false, problem: error.problem };
    throw error;
  }
  return { ok: true, needsCompile, hasIds, unenforced, protoKeys };
}

/** Property maps in which Ajv skips a member named `__proto__` (it filters that name out). */
const PROTO_SKIPPED = new Set(['properties', 'patternProperties', 'dependencies']);

/** The JSON pointer segments of a `#/...` reference, or `undefined` for an anchor. */
function refPointer(ref: string): string[] | undefined {
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  return fragment.startsWith('/') || fragment === '' ? pointerSegments(fragment) : undefined;
}

/**
 * @internal A copy of `schema` that Ajv validates by own properties even where a property map has
 * a member named `__proto__`, which Ajv skips: `properties.__proto__: S` gains the equivalent
 * `patternProperties["^__proto__$"]: S`, a `patternProperties` key `__proto__` gains the
 * equivalent key `(?:__proto__)`, and a draft-07 `dependencies.__proto__: D` gains an `allOf`
 * member `{ if: { required: ["__proto__"] }, then: D }`. Nothing is removed and every addition
 * goes at the end, so every JSON pointer of the original still resolves to the same subschema.
 */
export function ownPropertySafe(schema: object, dialect: SchemaDialect): object {
  const copy = structuredClone(schema);
  const seen = new Set<object>();
  const stack: unknown[] = [copy];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null || Array.isArray(node) || seen.has(node)) {
      continue;
    }
    seen.add(node);
    const s = node as Record<string, unknown>;
    for (const key of Object.keys(s)) {
      const value = s[key];
      if (typeof value !== 'object' || value === null) continue;
      if (Array.isArray(value)) {
        if (SCHEMA_ARRAYS.has(key)) stack.push(...(value as unknown[]));
      } else if (SCHEMA_MAPS.has(key)) {
        for (const member of Object.keys(value))
          stack.push((value as Record<string, unknown>)[member]);
      } else if (SCHEMA_VALUED.has(key)) {
        stack.push(value);
      }
    }
    const props = ownMember(s, 'properties');
    if (props !== undefined && Object.hasOwn(props, '__proto__')) {
      addPatternProperty(s, '^__proto__$', props['__proto__']);
    }
    const patterns = ownMember(s, 'patternProperties');
    if (patterns !== undefined && Object.hasOwn(patterns, '__proto__')) {
      addPatternProperty(s, '(?:__proto__)', patterns['__proto__']);
    }
    const deps = ownMember(s, 'dependencies');
    if (dialect === 'draft-07' && deps !== undefined && Object.hasOwn(deps, '__proto__')) {
      const dep = deps['__proto__'];
      const then = Array.isArray(dep) ? { required: dep } : dep;
      const allOf = Array.isArray(s.allOf) ? [...(s.allOf as unknown[])] : [];
      allOf.push({ if: { required: ['__proto__'] }, then });
      s.allOf = allOf;
    }
  }
  return copy;
}

function ownMember(s: Record<string, unknown>, key: string): Record<string, unknown> | undefined {
  const v = Object.hasOwn(s, key) ? s[key] : undefined;
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

function addPatternProperty(s: Record<string, unknown>, pattern: string, schema: unknown): void {
  const map = ownMember(s, 'patternProperties') ?? {};
  const existing = Object.hasOwn(map, pattern) ? map[pattern] : undefined;
  map[pattern] = existing === undefined ? schema : { allOf: [existing, schema] };
  s.patternProperties = map;
}

/** The nodes of one cycle in a directed graph, or `undefined` when it is acyclic. */
function findCycle(edges: Map<object, object[]>): Set<object> | undefined {
  const done = new Set<object>();
  for (const start of edges.keys()) {
    if (done.has(start)) continue;
    const onPath = new Set<object>([start]);
    const frames: { node: object; next: number }[] = [{ node: start, next: 0 }];
    while (frames.length > 0) {
      const frame = frames[frames.length - 1] as { node: object; next: number };
      const out = edges.get(frame.node) ?? [];
      if (frame.next >= out.length) {
        frames.pop();
        onPath.delete(frame.node);
        done.add(frame.node);
        continue;
      }
      const to = out[frame.next++] as object;
      if (onPath.has(to)) {
        const cycle = new Set<object>();
        for (let i = frames.length - 1; i >= 0; i--) {
          const n = (frames[i] as { node: object }).node;
          cycle.add(n);
          if (n === to) break;
        }
        return cycle;
      }
      if (!done.has(to)) {
        onPath.add(to);
        frames.push({ node: to, next: 0 });
      }
    }
  }
  return undefined;
}

function checkNullable(
  s: Record<string, unknown>,
  path: string[],
  fail: (code: SchemaProblem['code'], message: string) => never,
): void {
  if (s.nullable === undefined) return;
  path.push('nullable');
  if (typeof s.nullable !== 'boolean') fail('SCHEMA_INVALID', '"nullable" must be a boolean');
  const types = Array.isArray(s.type)
    ? (s.type as unknown[])
    : s.type === undefined
      ? []
      : [s.type];
  if (types.length === 0 || !types.every((t) => typeof t === 'string' && JSON_TYPES.has(t))) {
    fail('SCHEMA_INVALID', '"nullable" cannot be used without a valid "type"');
  }
  if (types.includes('null') && s.nullable === false) {
    fail('SCHEMA_INVALID', 'type "null" contradicts "nullable": false');
  }
  path.pop();
}

function checkRegExp(
  source: string,
  fail: (code: SchemaProblem['code'], message: string) => never,
): void {
  try {
    new RegExp(source, 'u');
  } catch {
    fail('SCHEMA_INVALID', `has an invalid regular expression ${JSON.stringify(source)}`);
  }
}

function anchorsOf(all: Map<object, Map<string, unknown>>, resource: object): Map<string, unknown> {
  let map = all.get(resource);
  if (map === undefined) {
    map = new Map();
    all.set(resource, map);
  }
  return map;
}

const NOT_FOUND = Symbol('not found');

function resolveLocal(
  ref: string,
  resource: object,
  anchors: Map<object, Map<string, unknown>>,
): unknown {
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return NOT_FOUND;
  }
  if (fragment === '') return resource;
  if (!fragment.startsWith('/')) {
    const map = anchors.get(resource);
    return map?.has(fragment) === true ? map.get(fragment) : NOT_FOUND;
  }
  let node: unknown = resource;
  for (const raw of fragment.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null) return NOT_FOUND;
    if (Array.isArray(node)) {
      if (!/^(0|[1-9][0-9]*)$/.test(key) || Number(key) >= node.length) return NOT_FOUND;
      node = node[Number(key)];
    } else {
      if (!Object.prototype.hasOwnProperty.call(node, key)) return NOT_FOUND;
      node = (node as Record<string, unknown>)[key];
    }
  }
  return node;
}

function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Encode JSON pointer segments as a pointer string (`/a/b~1c`). */
export function toPointer(segments: readonly string[]): string {
  let out = '';
  for (const s of segments) out += '/' + s.replace(/~/g, '~0').replace(/\//g, '~1');
  return out;
}
