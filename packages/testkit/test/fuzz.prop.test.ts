import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Tally } from './support/tally.js';
import {
  createCatalogSnapshot,
  discoverToolPages,
  isStepbindError,
  validateTool,
  type CatalogSnapshot,
} from '@stepbind/binding/internal';
import { McpRuntime } from '@stepbind/runtime';
import {
  arbListResult,
  arbNearValidTool,
  arbTool,
  createInMemoryFleet,
  propertyRun,
  scriptedTool,
  sequenceSource,
  type SequenceStep,
} from '@stepbind/testkit';

/** The arbitraries' full nesting range: validation refuses deep schemas with a typed error. */
const FUZZ_MAX_DEPTH = 20_000;

const RAW_NAME = /^[A-Za-z0-9._-]{1,128}$/;
const MODEL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Fails unless `error` is a StepbindError; returns its code. */
function typedCode(error: unknown): string {
  if (!isStepbindError(error)) {
    throw new Error(`not a StepbindError: ${String(error)}`, { cause: error });
  }
  return error.code;
}

/**
 * Everything a published catalog must be, checked without trusting the snapshot's own
 * bookkeeping: every tool valid on its own, names raw-valid and unique, model names valid and
 * unique, page sizes adding up, and everything frozen.
 */
function expectValidCatalog(snapshot: CatalogSnapshot, expectedTools: number): void {
  expect(Object.isFrozen(snapshot)).toBe(true);
  expect(Object.isFrozen(snapshot.tools)).toBe(true);
  expect(snapshot.tools).toHaveLength(expectedTools);
  expect(snapshot.pageSizes.reduce((a, b) => a + b, 0)).toBe(expectedTools);
  const names = new Set<string>();
  const modelNames = new Set<string>();
  for (const tool of snapshot.tools) {
    expect(tool.name).toMatch(RAW_NAME);
    expect(tool.modelName).toMatch(MODEL_NAME);
    expect(validateTool(tool.raw, { server: 'check' }).name).toBe(tool.name);
    const schema = tool.raw.inputSchema as unknown;
    expect(typeof schema === 'object' && schema !== null && !Array.isArray(schema)).toBe(true);
    expect((schema as { type?: unknown }).type).toBe('object');
    expect(snapshot.toolsByName.get(tool.name)).toBe(tool);
    names.add(tool.name);
    modelNames.add(tool.modelName);
  }
  expect(names.size).toBe(expectedTools);
  expect(modelNames.size).toBe(expectedTools);
}

const arbStep: fc.Arbitrary<SequenceStep> = fc.oneof(
  {
    weight: 14,
    arbitrary: arbListResult({ maxDepth: FUZZ_MAX_DEPTH }).map((value): SequenceStep => ({
      kind: 'result',
      value,
    })),
  },
  { weight: 1, arbitrary: fc.constant<SequenceStep>({ kind: 'hang' }) },
  {
    weight: 1,
    arbitrary: fc
      .oneof(
        fc.jsonValue({ maxDepth: 1 }),
        fc.string().map((m) => new TypeError(m)),
      )
      .map((value): SequenceStep => ({ kind: 'throw', value })),
  },
);

