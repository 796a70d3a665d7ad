/**
 * Own-property semantics for Ajv: the rewritten copy compiled for a schema with a `__proto__`
 * member in a property map (DESIGN §7.1, "Own properties only").
 *
 * @packageDocumentation
 */
import type { SchemaDialect } from './dialects.js';
import { SCHEMA_ARRAYS, SCHEMA_MAPS, SCHEMA_VALUED } from './keywords.js';

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
