import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { toStrictSchema, type ObjectSchema } from '@stepbind/binding';

const seed = Number(process.env['STEPBIND_SEED'] ?? Date.now());
console.log(`strict.prop: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

const ajv = new Ajv2020({ strict: false, allErrors: true });

/** A schema shape that strict mode can express, from which schemas and instances are built. */
type Shape =
  | { readonly kind: 'string' | 'integer' | 'boolean' | 'enum' }
  | { readonly kind: 'array'; readonly items: Shape }
  | {
      readonly kind: 'object';
      readonly props: readonly { name: string; shape: Shape; required: boolean }[];
    };

function arbShape(depth: number): fc.Arbitrary<Shape> {
  const leaf = fc.constantFrom<Shape>(
    { kind: 'string' },
    { kind: 'integer' },
    { kind: 'boolean' },
    { kind: 'enum' },
  );
  if (depth === 0) return leaf;
  return fc.oneof(
    { weight: 3, arbitrary: leaf },
    { weight: 1, arbitrary: arbShape(depth - 1).map((items): Shape => ({ kind: 'array', items })) },
    { weight: 2, arbitrary: arbObject(depth - 1) },
  );
}

function arbObject(depth: number): fc.Arbitrary<Shape & { kind: 'object' }> {
  return fc
    .uniqueArray(
      fc.record({
        name: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
        shape: arbShape(depth),
        required: fc.boolean(),
      }),
      { selector: (p) => p.name, maxLength: 4 },
    )
    .map((props) => ({ kind: 'object' as const, props }));
}

function schemaOf(shape: Shape): Record<string, unknown> {
  switch (shape.kind) {
    case 'string':
    case 'integer':
    case 'boolean':
      return { type: shape.kind };
    case 'enum':
      return { enum: ['x', 'y', 2] };
    case 'array':
      return { type: 'array', items: schemaOf(shape.items) };
    case 'object':
      return {
        type: 'object',
        properties: Object.fromEntries(shape.props.map((p) => [p.name, schemaOf(p.shape)])),
        required: shape.props.filter((p) => p.required).map((p) => p.name),
        // Half the objects close themselves already; the conversion must close the rest.
        ...(shape.props.length % 2 === 0 ? { additionalProperties: false } : {}),
      };
  }
}

/** An instance of the original schema: optional properties present or absent. */
function arbInstance(shape: Shape): fc.Arbitrary<unknown> {
  switch (shape.kind) {
    case 'string':
      return fc.string({ maxLength: 4 });
    case 'integer':
      return fc.integer();
    case 'boolean':
      return fc.boolean();
    case 'enum':
      return fc.constantFrom('x', 'y', 2);
    case 'array':
      return fc.array(arbInstance(shape.items), { maxLength: 3 });
    case 'object':
      return fc.record(Object.fromEntries(shape.props.map((p) => [p.name, arbInstance(p.shape)])), {
        requiredKeys: shape.props.filter((p) => p.required).map((p) => p.name),
      });
  }
}

/** What a strict model sends for `value`: every absent optional property as `null`. */
function strictified(shape: Shape, value: unknown): unknown {
  if (shape.kind === 'array') return (value as unknown[]).map((v) => strictified(shape.items, v));
  if (shape.kind !== 'object') return value;
  const record = value as Record<string, unknown>;
  return Object.fromEntries(
    shape.props.map((p) => [
      p.name,
      p.name in record ? strictified(p.shape, record[p.name]) : null,
    ]),
  );
}

describe('toStrictSchema (property)', () => {
  it('every strict instance validates, and restore gives back exactly the original arguments', () => {
    fc.assert(
      fc.property(arbCase(3), ({ shape, value }) => {
        const original = schemaOf(shape) as unknown as ObjectSchema;
        const conversion = toStrictSchema(original);
        expect(conversion.strict).toBe(true);
        if (!conversion.strict) return;
        const sent = strictified(shape, value) as Record<string, unknown>;
        expect(ajv.validate(conversion.schema, sent), ajv.errorsText()).toBe(true);
        const restored = conversion.restore(sent);
        const plain = (v: unknown): unknown => JSON.parse(JSON.stringify(v));
        expect(plain(restored)).toStrictEqual(plain(value));
        expect(ajv.validate(original, restored), ajv.errorsText()).toBe(true);
      }),
      { seed, numRuns: 300 },
    );
  });

  it('the converted schema admits no property the original does not declare', () => {
    fc.assert(
      fc.property(arbCase(2), ({ shape, value }) => {
        const conversion = toStrictSchema(schemaOf(shape) as unknown as ObjectSchema);
        if (!conversion.strict) throw new Error(conversion.reason);
        const sent = strictified(shape, value) as Record<string, unknown>;
        expect(ajv.validate(conversion.schema, sent)).toBe(true);
        expect(ajv.validate(conversion.schema, { ...sent, undeclared: 'x' })).toBe(false);
      }),
      { seed, numRuns: 100 },
    );
  });
});

function arbCase(depth: number): fc.Arbitrary<{ shape: Shape; value: unknown }> {
  return arbObject(depth).chain((shape) => arbInstance(shape).map((value) => ({ shape, value })));
}
