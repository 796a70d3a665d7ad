import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { toStrictSchema, type ObjectSchema, type StrictSchema } from '@stepbind/binding';

const ajv = new Ajv2020({ strict: false, allErrors: true });
const valid = (schema: unknown, value: unknown): boolean => ajv.validate(schema as object, value);

function strict(schema: ObjectSchema): StrictSchema {
  const result = toStrictSchema(schema);
  if (!result.strict) throw new Error(`expected strict, got: ${result.reason} at ${result.path}`);
  return result;
}

describe('toStrictSchema', () => {
  it('makes every property required, optional ones nullable, and closes every object', () => {
    const schema: ObjectSchema = {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'File path.' },
        limit: { type: 'integer', minimum: 1 },
        mode: { enum: ['r', 'w'] },
        options: {
          type: 'object',
          properties: { recursive: { type: 'boolean' }, depth: { type: 'number' } },
          required: ['recursive'],
        },
      },
      required: ['path'],
    };
    expect(strict(schema).schema).toEqual({
      type: 'object',
      properties: {
        path: { type: 'string', description: 'File path.' },
        limit: { type: ['integer', 'null'], minimum: 1 },
        mode: { enum: ['r', 'w', null] },
        options: {
          type: ['object', 'null'],
          properties: { recursive: { type: 'boolean' }, depth: { type: ['number', 'null'] } },
          required: ['recursive', 'depth'],
          additionalProperties: false,
        },
      },
      required: ['path', 'limit', 'mode', 'options'],
      additionalProperties: false,
    });
  });

  it('restores the nulls it introduced, at every depth, and nothing else', () => {
    const s = strict({
      type: 'object',
      properties: {
        a: { type: 'string' },
        items: {
          type: 'array',
          items: {
            type: 'object',
            properties: { x: { type: 'string' }, y: { type: 'string' } },
            required: ['x'],
          },
        },
      },
    });
    expect(
      s.restore({
        a: null,
        items: [
          { x: 'k', y: null },
          { x: 'm', y: 'n' },
        ],
      }),
    ).toEqual({
      items: [{ x: 'k' }, { x: 'm', y: 'n' }],
    });
  });

  it('returns the arguments themselves when nothing was made nullable', () => {
    const s = strict({ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] });
    const args = { a: 'x' };
    expect(s.restore(args)).toBe(args);
  });

  it('folds default into the description and drops pure annotations', () => {
    const s = strict({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { n: { type: 'integer', default: 10, description: 'How many.', examples: [3] } },
      required: ['n'],
    });
    expect(s.schema).toEqual({
      type: 'object',
      properties: { n: { type: 'integer', description: 'How many. Default: 10.' } },
      required: ['n'],
      additionalProperties: false,
    });
  });

  it('drops vendor extensions such as x-mcp-header, and restores a null for an optional one', () => {
    const original: ObjectSchema = {
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        verbose: { type: 'boolean', 'x-mcp-header': 'Verbose', 'x-order': 2 },
      },
      required: ['region'],
    };
    const s = strict(original);
    expect(JSON.stringify(s.schema)).not.toContain('x-');
    expect(s.schema['properties']).toEqual({
      region: { type: 'string' },
      verbose: { type: ['boolean', 'null'] },
    });
    // The model's "not given" (null) is restored away, and the result is valid under the original.
    const restored = s.restore({ region: 'eu', verbose: null });
    expect(restored).toEqual({ region: 'eu' });
    expect(valid(original, restored)).toBe(true);
    expect(valid(original, { region: 'eu', verbose: null })).toBe(false);
  });

  it('converts local recursive $refs and restores through them', () => {
    const s = strict({
      type: 'object',
      properties: { head: { $ref: '#/$defs/node' } },
      required: ['head'],
      $defs: {
        node: {
          type: 'object',
          properties: { value: { type: 'string' }, next: { $ref: '#/$defs/node' } },
          required: ['value'],
        },
        unused: { type: 'string', minLength: 1 },
      },
    });
    expect(s.schema['$defs']).toEqual({
      node: {
        type: 'object',
        properties: {
          value: { type: 'string' },
          next: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] },
        },
        required: ['value', 'next'],
        additionalProperties: false,
      },
    });
    const sent = { head: { value: 'a', next: { value: 'b', next: null } } };
    expect(valid(s.schema, sent)).toBe(true);
    expect(s.restore(sent)).toEqual({ head: { value: 'a', next: { value: 'b' } } });
  });

  it('takes a tool without arguments as is, closed', () => {
    expect(strict({ type: 'object' }).schema).toEqual({
      type: 'object',
      properties: {},
      required: [],
      additionalProperties: false,
    });
  });

  const refusals: [string, ObjectSchema, string, string][] = [
    [
      'minLength',
      obj({ s: { type: 'string', minLength: 1 } }),
      '"minLength"',
      '/properties/s/minLength',
    ],
    [
      'maxLength',
      obj({ s: { type: 'string', maxLength: 9 } }),
      '"maxLength"',
      '/properties/s/maxLength',
    ],
    [
      'uniqueItems',
      obj({ a: { type: 'array', items: { type: 'string' }, uniqueItems: true } }),
      '"uniqueItems"',
      '/properties/a/uniqueItems',
    ],
    ['allOf', obj({ a: { allOf: [{ type: 'string' }] } }), '"allOf"', '/properties/a/allOf'],
    [
      'oneOf',
      obj({ a: { type: 'string', oneOf: [{ type: 'string' }] } }),
      '"oneOf"',
      '/properties/a/oneOf',
    ],
    ['not', obj({ a: { type: 'string', not: { const: 'x' } } }), '"not"', '/properties/a/not'],
    ['if', obj({ a: { type: 'string', if: { const: 'x' } } }), '"if"', '/properties/a/if'],
    [
      'patternProperties',
      obj({
        m: { type: 'object', properties: { k: { type: 'string' } }, patternProperties: { x: {} } },
      }),
      '"patternProperties"',
      '/properties/m/patternProperties',
    ],
    [
      'a map',
      obj({ m: { type: 'object', additionalProperties: { type: 'string' } } }),
      'admits other properties',
      '/properties/m/additionalProperties',
    ],
    [
      'additionalProperties: true at the root',
      { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: true },
      'admits other properties',
      '/additionalProperties',
    ],
    ['a free-form object', obj({ m: { type: 'object' } }), 'free-form object', '/properties/m'],
    [
      'an unknown format',
      obj({ u: { type: 'string', format: 'uri' } }),
      'format "uri"',
      '/properties/u/format',
    ],
    [
      'a tuple',
      obj({ t: { type: 'array', items: [{ type: 'string' }] } }),
      'tuple',
      '/properties/t/items',
    ],
    ['an array without items', obj({ t: { type: 'array' } }), 'without "items"', '/properties/t'],
    ['any value', obj({ v: {} }), 'without "type"', '/properties/v'],
    ['a boolean sub-schema', obj({ v: true }), 'boolean', '/properties/v'],
    [
      'an optional property that accepts null',
      { type: 'object', properties: { n: { type: ['string', 'null'] } } },
      'already accepts null',
      '/properties/n',
    ],
    [
      'an optional property inside anyOf',
      obj({
        u: {
          anyOf: [{ type: 'object', properties: { a: { type: 'string' } } }, { type: 'string' }],
        },
      }),
      'inside "anyOf"',
      '/properties/u/anyOf/0/properties/a',
    ],
    ['anyOf at the root', { type: 'object', anyOf: [{ type: 'object' }] }, 'at the root', ''],
    [
      'a remote $ref',
      obj({ r: { $ref: 'https://example.com/s.json' } }),
      'local "$ref"',
      '/properties/r/$ref',
    ],
    [
      '$ref with siblings',
      obj({ r: { $ref: '#/$defs/x', minimum: 1 } }),
      'sibling keyword "minimum"',
      '/properties/r/minimum',
    ],
    [
      'required names that are not properties',
      { type: 'object', properties: {}, required: ['ghost'] },
      '"ghost" is not declared',
      '/required',
    ],
    ['nesting deeper than 10', obj({ a: nest(11) }), 'deeper than 10', '/properties/a'.repeat(11)],
    [
      'a $defs entry used inside anyOf with optional properties',
      {
        type: 'object',
        properties: { u: { anyOf: [{ $ref: '#/$defs/o' }, { type: 'string' }] } },
        required: ['u'],
        $defs: { o: { type: 'object', properties: { a: { type: 'string' } } } },
      },
      'used inside "anyOf"',
      '/properties/u/anyOf/0/$ref',
    ],
  ];

  it.each(refusals)(
    'is not strict for %s, saying why and where',
    (_label, schema, reason, path) => {
      const result = toStrictSchema(schema);
      expect(result.strict).toBe(false);
      if (result.strict) return;
      expect(result.reason).toContain(reason);
      expect(result.path).toBe(path);
    },
  );

  it('caches the conversion per schema object', () => {
    const schema: ObjectSchema = { type: 'object', properties: { a: { type: 'string' } } };
    expect(toStrictSchema(schema)).toBe(toStrictSchema(schema));
  });
});

function obj(properties: Record<string, unknown>): ObjectSchema {
  return { type: 'object', properties, required: Object.keys(properties) };
}

function nest(levels: number): Record<string, unknown> {
  let node: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < levels; i++)
    node = { type: 'object', properties: { a: node }, required: ['a'] };
  return node;
}
