import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  CatalogError,
  ErrorCode,
  SchemaValidatorCache,
  createCatalogSnapshot,
  validateCatalog,
  validateTool,
} from '@stepbind/binding/internal';

const fixtureDir = fileURLToPath(
  new URL('../../testkit/test/fixtures/validation/', import.meta.url),
);

interface Fixture {
  readonly generations: readonly {
    readonly pages: readonly { readonly tools: readonly unknown[] }[];
  }[];
}

function loadFixture(code: string): Fixture {
  return JSON.parse(readFileSync(`${fixtureDir}${code}.json`, 'utf8')) as Fixture;
}

function catalogError(fn: () => unknown): CatalogError {
  try {
    fn();
  } catch (error) {
    if (error instanceof CatalogError) return error;
    throw error;
  }
  throw new Error('expected a CatalogError');
}

const tool = (
  name: string,
  inputSchema: unknown,
  extra: Record<string, unknown> = {},
): unknown => ({
  name,
  inputSchema,
  ...extra,
});
const opts = { server: 'files' };

describe('validation fixtures (one per code, also served by the testkit server)', () => {
  const codes = readdirSync(fixtureDir).map((f) => f.replace(/\.json$/, ''));

  it('covers every validation code', () => {
    expect(codes.sort()).toEqual(
      [
        'DUPLICATE_TOOL_NAME',
        'INVALID_INPUT_SCHEMA',
        'INVALID_OUTPUT_SCHEMA',
        'INVALID_TOOL',
        'INVALID_TOOL_NAME',
        'REMOTE_REF',
        'SCHEMA_INVALID',
        'SCHEMA_TOO_LARGE',
        'UNKNOWN_SCHEMA_DIALECT',
        'UNRESOLVED_REF',
      ].sort(),
    );
  });

  it.each(codes)('a catalog with the %s fixture is refused with that code', (code) => {
    const pages = (loadFixture(code).generations[0]?.pages ?? []).map((p) => p.tools);
    const error = catalogError(() =>
      createCatalogSnapshot({
        identity: { name: 'fixture', transportDigest: 'sha256:0' },
        audience: 'default',
        policyEpoch: 0,
        pages,
        revisionProof: 'unversioned',
        discoveryStartedAt: 0,
      }),
    );
    expect(error.code).toBe(code);
    expect(error.detail.server).toBe('fixture');
    expect(error.message).toContain('server "fixture"');
  });
});

