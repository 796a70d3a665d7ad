/**
 * Schema checks and compiled validators, cached by schema digest: the plain fast path
 * (`plain.ts`) or the structural walk (`walk.ts`) plus Ajv's meta-schema, then Ajv compilation
 * with patterns on RE2 (`../regex/`).
 *
 * @packageDocumentation
 */
import { Ajv, MissingRefError } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { PatternRefusedError, re2Engine, withRegexBudget } from '../regex/budget.js';
import { SCHEMA_DIALECT_URIS, type SchemaDialect } from './dialects.js';
import { ownPropertySafe } from './own.js';
import { isPlainSchema } from './plain.js';
import { pointerSegments } from './pointer.js';
import type {
  SchemaCacheStats,
  SchemaProblem,
  SchemaValidator,
  UnenforcedSchemaPattern,
  ValidationResult,
} from './types.js';
import { inspectSchema } from './walk.js';

export type {
  SchemaCacheStats,
  SchemaProblem,
  SchemaValidator,
  UnenforcedSchemaPattern,
  ValidationResult,
} from './types.js';

const NO_PATTERNS: readonly UnenforcedSchemaPattern[] = Object.freeze([]);

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
