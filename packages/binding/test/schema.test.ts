import { describe, expect, it } from 'vitest';
import { SchemaValidatorCache, dialectOf, validateCatalog } from '@stepbind/binding/internal';

const shared = { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] };

describe('SchemaValidatorCache', () => {
  it('checks identical schemas once and compiles them once, lazily', () => {
    const cache = new SchemaValidatorCache();
    const tools = validateCatalog(
      [
        { name: 'a', inputSchema: structuredClone(shared) },
        {
          name: 'b',
          inputSchema: {
            required: ['path'],
            properties: { path: { type: 'string' } },
            type: 'object',
          },
        },
        { name: 'c', inputSchema: { type: 'object' } },
      ],
      { server: 's', validatorCache: cache },
    );
    expect(cache.stats()).toMatchObject({ schemas: 2, metaValidations: 2, compiles: 0, hits: 1 });
    const [a, b] = tools.map((t) => cache.getValidator(t.inputSchema.digest));
    expect(a).toBe(b);
    expect(a?.compiled).toBe(false);
    expect(a?.validate({ path: '/x' })).toEqual({ ok: true });
    expect(b?.validate({})).toMatchObject({ ok: false });
    expect(cache.stats().compiles).toBe(1);
  });

  it('compiles every distinct schema at validation time when compile is eager', () => {
    const cache = new SchemaValidatorCache();
    validateCatalog(
      [
        { name: 'a', inputSchema: shared },
        { name: 'b', inputSchema: shared },
      ],
      { server: 's', validatorCache: cache, compile: 'eager' },
    );
    expect(cache.stats().compiles).toBe(1);
  });

  it('compiles recursive schemas at validation time, so first calls cannot fail to compile', () => {
    const cache = new SchemaValidatorCache();
    const [t] = validateCatalog(
      [{ name: 'tree', inputSchema: { type: 'object', properties: { child: { $ref: '#' } } } }],
      { server: 's', validatorCache: cache },
    );
    expect(cache.stats().compiles).toBe(1);
    const v = cache.getValidator(t?.inputSchema.digest ?? '');
    expect(v.validate({ child: { child: {} } })).toEqual({ ok: true });
    expect(v.validate({ child: { child: 1 } }).ok).toBe(false);
  });

  it('keeps schemas with the same $id apart', () => {
    const cache = new SchemaValidatorCache();
    const tools = validateCatalog(
      [
        { name: 'a', inputSchema: { $id: 'https://x/s', type: 'object', required: ['a'] } },
        { name: 'b', inputSchema: { $id: 'https://x/s', type: 'object', required: ['b'] } },
      ],
      { server: 's', validatorCache: cache, compile: 'eager' },
    );
    const [a, b] = tools.map((t) => cache.getValidator(t.inputSchema.digest));
    expect(a?.validate({ a: 1 }).ok).toBe(true);
    expect(b?.validate({ a: 1 }).ok).toBe(false);
  });

  it('validates draft-07 schemas with the draft-07 meta-schema', () => {
    const cache = new SchemaValidatorCache();
    const [t] = validateCatalog(
      [
        {
          name: 'a',
          inputSchema: {
            $schema: 'http://json-schema.org/draft-07/schema#',
            type: 'object',
            properties: { n: { type: 'number', exclusiveMinimum: 0 } },
          },
        },
      ],
      { server: 's', validatorCache: cache },
    );
    const v = cache.getValidator(t?.inputSchema.digest ?? '');
    expect(v.dialect).toBe('draft-07');
    expect(v.validate({ n: 0 }).ok).toBe(false);
    expect(v.validate({ n: 1 }).ok).toBe(true);
  });

  it('refuses to hand out a validator for a schema it never checked', () => {
    expect(() => new SchemaValidatorCache().getValidator('sha256:00')).toThrow(/no checked schema/);
  });
});

describe('dialectOf', () => {
  it('treats an absent $schema as 2020-12', () => {
    expect(dialectOf(undefined)).toBe('2020-12');
  });

  it('returns undefined for anything it does not support', () => {
    expect(dialectOf('https://json-schema.org/draft/2019-09/schema')).toBeUndefined();
    expect(dialectOf(null)).toBeUndefined();
  });
});
