import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  CatalogError,
  SchemaValidatorCache,
  canonicalJson,
  computeTransportDigest,
  createCatalogSnapshot,
  createSnapshotBuilder,
  digestOf,
  effectClassOf,
  withGeneration,
  type CatalogSnapshot,
  type CreateCatalogSnapshotInput,
} from '@stepbind/binding/internal';

interface Golden {
  readonly digests: readonly {
    readonly name: string;
    readonly input: unknown;
    readonly canonical: string;
    readonly digest: string;
  }[];
  readonly snapshot: {
    readonly input: { readonly transportSettings: object; readonly pages: unknown[][] };
    readonly expected: {
      readonly transportDigest: string;
      readonly pageRoot: string;
      readonly pageSizes: readonly number[];
      readonly tools: readonly Record<string, unknown>[];
    };
  };
}

const goldenPath = fileURLToPath(new URL('./fixtures/golden/digests.json', import.meta.url));
const golden = JSON.parse(readFileSync(goldenPath, 'utf8')) as Golden;
const sha = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

const readFile = {
  name: 'read_file',
  description: 'Read a file.',
  inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  annotations: { readOnlyHint: true },
};

function input(
  pages: unknown[][],
  extra: Partial<CreateCatalogSnapshotInput> = {},
): CreateCatalogSnapshotInput {
  return {
    identity: { name: 'files', transportDigest: computeTransportDigest({ command: 'node' }) },
    audience: 'default',
    policyEpoch: 1,
    pages,
    revisionProof: 'unversioned',
    discoveryStartedAt: 1_000,
    ...extra,
  };
}

describe('digests', () => {
  it('are equal for objects whose keys are in a different order', () => {
    const a = { name: 'x', inputSchema: { type: 'object', properties: { b: {}, a: {} } } };
    const b = { inputSchema: { properties: { a: {}, b: {} }, type: 'object' }, name: 'x' };
    expect(digestOf(a)).toBe(digestOf(b));
    const [sa, sb] = [createCatalogSnapshot(input([[a]])), createCatalogSnapshot(input([[b]]))];
    expect(sa.tools[0]?.descriptorDigest).toBe(sb.tools[0]?.descriptorDigest);
    expect(sa.pageRoot).toBe(sb.pageRoot);
  });

  it('match the checked-in golden vectors', () => {
    for (const v of golden.digests) {
      expect(canonicalJson(v.input), v.name).toBe(v.canonical);
      expect(digestOf(v.input), v.name).toBe(v.digest);
      expect(v.digest, v.name).toBe(`sha256:${sha(v.canonical)}`);
    }
    const reordered = golden.digests.find((v) => v.name === 'reordered keys A');
    expect(reordered?.canonical).toBe('{"a":[true,null,"x"],"b":1,"c":{"y":2,"z":1}}');
  });

  it('match the golden snapshot: descriptor digests, model names, effect classes and page root', () => {
    const { input: gi, expected } = golden.snapshot;
    const snapshot = createCatalogSnapshot(
      input(gi.pages, {
        identity: { name: 'files', transportDigest: computeTransportDigest(gi.transportSettings) },
      }),
    );
    expect(snapshot.identity.transportDigest).toBe(expected.transportDigest);
    expect(snapshot.pageRoot).toBe(expected.pageRoot);
    expect(snapshot.pageSizes).toEqual(expected.pageSizes);
    expect(
      snapshot.tools.map((t) => ({
        name: t.name,
        modelName: t.modelName,
        descriptorDigest: t.descriptorDigest,
        inputSchemaDigest: t.inputSchemaDigest,
        effectClass: t.effectClass,
      })),
    ).toEqual(expected.tools);
  });

  it('compute the page root as sha256 over the ordered page digests', () => {
    const pages = golden.snapshot.input.pages;
    const hex = pages.map((p) => digestOf(p).slice('sha256:'.length)).join('');
    expect(createCatalogSnapshot(input(pages)).pageRoot).toBe(`sha256:${sha(hex)}`);
  });

  it('are identical in a separate node process importing the compiled package', () => {
    const dist = fileURLToPath(new URL('../dist/internal.js', import.meta.url));
    expect(existsSync(dist), 'run `npx tsc -b` first').toBe(true);
    const script = `
      const b = await import(${JSON.stringify(dist)});
      const golden = JSON.parse(require('node:fs').readFileSync(${JSON.stringify(goldenPath)}, 'utf8'));
      const s = b.createCatalogSnapshot({
        identity: { name: 'files', transportDigest: b.computeTransportDigest(golden.snapshot.input.transportSettings) },
        audience: 'default', policyEpoch: 1, revisionProof: 'unversioned', discoveryStartedAt: 0,
        pages: golden.snapshot.input.pages,
      });
      console.log(JSON.stringify({
        digests: golden.digests.map((v) => b.digestOf(v.input)),
        pageRoot: s.pageRoot,
        tools: s.tools.map((t) => t.descriptorDigest),
      }));`;
    const out = execFileSync(
      process.execPath,
      ['--input-type=commonjs', '-e', `(async () => {${script}})()`],
      {
        encoding: 'utf8',
      },
    );
    const child = JSON.parse(out) as { digests: string[]; pageRoot: string; tools: string[] };
    expect(child.digests).toEqual(golden.digests.map((v) => digestOf(v.input)));
    expect(child.pageRoot).toBe(golden.snapshot.expected.pageRoot);
    expect(child.tools).toEqual(golden.snapshot.expected.tools.map((t) => t.descriptorDigest));
  });

  it('of each descriptor equal digestOf(raw), including output schemas and unknown members', () => {
    const raw = {
      name: 'z',
      title: 'Zed',
      inputSchema: { type: 'object' },
      outputSchema: { type: 'object', properties: { n: { type: 'number' } } },
      _meta: { 'x.y/z': [1, 'two'] },
      skipped: undefined,
    };
    const d = createCatalogSnapshot(input([[raw]])).tools[0];
    expect(d?.descriptorDigest).toBe(digestOf(raw));
    expect(d?.outputSchemaDigest).toBe(digestOf(raw.outputSchema));
    expect(d?.inputSchemaDigest).toBe(digestOf(raw.inputSchema));
  });
});

