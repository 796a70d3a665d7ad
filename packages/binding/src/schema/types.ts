/**
 * The shapes the schema checks and validators share: results, problems, unenforced patterns.
 *
 * @packageDocumentation
 */
import type { SchemaDialect } from './dialects.js';

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

/** A failed schema check: what went wrong and where, relative to the schema root. */
export interface SchemaProblem {
  readonly code: 'REMOTE_REF' | 'UNRESOLVED_REF' | 'SCHEMA_INVALID';
  /** JSON pointer segments from the schema root to the offending keyword. */
  readonly path: readonly string[];
  readonly message: string;
  readonly ref?: string;
  readonly cause?: unknown;
}
