/**
 * The plain-schema fast path: proves the common shape of tool schemas valid in one walk, without
 * Ajv's meta-schema. Its structural rules (schema positions, regular expressions, `__proto__`
 * members) are the walk's own (`keywords.ts`); its value rules are a whitelist of the 2020-12 and
 * draft-07 meta-schema rules, checked against Ajv by a property test (`schema.prop.test.ts`).
 *
 * @packageDocumentation
 */
import { planPattern } from '../regex/plan.js';
import type { SchemaDialect } from './dialects.js';
import {
  JSON_TYPES,
  SCHEMA_ARRAYS,
  SCHEMA_MAPS,
  SCHEMA_VALUED,
  isProtoSkipped,
  regexProblem,
  subsetOf,
} from './keywords.js';

/** The schema positions the fast path follows; every other one takes the full walk. */
const PLAIN_SINGLE = subsetOf(SCHEMA_VALUED, [
  'items',
  'additionalProperties',
  'propertyNames',
  'contains',
  'not',
  'if',
  'then',
  'else',
]);
const PLAIN_ARRAYS = subsetOf(SCHEMA_ARRAYS, ['allOf', 'anyOf', 'oneOf']);
const PLAIN_MAPS = subsetOf(SCHEMA_MAPS, ['properties']);

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
        if (typeof v !== 'string' || regexProblem(v) !== undefined || !planPattern(v).enforced) {
          return false;
        }
        break;
      case '$schema':
        // The root's $schema already named this dialect (dialectOf); a nested one needs Ajv.
        if (!isRoot || typeof v !== 'string') return false;
        break;
      default:
        // Schema positions: the subset of the walk's keyword sets (keywords.ts) the fast path follows.
        if (PLAIN_SINGLE.has(key)) {
          if (!isPlainSchema(v, dialect, false, depth + 1)) return false;
        } else if (PLAIN_ARRAYS.has(key)) {
          if (!isSchemaArray(v, dialect, depth)) return false;
        } else if (PLAIN_MAPS.has(key)) {
          if (!isSchemaMap(key, v, dialect, depth)) return false;
        } else {
          return false;
        }
    }
  }
  return true;
}

function isTypeKeyword(v: unknown): boolean {
  if (typeof v === 'string') return JSON_TYPES.has(v);
  if (!Array.isArray(v) || v.length === 0) return false;
  for (let i = 0; i < v.length; i++) {
    if (!JSON_TYPES.has(v[i])) return false;
    for (let j = 0; j < i; j++) if (v[j] === v[i]) return false;
  }
  return true;
}

function isSchemaMap(keyword: string, v: unknown, dialect: SchemaDialect, depth: number): boolean {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const map = v as Record<string, unknown>;
  for (const key of Object.keys(map)) {
    // Ajv ignores a property named __proto__: the full path rewrites the schema for it.
    if (isProtoSkipped(keyword, key) || !isPlainSchema(map[key], dialect, false, depth + 1)) {
      return false;
    }
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
