import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SchemaValidatorCache, validateTool, type SchemaDialect } from '@stepbind/binding/internal';

const seed = Number(process.env.STEPBIND_SEED ?? Date.now());
console.log(`ownprops.prop: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

// Property names a naive `data[name] !== undefined` or `name in data` check gets wrong, plus
// ordinary ones. `__proto__` only ever exists as an own key of objects JSON.parse made.
const NAMES = [...Object.getOwnPropertyNames(Object.prototype), 'a', 'amount', '_id', 'tag'];
const PATTERNS = ['^_', 'g$', '^a', '__proto__'];

type Leaf = Readonly<Record<string, unknown>>;
const leaf = fc.constantFrom<Leaf>({ type: 'number' }, { type: 'string' }, {});
const names = fc.subarray(NAMES, { maxLength: 5 });
/** An object whose own keys are exactly the entries' (`Object.fromEntries` defines `__proto__`). */
const map = <T>(
  keys: fc.Arbitrary<readonly string[]>,
  value: fc.Arbitrary<T>,
): fc.Arbitrary<Record<string, T>> =>
  keys.chain((ks) =>
    fc
      .array(value, { minLength: ks.length, maxLength: ks.length })
      .map((vs) => Object.fromEntries(ks.map((k, i) => [k, vs[i] as T]))),
  );

type Mode = 'additional' | 'unevaluated';
interface Case {
  readonly dialect: SchemaDialect;
  readonly mode: Mode;
  readonly required: readonly string[];
  readonly properties: Record<string, Leaf>;
  readonly patternProperties: Record<string, Leaf>;
  readonly additional: false | Leaf | undefined;
  readonly dependent: Record<string, readonly string[]>;
}

const testCase: fc.Arbitrary<Case> = fc.record({
  dialect: fc.constantFrom<SchemaDialect>('2020-12', 'draft-07'),
  mode: fc.constantFrom<Mode>('additional', 'unevaluated'),
  required: names,
  properties: map(names, leaf),
  patternProperties: map(fc.subarray(PATTERNS), leaf),
  additional: fc.option(fc.oneof(fc.constant(false as const), leaf), { nil: undefined }),
  dependent: map(fc.subarray(NAMES, { maxLength: 3 }), names),
});

/** The tool schema of a case, as a server would send it (JSON text, parsed). */
function schemaOf(c: Case): Record<string, unknown> {
  const keywords: Record<string, unknown> = {
    properties: c.properties,
    patternProperties: c.patternProperties,
  };
  const root: Record<string, unknown> = {
    type: 'object',
    ...(c.dialect === 'draft-07' ? { $schema: 'http://json-schema.org/draft-07/schema#' } : {}),
    required: c.required,
    [c.dialect === 'draft-07' ? 'dependencies' : 'dependentRequired']: c.dependent,
  };
  if (c.mode === 'unevaluated' && c.dialect === '2020-12') {
    // Evaluated properties come from a subschema: Ajv tracks them dynamically.
    root.allOf = [keywords];
    root.unevaluatedProperties = false;
  } else {
    Object.assign(root, keywords);
    if (c.additional !== undefined) root.additionalProperties = c.additional;
  }
  return JSON.parse(JSON.stringify(root)) as Record<string, unknown>;
}

const own = (o: object, k: string): boolean => Object.hasOwn(o, k);

function leafOk(value: unknown, s: Leaf): boolean {
  if (s.type === 'number') return typeof value === 'number';
  if (s.type === 'string') return typeof value === 'string';
  return true;
}

/** An independent reading of the keywords, by own properties only. */
function oracle(c: Case, data: Record<string, unknown>): boolean {
  const unevaluated = c.mode === 'unevaluated' && c.dialect === '2020-12';
  for (const r of c.required) if (!own(data, r)) return false;
  for (const key of Object.keys(data)) {
    let evaluated = false;
    if (own(c.properties, key)) {
      evaluated = true;
      if (!leafOk(data[key], c.properties[key] as Leaf)) return false;
    }
    for (const p of Object.keys(c.patternProperties)) {
      if (new RegExp(p, 'u').test(key)) {
        evaluated = true;
        if (!leafOk(data[key], c.patternProperties[p] as Leaf)) return false;
      }
    }
    if (evaluated) continue;
    if (unevaluated) return false;
    if (c.additional === false) return false;
    if (c.additional !== undefined && !leafOk(data[key], c.additional)) return false;
  }
  for (const key of Object.keys(c.dependent)) {
    if (!own(data, key)) continue;
    for (const d of c.dependent[key] ?? []) if (!own(data, d)) return false;
  }
  return true;
}

const data = map(
  fc.subarray(NAMES, { maxLength: 6 }),
  fc.oneof(fc.integer(), fc.string({ maxLength: 3 }), fc.constant(null)),
).map((o) => JSON.parse(JSON.stringify(o)) as Record<string, unknown>);

describe('own properties only (property)', () => {
  it('required, properties, patternProperties, additional/unevaluatedProperties and dependencies agree with an own-property oracle', () => {
    const cache = new SchemaValidatorCache();
    let valid = 0;
    let invalid = 0;
    fc.assert(
      fc.property(testCase, fc.array(data, { minLength: 1, maxLength: 6 }), (c, values) => {
        const tool = validateTool(
          { name: 't', inputSchema: schemaOf(c) },
          { server: 's', validatorCache: cache },
        );
        const validator = cache.getValidator(tool.inputSchema.digest);
        for (const value of values) {
          const expected = oracle(c, value);
          if (expected) valid++;
          else invalid++;
          expect(validator.validate(value).ok, JSON.stringify({ value, c })).toBe(expected);
        }
      }),
      { seed, verbose: true, numRuns: 300 },
    );
    // Both verdicts are reached, so the property can fail either way.
    expect(valid).toBeGreaterThan(20);
    expect(invalid).toBeGreaterThan(20);
  });
});

describe('evaluated-property sets without a prototype', () => {
  it('leave schema text that looks like the rewritten code alone', () => {
    // The rewrite of `propsN = {}` must skip string literals, where property names appear.
    const name = 'x";var props0 = {};"';
    const cache = new SchemaValidatorCache();
    const tool = validateTool(
      {
        name: 't',
        inputSchema: {
          type: 'object',
          allOf: [{ properties: { [name]: { type: 'number' } }, patternProperties: { '^y': {} } }],
          unevaluatedProperties: false,
        },
      },
      { server: 's', validatorCache: cache },
    );
    const validator = cache.getValidator(tool.inputSchema.digest);
    expect(validator.validate({ [name]: 1, y: 2 })).toEqual({ ok: true });
    expect(validator.validate({ [name]: 'one' }).ok).toBe(false);
    expect(validator.validate({ constructor: 1 }).ok).toBe(false);
    expect(validator.validate(JSON.parse('{"__proto__":1}')).ok).toBe(false);
  });
});