describe('createCatalogSnapshot', () => {
  it('carries every field of toolCatalogSnapshot.v1', () => {
    const s = createCatalogSnapshot(
      input([[readFile], []], {
        revisionProof: 'proven',
        sourceRevision: 'rev-7',
        ttlMs: 500,
        identity: {
          name: 'files',
          transportDigest: 'sha256:t',
          serverInfo: { name: 'fs', version: '1.0.0' },
          protocolVersion: '2025-06-18',
        },
      }),
    );
    expect(s).toMatchObject({
      schema: 'toolCatalogSnapshot.v1',
      audience: 'default',
      policyEpoch: 1,
      generation: 0,
      sourceRevision: 'rev-7',
      discoveryStartedAt: 1_000,
      expiresAt: 1_500,
      pageSizes: [1, 0],
      state: 'SNAPSHOT_PROVEN',
    });
    expect(s.identity).toEqual({
      name: 'files',
      transportDigest: 'sha256:t',
      serverInfo: { name: 'fs', version: '1.0.0' },
      protocolVersion: '2025-06-18',
    });
    expect(s.toolsByName.get('read_file')).toBe(s.tools[0]);
  });

  it('marks a catalog without proof UNVERSIONED_OBSERVATION and drops its revision', () => {
    const s = createCatalogSnapshot(input([[readFile]], { sourceRevision: 'r' }));
    expect(s.state).toBe('UNVERSIONED_OBSERVATION');
    expect(s.sourceRevision).toBeUndefined();
  });

  it('refuses a proven catalog without a source revision', () => {
    expect(() => createCatalogSnapshot(input([[readFile]], { revisionProof: 'proven' }))).toThrow(
      CatalogError,
    );
  });

  it('refuses a name duplicated across pages and publishes nothing', () => {
    expect(() => createCatalogSnapshot(input([[readFile], [readFile]]))).toThrow(
      expect.objectContaining({ code: 'DUPLICATE_TOOL_NAME' }) as Error,
    );
  });

  it('quotes the page index of an invalid tool', () => {
    try {
      createCatalogSnapshot(
        input([[readFile], [{ name: 'bad name', inputSchema: { type: 'object' } }]]),
      );
      expect.unreachable();
    } catch (error) {
      expect((error as CatalogError).detail).toMatchObject({ pageIndex: 1, toolIndex: 0 });
    }
  });

  it('leaves the input of a refused catalog unfrozen', () => {
    const first = structuredClone(readFile);
    const bad = {
      name: 'bad',
      inputSchema: { type: 'object', properties: { a: { $ref: 'http://x/s' } } },
    };
    expect(() => createCatalogSnapshot(input([[first], [bad]]))).toThrow(CatalogError);
    expect(Object.isFrozen(first)).toBe(false);
    expect(Object.isFrozen(first.inputSchema)).toBe(false);
    expect(Object.isFrozen(bad)).toBe(false);
  });

  it('finds every tool by name, in catalog order, when two names sanitise alike', () => {
    const s = createCatalogSnapshot(
      input([[{ name: 'a.b', inputSchema: { type: 'object' } }], [{ ...readFile, name: 'a_b' }]]),
    );
    expect([...s.toolsByName.keys()]).toEqual(['a.b', 'a_b']);
    expect(s.toolsByName.get('a.b')).toBe(s.tools[0]);
    expect(s.toolsByName.get('a_b')).toBe(s.tools[1]);
    expect(s.toolsByName.has('a-b')).toBe(false);
    expect([...s.toolsByName.values()]).toEqual(s.tools);
    expect(new Set(s.tools.map((t) => t.modelName)).size).toBe(2);
  });

  it('refuses a duplicate of a name whose sanitised form another name took first', () => {
    const t = (name: string): unknown => ({ name, inputSchema: { type: 'object' } });
    expect(() => createCatalogSnapshot(input([[t('a.b'), t('a_b')], [t('a_b')]]))).toThrow(
      expect.objectContaining({
        code: 'DUPLICATE_TOOL_NAME',
        detail: expect.objectContaining({ tool: 'a_b', firstIndex: 1, index: 2, pageIndex: 1 }),
      }) as Error,
    );
  });

  it('digests a tool whose schema is inherited exactly like digestOf', () => {
    const schema = { type: 'object', properties: { p: { type: 'string' } } };
    const raw = Object.assign(Object.create({ inputSchema: schema }) as object, { name: 'inh' });
    const d = createCatalogSnapshot(input([[raw]])).tools[0];
    expect(d?.descriptorDigest).toBe(digestOf(raw));
    expect(d?.inputSchemaDigest).toBe(digestOf(schema));
  });

  it('shares one validator cache: a refresh of the same catalog re-checks nothing', () => {
    const cache = new SchemaValidatorCache();
    createCatalogSnapshot(input([[readFile]], { validatorCache: cache }));
    const before = cache.stats().metaValidations;
    createCatalogSnapshot(input([[structuredClone(readFile)]], { validatorCache: cache }));
    expect(cache.stats().metaValidations).toBe(before);
  });

  it('gives descriptors validators for arguments and structured output', () => {
    const s = createCatalogSnapshot(
      input([
        [
          { ...readFile, outputSchema: { type: 'object', required: ['text'] } },
          { name: 'x', inputSchema: { type: 'object' } },
        ],
      ]),
    );
    const [withOut, without] = s.tools;
    expect(withOut?.inputValidator().validate({ path: 'a' })).toEqual({ ok: true });
    expect(withOut?.inputValidator().validate({ path: 1 }).ok).toBe(false);
    expect(withOut?.outputValidator()?.validate({}).ok).toBe(false);
    expect(without?.outputValidator()).toBeUndefined();
  });
});