describe('validateTool', () => {
  it('accepts a minimal object schema and reports its digest and dialect', () => {
    const v = validateTool(tool('read_file', { type: 'object' }), opts);
    expect(v.name).toBe('read_file');
    expect(v.inputSchema.dialect).toBe('2020-12');
    expect(v.inputSchema.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(v.outputSchema).toBeUndefined();
  });

  it.each([
    ['null', null],
    ['an array', []],
    ['a string', 'tool'],
  ])('refuses a tool that is %s with INVALID_TOOL', (_label, raw) => {
    expect(catalogError(() => validateTool(raw, opts)).code).toBe(ErrorCode.INVALID_TOOL);
  });

  it('refuses a tool whose name is not a string with INVALID_TOOL', () => {
    const e = catalogError(() => validateTool({ name: 3, inputSchema: { type: 'object' } }, opts));
    expect(e.code).toBe(ErrorCode.INVALID_TOOL);
    expect(e.detail.path).toBe('/name');
  });

  it('refuses a tool without inputSchema with INVALID_TOOL', () => {
    expect(catalogError(() => validateTool({ name: 'a' }, opts)).code).toBe(ErrorCode.INVALID_TOOL);
  });

  it.each(['', 'has space', 'a/b', 'x'.repeat(129), 'é'])(
    'refuses the tool name %j with INVALID_TOOL_NAME',
    (name) => {
      const e = catalogError(() => validateTool(tool(name, { type: 'object' }), opts));
      expect(e.code).toBe(ErrorCode.INVALID_TOOL_NAME);
      // A name too long to be one is clipped in the detail (a hostile one can be megabytes).
      expect(e.detail).toMatchObject({ server: 'files', tool: name.slice(0, 128), path: '/name' });
    },
  );

  it.each(['a', 'A.b-c_d', 'x'.repeat(128)])('accepts the tool name %j', (name) => {
    expect(validateTool(tool(name, { type: 'object' }), opts).name).toBe(name);
  });

  it.each([
    ['a boolean schema', true],
    ['a string schema', { type: 'string' }],
    ['a schema without type', { properties: {} }],
    ['an array of types', { type: ['object'] }],
  ])('refuses %s as inputSchema with INVALID_INPUT_SCHEMA', (_label, schema) => {
    const e = catalogError(() => validateTool(tool('a', schema), opts));
    expect(e.code).toBe(ErrorCode.INVALID_INPUT_SCHEMA);
    expect(e.detail.path).toBe('/inputSchema');
  });

  it('refuses a non-object outputSchema with INVALID_OUTPUT_SCHEMA', () => {
    const e = catalogError(() =>
      validateTool(tool('a', { type: 'object' }, { outputSchema: { type: 'string' } }), opts),
    );
    expect(e.code).toBe(ErrorCode.INVALID_OUTPUT_SCHEMA);
    expect(e.detail.path).toBe('/outputSchema');
  });

  it.each([
    'https://json-schema.org/draft/2020-12/schema',
    'http://json-schema.org/draft/2020-12/schema',
    'https://json-schema.org/draft/2020-12/schema#',
    'http://json-schema.org/draft-07/schema#',
    'http://json-schema.org/draft-07/schema',
    'https://json-schema.org/draft-07/schema#',
  ])('accepts the dialect %s', ($schema) => {
    expect(validateTool(tool('a', { $schema, type: 'object' }), opts).name).toBe('a');
  });

  it.each([
    'http://json-schema.org/draft-04/schema#',
    'https://json-schema.org/draft/2019-09/schema',
    'https://example.com/my-dialect',
    42,
  ])('refuses the dialect %j with UNKNOWN_SCHEMA_DIALECT', ($schema) => {
    const e = catalogError(() => validateTool(tool('a', { $schema, type: 'object' }), opts));
    expect(e.code).toBe(ErrorCode.UNKNOWN_SCHEMA_DIALECT);
    expect(e.detail.path).toBe('/inputSchema/$schema');
  });

  it('honours a narrower dialect allowlist, absent $schema meaning 2020-12', () => {
    const e = catalogError(() =>
      validateTool(tool('a', { type: 'object' }), { ...opts, allowedDialects: ['draft-07'] }),
    );
    expect(e.code).toBe(ErrorCode.UNKNOWN_SCHEMA_DIALECT);
  });

  it.each(['https://example.com/a.json', 'a.json#/x', 'urn:x', '/abs#/x'])(
    'refuses the non-local $ref %j with REMOTE_REF and its pointer',
    (ref) => {
      const schema = { type: 'object', properties: { a: { $ref: ref } } };
      const e = catalogError(() => validateTool(tool('a', schema), opts));
      expect(e.code).toBe(ErrorCode.REMOTE_REF);
      expect(e.detail).toMatchObject({ path: '/inputSchema/properties/a/$ref', ref });
    },
  );

  it('ignores $ref-looking data inside const, enum and default', () => {
    const schema = {
      type: 'object',
      const: { $ref: 'https://x' },
      default: { $ref: '#/nowhere' },
      properties: { a: { enum: [{ $ref: 'https://y' }] } },
    };
    expect(validateTool(tool('a', schema), opts).name).toBe('a');
  });

  it.each(['#/$defs/missing', '#/properties/b', '#nope', '#/definitions/x', '#/items/5'])(
    'refuses the unresolvable local $ref %j with UNRESOLVED_REF',
    (ref) => {
      const schema = {
        type: 'object',
        $defs: { s: { type: 'string' } },
        properties: { a: { $ref: ref } },
      };
      const e = catalogError(() => validateTool(tool('a', schema), opts));
      expect(e.code).toBe(ErrorCode.UNRESOLVED_REF);
      expect(e.detail.path).toBe('/inputSchema/properties/a/$ref');
    },
  );

  it.each([
    ['a $defs pointer', { $defs: { s: { type: 'string' } } }, '#/$defs/s'],
    ['a definitions pointer', { definitions: { s: { type: 'string' } } }, '#/definitions/s'],
    ['an escaped pointer', { $defs: { 'a/b~c': { type: 'string' } } }, '#/$defs/a~1b~0c'],
    ['a percent-encoded pointer', { $defs: { 'a b': { type: 'string' } } }, '#/$defs/a%20b'],
    ['an anchor', { $defs: { s: { $anchor: 'str', type: 'string' } } }, '#str'],
  ])('accepts %s that resolves and validates through it', (_label, extra, ref) => {
    const schema = { type: 'object', ...extra, properties: { a: { $ref: ref } } };
    const cache = new SchemaValidatorCache();
    const v = validateTool(tool('a', schema), { ...opts, validatorCache: cache });
    const validator = cache.getValidator(v.inputSchema.digest);
    expect(validator.validate({ a: 'x' })).toEqual({ ok: true });
    expect(validator.validate({ a: 1 }).ok).toBe(false);
  });

  it('refuses a schema over the byte budget with SCHEMA_TOO_LARGE', () => {
    const schema = { type: 'object', description: 'x'.repeat(200) };
    const e = catalogError(() => validateTool(tool('a', schema), { ...opts, maxSchemaBytes: 100 }));
    expect(e.code).toBe(ErrorCode.SCHEMA_TOO_LARGE);
    expect(e.detail).toMatchObject({ limit: 100, path: '/inputSchema' });
  });

  it('measures the budget in UTF-8 bytes of canonical JSON', () => {
    const schema = { type: 'object', description: 'é'.repeat(40) }; // 80 bytes, 40 chars
    const json = '{"description":"","type":"object"}'.length;
    expect(validateTool(tool('a', schema), { ...opts, maxSchemaBytes: json + 80 }).name).toBe('a');
    const e = catalogError(() =>
      validateTool(tool('a', schema), { ...opts, maxSchemaBytes: json + 79 }),
    );
    expect(e.code).toBe(ErrorCode.SCHEMA_TOO_LARGE);
  });

  it.each([
    [
      'an unknown type',
      { properties: { a: { type: 'strung' } } },
      '/inputSchema/properties/a/type',
    ],
    [
      'a negative minLength',
      { properties: { a: { minLength: -1 } } },
      '/inputSchema/properties/a/minLength',
    ],
    ['required not an array', { required: 'a' }, '/inputSchema/required'],
    [
      'an invalid regex',
      { properties: { a: { pattern: '(' } } },
      '/inputSchema/properties/a/pattern',
    ],
    [
      'an invalid patternProperties key',
      { patternProperties: { '[': {} } },
      '/inputSchema/patternProperties/[',
    ],
    [
      'nullable without type',
      { properties: { a: { nullable: true } } },
      '/inputSchema/properties/a/nullable',
    ],
    ['$async', { $async: true }, '/inputSchema/$async'],
    ['an infinite $ref cycle', { $ref: '#' }, '/inputSchema/$ref'],
    [
      'a mutual in-place cycle',
      {
        $defs: { a: { allOf: [{ $ref: '#/$defs/b' }] }, b: { $ref: '#/$defs/a' } },
        allOf: [{ $ref: '#/$defs/a' }],
      },
      undefined,
    ],
  ])('refuses %s with SCHEMA_INVALID', (_label, extra, path) => {
    const e = catalogError(() => validateTool(tool('a', { type: 'object', ...extra }), opts));
    expect(e.code).toBe(ErrorCode.SCHEMA_INVALID);
    if (path !== undefined) expect(e.detail.path).toBe(path);
  });

  it('refuses a $ref into a non-schema location that Ajv cannot compile, at validation time', () => {
    const schema = {
      type: 'object',
      'x-lib': { s: { type: 5 } },
      properties: { b: { $ref: '#/x-lib/s' } },
    };
    const e = catalogError(() => validateTool(tool('a', schema), opts));
    expect(e.code).toBe(ErrorCode.SCHEMA_INVALID);
    expect(e.message).toContain('cannot be compiled');
  });

  it('applies the same checks to outputSchema', () => {
    const schema = { type: 'object', properties: { a: { $ref: 'https://x/y' } } };
    const e = catalogError(() =>
      validateTool(tool('a', { type: 'object' }, { outputSchema: schema }), opts),
    );
    expect(e.code).toBe(ErrorCode.REMOTE_REF);
    expect(e.detail.path).toBe('/outputSchema/properties/a/$ref');
  });

  it('accepts a legacy "id" keyword and unknown formats, which Ajv would otherwise refuse', () => {
    const schema = {
      type: 'object',
      id: 'legacy',
      properties: { a: { type: 'string', format: 'weird' } },
    };
    const cache = new SchemaValidatorCache();
    const v = validateTool(tool('a', schema), { ...opts, validatorCache: cache });
    expect(cache.getValidator(v.inputSchema.digest).validate({ a: 'x' })).toEqual({ ok: true });
  });

  it('tells the user which server to fix', () => {
    const e = catalogError(() => validateTool(tool('a b', { type: 'object' }), { server: 'git' }));
    expect(e.message).toMatch(/server "git"/);
  });
});

describe('validateCatalog', () => {
  it('refuses duplicate names with DUPLICATE_TOOL_NAME and returns nothing', () => {
    const e = catalogError(() =>
      validateCatalog([tool('a', { type: 'object' }), tool('a', { type: 'object' })], opts),
    );
    expect(e.code).toBe(ErrorCode.DUPLICATE_TOOL_NAME);
    expect(e.detail).toMatchObject({ tool: 'a', firstIndex: 0, index: 1 });
  });

  it('throws the first failure even when later tools are valid', () => {
    const e = catalogError(() =>
      validateCatalog(
        [tool('ok', { type: 'object' }), tool('bad name', { type: 'object' }), tool('z', 1)],
        opts,
      ),
    );
    expect(e.code).toBe(ErrorCode.INVALID_TOOL_NAME);
    expect(e.detail.toolIndex).toBe(1);
  });

  it('returns every tool, frozen, when all are valid', () => {
    const tools = validateCatalog(
      [tool('a', { type: 'object' }), tool('b', { type: 'object' })],
      opts,
    );
    expect(tools.map((t) => t.name)).toEqual(['a', 'b']);
    expect(Object.isFrozen(tools)).toBe(true);
  });
});

describe('schema nesting budget', () => {
  const nested = (levels: number): unknown => {
    let deep: unknown = { type: 'string' };
    for (let i = 0; i < levels; i++) deep = { not: deep };
    return { type: 'object', properties: { deep } };
  };

  it('accepts a schema nested within the budget', () => {
    expect(validateTool(tool('ok', nested(40)), opts).name).toBe('ok');
  });

  it('refuses a schema nested deeper than the budget with SCHEMA_TOO_LARGE and the depth', () => {
    const error = catalogError(() => validateTool(tool('deep', nested(300)), opts));
    expect(error.code).toBe(ErrorCode.SCHEMA_TOO_LARGE);
    expect(error.detail['depth']).toBeGreaterThan(300);
    expect(error.detail['limit']).toBe(128);
  });

  it('refuses a schema thousands of levels deep with a typed error, not a stack overflow', () => {
    const error = catalogError(() => validateTool(tool('deeper', nested(20_000)), opts));
    expect(error.code).toBe(ErrorCode.SCHEMA_TOO_LARGE);
  });
});