describe('fuzzing tools/list results (in-process source)', () => {
  it('arbitrary JSON and near-valid tools never crash, never hang, and never yield an invalid catalog', async () => {
    const { seed, numRuns } = propertyRun('fuzz: enumerate + snapshot', 400);
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(fc.array(arbStep, { minLength: 1, maxLength: 5 }), async (steps) => {
        const source = sequenceSource(steps);
        let enumeration;
        try {
          enumeration = await discoverToolPages(source, {
            server: 'fuzz',
            requestTimeoutMs: 20,
            totalTimeoutMs: 1_000,
          });
        } catch (error) {
          tally.add(`enumerate:${typedCode(error)}`);
          return;
        }
        // Discovery only checks shapes; validation must refuse the rest, all or nothing.
        let snapshot: CatalogSnapshot;
        try {
          snapshot = createCatalogSnapshot({
            identity: { name: 'fuzz', transportDigest: 'sha256:fuzz' },
            audience: 'default',
            policyEpoch: 0,
            pages: enumeration.pages,
            revisionProof: enumeration.revision.kind === 'proven' ? 'proven' : 'unversioned',
            ...(enumeration.revision.kind === 'proven'
              ? { sourceRevision: enumeration.revision.revision }
              : {}),
            discoveryStartedAt: enumeration.startedAt,
          });
        } catch (error) {
          tally.add(`snapshot:${typedCode(error)}`);
          return;
        }
        expectValidCatalog(snapshot, enumeration.tools.length);
        tally.add(snapshot.tools.length > 0 ? 'published:tools' : 'published:empty');
      }),
      { seed, numRuns, timeout: 5_000 },
    );
    tally.print('fuzz: enumerate + snapshot');
    expect(tally.get('published:tools')).toBeGreaterThan(0);
  });

  it('near-valid tools alone: validation accepts some and refuses the rest with a typed code', () => {
    const { seed, numRuns } = propertyRun('fuzz: validateTool', 500);
    const tally = new Tally();
    fc.assert(
      fc.property(arbNearValidTool({ maxDepth: FUZZ_MAX_DEPTH }), (tool) => {
        try {
          const valid = validateTool(tool, { server: 'fuzz' });
          expect(valid.name).toMatch(RAW_NAME);
          tally.add('valid');
        } catch (error) {
          tally.add(typedCode(error));
        }
      }),
      { seed, numRuns },
    );
    tally.print('fuzz: validateTool');
    expect(tally.get('valid')).toBeGreaterThan(0);
    expect(tally.get('REMOTE_REF') + tally.get('UNRESOLVED_REF')).toBeGreaterThan(0);
  });

  it('a schema nested 2,000 levels deep is refused with a typed error, not a stack overflow (was a RangeError)', () => {
    let deep: unknown = { type: 'string' };
    for (let i = 0; i < 2_000; i++) deep = { not: deep };
    const tool = { name: 'deep', inputSchema: { type: 'object', properties: { deep } } };
    let thrown: unknown;
    try {
      validateTool(tool, { server: 'fuzz' });
    } catch (error) {
      thrown = error;
    }
    expect(isStepbindError(thrown, 'SCHEMA_TOO_LARGE')).toBe(true);
  });
});

describe('fuzzing tools/list results (real SDK client and server, whole runtime)', () => {
  it('junk catalogs served by a scripted server never crash a hard refresh and never publish an invalid catalog', async () => {
    const { seed, numRuns } = propertyRun('fuzz/sdk: hard refresh', 100);
    const tally = new Tally();
    const fleet = createInMemoryFleet({
      s: {
        scenario: 'fixture',
        fixture: { generations: [{ pages: [{ tools: [scriptedTool('seed')] }] }] },
      },
    });
    const runtime = await McpRuntime.open(fleet.config({ s: { requestTimeoutMs: 2_000 } }), {
      connect: fleet.connect,
      approval: 'none',
    });
    try {
      const toolish = fc.oneof(
        { weight: 2, arbitrary: arbTool() },
        { weight: 3, arbitrary: arbNearValidTool({ maxDepth: FUZZ_MAX_DEPTH }) },
        { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
      );
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.array(toolish, { maxLength: 4 }), { minLength: 1, maxLength: 4 }),
          fc.option(fc.string({ maxLength: 4 }), { nil: undefined }),
          async (pages, revision) => {
            const before = runtime.status().servers[0];
            const published = runtime.registry.current('s', 'default');
            fleet.server('s').replaceCatalog(pages, revision === undefined ? {} : { revision });
            let changed: boolean | undefined;
            try {
              changed = await runtime.hardRefresh('s');
            } catch (error) {
              tally.add(`refused:${typedCode(error)}`);
            }
            const current = runtime.registry.current('s', 'default');
            if (current === undefined) throw new Error('the runtime lost its catalog');
            if (changed !== true) {
              // Refused or unchanged: the previous catalog keeps serving, same revision.
              expect(current).toBe(published);
              expect(runtime.status().servers[0]?.revision).toBe(before?.revision);
            } else {
              tally.add('published');
            }
            expectValidCatalog(current, current.tools.length);
            await using binding = await runtime.captureBinding();
            for (const tool of binding.tools) {
              expect(tool.name).toMatch(MODEL_NAME);
              expect(binding.prepareCall(tool.name).server).toBe('s');
            }
            expect(binding.tools).toHaveLength(current.tools.length);
          },
        ),
        { seed, numRuns, timeout: 10_000 },
      );
    } finally {
      await runtime.close();
      await fleet.close();
    }
    tally.print('fuzz/sdk: hard refresh');
    // Nothing reached the server but initialize and listings.
    expect(
      fleet.audit('s').filter((e) => e.method !== 'tools/list' && !e.method.includes('initialize')),
    ).toEqual([]);
  });
});