describe('immutability', () => {
  const s = createCatalogSnapshot(input([[readFile]]));

  it('throws on assignment to the snapshot, its arrays and descriptors', () => {
    expect(() => {
      (s as { generation: number }).generation = 9;
    }).toThrow(TypeError);
    expect(() => {
      (s.tools as unknown[]).push({});
    }).toThrow(TypeError);
    expect(() => {
      (s.pageSizes as number[])[0] = 5;
    }).toThrow(TypeError);
    expect(() => {
      (s.tools[0] as { modelName: string }).modelName = 'x';
    }).toThrow(TypeError);
    expect(() => {
      (s.identity as { name: string }).name = 'x';
    }).toThrow(TypeError);
  });

  it('deep-freezes raw definitions, so digests cannot drift', () => {
    const raw = s.tools[0]?.raw as unknown as {
      inputSchema: { properties: Record<string, unknown> };
    };
    expect(() => {
      raw.inputSchema.properties.extra = {};
    }).toThrow(TypeError);
    expect(digestOf(raw)).toBe(s.tools[0]?.descriptorDigest);
  });

  it('deep-freezes every object of a definition, inside arrays and nested arrays too', () => {
    const nested = {
      name: 'nested',
      inputSchema: {
        type: 'object',
        properties: {
          pick: {
            anyOf: [{ type: 'string' }, { type: 'object', properties: { a: { type: 'number' } } }],
          },
          grid: { type: 'array', prefixItems: [{ type: 'array', items: { type: 'integer' } }] },
          mode: { enum: [{ kind: 'fast' }, [{ kind: 'deep' }], 'plain'] },
        },
      },
      _meta: { tags: [[{ label: 'a' }], { label: 'b' }] },
    };
    const built = createCatalogSnapshot(input([[structuredClone(nested)]]));
    // An independent walk: every object and array reachable through values is frozen.
    const unfrozen: string[] = [];
    const walk = (value: unknown, path: string): void => {
      if (typeof value !== 'object' || value === null) return;
      if (!Object.isFrozen(value)) unfrozen.push(path || '/');
      for (const [key, member] of Object.entries(value)) walk(member, `${path}/${key}`);
    };
    walk(built.tools[0]?.raw, '');
    expect(unfrozen).toEqual([]);
    expect(digestOf(built.tools[0]?.raw)).toBe(digestOf(nested));
  });

  it('offers no way to mutate toolsByName', () => {
    expect((s.toolsByName as unknown as { set?: unknown }).set).toBeUndefined();
    expect((s.toolsByName as unknown as { delete?: unknown }).delete).toBeUndefined();
  });

  it('withGeneration copies without re-validating and shares the tools', () => {
    const published = withGeneration(s, 3, 'ELIGIBLE');
    expect(published.generation).toBe(3);
    expect(published.tools).toBe(s.tools);
    expect(Object.isFrozen(published)).toBe(true);
    expect(s.generation).toBe(0);
  });
});

