import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CATALOG_REVISION_META_KEY,
  discoverToolPages,
  isStepbindError,
  validateTool,
} from '@stepbind/binding/internal';
import {
  arbCatalog,
  arbCursorCycle,
  arbPageSplit,
  arbTool,
  arbToolName,
  pagedSource,
  propertyRun,
  sequenceSource,
} from '@stepbind/testkit';

const params = (label: string, numRuns: number) => propertyRun(`arbitraries: ${label}`, numRuns);

describe('arbitraries generate what they promise', () => {
  it('arbToolName only produces names matching ^[A-Za-z0-9._-]{1,128}$', () => {
    fc.assert(
      fc.property(arbToolName(), (name) => {
        expect(name).toMatch(/^[A-Za-z0-9._-]{1,128}$/);
      }),
      params('arbToolName', 500),
    );
  });

  it('arbTool only produces tools that pass validateTool', () => {
    fc.assert(
      fc.property(arbTool(), (tool) => {
        expect(validateTool(tool, { server: 'arb' }).name).toBe(tool.name);
      }),
      params('arbTool', 300),
    );
  });

  it('arbCatalog produces unique names within its bounds, and reaches large sizes', () => {
    const sizes: number[] = [];
    fc.assert(
      fc.property(arbCatalog({ minTools: 3, maxTools: 120 }), (tools) => {
        sizes.push(tools.length);
        expect(tools.length).toBeGreaterThanOrEqual(3);
        expect(tools.length).toBeLessThanOrEqual(120);
        expect(new Set(tools.map((t) => t.name)).size).toBe(tools.length);
      }),
      params('arbCatalog', 60),
    );
    expect(Math.max(...sizes)).toBeGreaterThan(10);
  });

  it('arbPageSplit concatenates back to the catalog, with unique cursors, one per page boundary', () => {
    let emptyPages = 0;
    let emptyCursors = 0;
    fc.assert(
      fc.property(
        fc
          .array(fc.nat(), { maxLength: 30 })
          .chain((items) =>
            arbPageSplit(items, { maxPages: 12 }).map((split) => ({ items, split })),
          ),
        ({ items, split }) => {
          expect(split.pages.flat()).toEqual(items);
          expect(split.pages.length).toBeLessThanOrEqual(12);
          expect(split.cursors).toHaveLength(split.pages.length - 1);
          expect(new Set(split.cursors).size).toBe(split.cursors.length);
          emptyPages += split.pages.filter((p) => p.length === 0).length;
          emptyCursors += split.cursors.filter((c) => c === '').length;
        },
      ),
      params('arbPageSplit', 200),
    );
    expect(emptyPages).toBeGreaterThan(0);
    expect(emptyCursors).toBeGreaterThan(0);
  });

  it('arbCursorCycle ends on a cursor issued earlier, and covers self-loops and long loops', () => {
    const lengths = new Set<number>();
    fc.assert(
      fc.property(arbCursorCycle({ maxPages: 30 }), (cycle) => {
        const n = cycle.pages.length;
        expect(cycle.cursors).toHaveLength(n);
        expect(new Set(cycle.cursors.slice(0, -1)).size).toBe(n - 1);
        expect(cycle.cursors[n - 1]).toBe(cycle.cursors[cycle.loopFrom]);
        expect(cycle.cycleLength).toBe(n - 1 - cycle.loopFrom);
        const names = cycle.pages.flat().map((t) => t.name);
        expect(new Set(names).size).toBe(names.length);
        lengths.add(cycle.cycleLength);
      }),
      params('arbCursorCycle', 300),
    );
    expect(lengths.has(1)).toBe(true);
    expect(Math.max(...lengths)).toBeGreaterThan(5);
  });
});

describe('pagedSource', () => {
  const tool = (name: string) => ({ name, inputSchema: { type: 'object' } });

  it('serves pages in order, sends "" as a cursor, and carries the revision on every page', async () => {
    const source = pagedSource([[tool('a')], [], [tool('b')]], {
      cursors: ['', 'x'],
      revision: 'r1',
    });
    const result = await discoverToolPages(source);
    expect(result.tools.map((t) => t.name)).toEqual(['a', 'b']);
    expect(result.pageSizes).toEqual([1, 0, 1]);
    expect(result.revision).toEqual({ kind: 'proven', revision: 'r1' });
    expect(source.requests).toEqual([undefined, '', 'x', undefined]);
  });

  it('answers an unknown cursor with SERVER_ERROR -32602, as a real server would', async () => {
    const source = pagedSource([[tool('a')], [tool('b')]]);
    const error: unknown = await source
      .listTools({
        cursor: 'nope',
        signal: new AbortController().signal,
        timeoutMs: 10,
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isStepbindError(error, 'SERVER_ERROR')).toBe(true);
    expect((error as { detail: { rpcCode: number } }).detail.rpcCode).toBe(-32602);
  });

  it('lets onRequest replace the catalog before the answer is computed', async () => {
    const source = pagedSource([[tool('a')], [tool('b')]], {
      onRequest: ({ index, source: self }) => {
        if (index === 1) self.replace([[tool('c')], [tool('d')]]);
      },
    });
    // Positional cursors ("c1") survive the replacement, so the mixture a, d is served.
    const result = await discoverToolPages(source);
    expect(result.tools.map((t) => t.name)).toEqual(['a', 'd']);
    expect(source.generation).toBe(1);
  });

  it('rejects inconsistent page graphs', () => {
    expect(() => pagedSource([])).toThrow(RangeError);
    expect(() => pagedSource([[], []], { cursors: ['x'], targets: [5] })).toThrow(RangeError);
    expect(() => pagedSource([[], [], []], { cursors: ['x', 'x'], targets: [1, 2] })).toThrow(
      /leads to page 1 and to page 2/,
    );
  });
});

describe('sequenceSource', () => {
  it('answers by request number, ends with an empty page, and lets the loop time out a hang', async () => {
    const source = sequenceSource([
      { kind: 'result', value: { tools: [], nextCursor: 'n' } },
      { kind: 'hang' },
    ]);
    const error: unknown = await discoverToolPages(source, { requestTimeoutMs: 20 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isStepbindError(error, 'TIMEOUT')).toBe(true);
    expect(source.requests).toEqual([undefined, 'n']);
  });

  it('maps a thrown non-stepbind value to SERVER_ERROR', async () => {
    const source = sequenceSource([{ kind: 'throw', value: 42 }]);
    const error: unknown = await discoverToolPages(source).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isStepbindError(error, 'SERVER_ERROR')).toBe(true);
  });

  it('serves raw results as-is, revision _meta included', async () => {
    const source = sequenceSource([
      {
        kind: 'result',
        value: { tools: [], _meta: { [CATALOG_REVISION_META_KEY]: 'r' } },
      },
      { kind: 'result', value: { tools: [], _meta: { [CATALOG_REVISION_META_KEY]: 'r' } } },
    ]);
    const result = await discoverToolPages(source);
    expect(result.revision).toEqual({ kind: 'proven', revision: 'r' });
  });
});
