import fc from 'fast-check';
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { SchemaValidatorCache, type SchemaDialect } from '@stepbind/binding/internal';
import { isPlainSchema } from '../src/schema/plain.js';
import { inspectSchema } from '../src/schema/walk.js';

const seed = Number(process.env.STEPBIND_SEED ?? Date.now());
console.log(`schema.prop: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

const OPTIONS = {
  strict: false,
  validateSchema: false,
  validateFormats: false,
  allErrors: false,
  logger: false,
} as const;
const ajv2020 = new Ajv2020(OPTIONS);
const ajv07 = new Ajv(OPTIONS);
const meta = {
  '2020-12': ajv2020.getSchema('https://json-schema.org/draft/2020-12/schema'),
  'draft-07': ajv07.getSchema('http://json-schema.org/draft-07/schema'),
};

// Keywords of the fast path, keywords it leaves to Ajv, and values that are sometimes right and
// sometimes wrong for each: schema-shaped values are mostly plausible, so both sides are reached.
const value = fc.oneof(
  fc.constantFrom<unknown>(
    'object',
    'string',
    'integer',
    'objekt',
    ['string', 'null'],
    ['string', 'string'],
    [],
    ['a', 'a'],
    ['a', 'b'],
    [1, '1'],
    [{}, {}],
    -1,
    0,
    1.5,
    7,
    true,
    false,
    null,
    '^a+$',
    '(',
    '#',
    'https://x.example/s',
    {},
  ),
  fc.string({ maxLength: 6 }),
  fc.integer({ min: -3, max: 3 }),
);
const keyword = fc.constantFrom(
  'type',
  'properties',
  'required',
  'title',
  'description',
  '$comment',
  'format',
  'default',
  'const',
  'examples',
  'enum',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'multipleOf',
  'minLength',
  'maxItems',
  'uniqueItems',
  'readOnly',
  'deprecated',
  'pattern',
  'items',
  'additionalProperties',
  'not',
  'if',
  'anyOf',
  'allOf',
  '$schema',
  '$ref',
  '$id',
  '$defs',
  'nullable',
  'patternProperties',
  'dependentRequired',
  'x-custom',
);
const schema = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.dictionary(keyword, fc.oneof(value, tie('node'), tie('map'), tie('list')), { maxKeys: 4 }),
    fc.boolean(),
  ),
  map: fc.dictionary(fc.constantFrom('p', 'q', 'r'), tie('node'), { maxKeys: 3 }),
  list: fc.array(tie('node'), { maxLength: 3 }),
})).node;

describe('the plain-schema fast path (property)', () => {
  it('accepts only schemas that pass the structural walk and the meta-schema, and that compile', () => {
    let accepted = 0;
    let rejected = 0;
    fc.assert(
      fc.property(
        schema,
        fc.constantFrom<SchemaDialect>('2020-12', 'draft-07'),
        (generated, dialect) => {
          const root =
            typeof generated === 'object' ? { ...generated, type: 'object' } : { type: 'object' };
          delete (root as Record<string, unknown>).$schema;
          if (!isPlainSchema(root, dialect, true, 0)) {
            rejected++;
            return;
          }
          accepted++;
          // A plain schema enforces every pattern and has no __proto__ member for Ajv to skip.
          expect(inspectSchema(root, dialect)).toEqual({
            ok: true,
            needsCompile: false,
            hasIds: false,
            unenforced: [],
            protoKeys: false,
          });
          const validate = meta[dialect];
          expect(validate?.(root), JSON.stringify(validate?.errors)).toBe(true);
          const fresh = dialect === '2020-12' ? new Ajv2020(OPTIONS) : new Ajv(OPTIONS);
          expect(() => fresh.compile(root)).not.toThrow();
        },
      ),
      { seed, verbose: true, numRuns: 2000 },
    );
    expect(accepted).toBeGreaterThan(200);
    expect(rejected).toBeGreaterThan(200);
  });

  it('leaves every invalid schema to the full path, which reports the exact problem', () => {
    const cache = new SchemaValidatorCache();
    const invalid = [
      { type: 'object', properties: { a: { type: 'objekt' } } },
      { type: 'object', required: ['a', 'a'] },
      { type: 'object', properties: { a: { minLength: -1 } } },
      { type: 'object', properties: { a: { pattern: '(' } } },
      { type: 'object', anyOf: [] },
    ];
    for (const [i, s] of invalid.entries()) {
      expect(isPlainSchema(s, '2020-12', true, 0), JSON.stringify(s)).toBe(false);
      expect(cache.check(s, `d${i}`, '2020-12', 'lazy')?.code).toBe('SCHEMA_INVALID');
    }
    // draft-07 is stricter about enum than 2020-12: non-empty, unique items.
    for (const [i, e] of [[], ['x', 'x'], [1, 1.0]].entries()) {
      const s = { type: 'object', properties: { a: { enum: e } } };
      expect(isPlainSchema(s, 'draft-07', true, 0), JSON.stringify(s)).toBe(false);
      expect(cache.check(s, `e${i}`, 'draft-07', 'lazy')?.code).toBe('SCHEMA_INVALID');
    }
    expect(cache.stats().schemas).toBe(0);
    // 2020-12 allows an empty enum in its meta-schema, but Ajv cannot compile it: not plain, and
    // the full path compiles it at once and refuses it (seed 737324657 found this).
    const empty = { type: 'object', enum: [] };
    expect(isPlainSchema(empty, '2020-12', true, 0)).toBe(false);
    expect(cache.check(empty, 'empty-enum', '2020-12', 'lazy')?.code).toBe('SCHEMA_INVALID');
  });
});