describe('effect class', () => {
  it.each([
    [undefined, 'unknown'],
    [null, 'unknown'],
    [{}, 'destructive'],
    [{ readOnlyHint: true }, 'read'],
    [{ readOnlyHint: true, destructiveHint: true }, 'read'],
    [{ readOnlyHint: false }, 'destructive'],
    [{ destructiveHint: false }, 'write'],
    [{ readOnlyHint: false, destructiveHint: false }, 'write'],
    [{ destructiveHint: true }, 'destructive'],
    [{ readOnlyHint: 'true' }, 'destructive'],
  ])('annotations %j give %s', (annotations, expected) => {
    expect(effectClassOf(annotations === undefined ? {} : { annotations })).toBe(expected);
  });
});

describe('createSnapshotBuilder', () => {
  const options = (extra: Partial<CreateCatalogSnapshotInput> = {}) => {
    const { pages: _pages, ...rest } = input([], extra);
    return rest;
  };
  const summary = (s: CatalogSnapshot) => ({
    pageRoot: s.pageRoot,
    pageSizes: s.pageSizes,
    state: s.state,
    expiresAt: s.expiresAt,
    tools: s.tools.map((t) => ({
      name: t.name,
      modelName: t.modelName,
      descriptorDigest: t.descriptorDigest,
      inputSchemaDigest: t.inputSchemaDigest,
      outputSchemaDigest: t.outputSchemaDigest,
      effectClass: t.effectClass,
    })),
  });

  it('builds page by page exactly the snapshot createCatalogSnapshot builds (golden pages)', () => {
    const pages = golden.snapshot.input.pages;
    const builder = createSnapshotBuilder(options());
    pages.forEach((page, i) => builder.addPage(structuredClone(page), i));
    const built = builder.finish({ revisionProof: 'unversioned', discoveryStartedAt: 1_000 });
    expect(summary(built)).toEqual(summary(createCatalogSnapshot(input(pages))));
    expect(built.pageRoot).toBe(golden.snapshot.expected.pageRoot);
    expect(Object.isFrozen(built.tools[0]?.raw)).toBe(true);
  });

  it('forgets the pages of a restarted traversal on reset', () => {
    const builder = createSnapshotBuilder(options());
    builder.addPage([structuredClone(readFile)], 0);
    builder.reset();
    builder.addPage([structuredClone(readFile)], 0);
    const built = builder.finish({ revisionProof: 'unversioned', discoveryStartedAt: 1_000 });
    expect(built.pageSizes).toEqual([1]);
    expect(built.tools.map((t) => t.name)).toEqual(['read_file']);
  });

  it('stays failed after a refused page, leaves the pages unfrozen, and recovers on reset', () => {
    const builder = createSnapshotBuilder(options());
    const first = structuredClone(readFile);
    builder.addPage([first], 0);
    expect(() => builder.addPage([structuredClone(readFile)], 1)).toThrow(
      expect.objectContaining({ code: 'DUPLICATE_TOOL_NAME' }) as Error,
    );
    expect(() =>
      builder.finish({ revisionProof: 'unversioned', discoveryStartedAt: 1_000 }),
    ).toThrow(expect.objectContaining({ code: 'DUPLICATE_TOOL_NAME' }) as Error);
    expect(Object.isFrozen(first)).toBe(false);
    builder.reset();
    builder.addPage([first], 0);
    expect(
      builder.finish({ revisionProof: 'unversioned', discoveryStartedAt: 1 }).tools,
    ).toHaveLength(1);
  });

  it('refuses a page added out of order', () => {
    const builder = createSnapshotBuilder(options());
    expect(() => builder.addPage([readFile], 1)).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTIONS' }) as Error,
    );
  });

  it('refuses a proven finish without a source revision', () => {
    const builder = createSnapshotBuilder(options());
    builder.addPage([structuredClone(readFile)], 0);
    expect(() => builder.finish({ revisionProof: 'proven', discoveryStartedAt: 1 })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTIONS' }) as Error,
    );
  });
});
