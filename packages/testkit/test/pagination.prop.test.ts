import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { Tally } from './support/tally.js';
import {
  discoverToolPages,
  isStepbindError,
  type ChangeFeed,
  type McpToolDefinition,
  type StepbindError,
  type ToolDiscovery,
} from '@stepbind/binding/internal';
import { parseConfig, type Connection } from '@stepbind/runtime';
import {
  arbCatalog,
  arbCursorCycle,
  arbPageSplit,
  createInMemoryFleet,
  pagedSource,
  propertyRun,
  type FixtureGeneration,
  type FixtureTrigger,
  type InMemoryFleet,
  type PageSplit,
} from '@stepbind/testkit';

type Outcome =
  | { readonly ok: true; readonly value: ToolDiscovery }
  | { readonly ok: false; readonly error: StepbindError };

/** Settles an enumeration; anything but a StepbindError rejection fails the property. */
async function settle(promise: Promise<ToolDiscovery>): Promise<Outcome> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    if (!isStepbindError(error)) throw error;
    return { ok: false, error };
  }
}

/** One catalog generation: its tools and how they are paged. */
interface Generation {
  readonly tools: readonly McpToolDefinition[];
  readonly split: PageSplit<McpToolDefinition>;
}

const arbGeneration = (maxTools: number, maxPages: number): fc.Arbitrary<Generation> =>
  arbCatalog({ maxTools }).chain((tools) =>
    arbPageSplit(tools, { maxPages }).map((split) => ({ tools, split })),
  );

/**
 * The next catalog after `prev`: unrelated tools, the same tools reordered and re-paged (so a
 * mixture of old and new pages repeats names), or the same names with edited definitions (so a
 * mixture keeps names unique and looks valid).
 */
function arbNextGeneration(prev: Generation, maxPages: number): fc.Arbitrary<Generation> {
  const resplit = (tools: readonly McpToolDefinition[]) =>
    arbPageSplit(tools, { maxPages }).map((split) => ({ tools, split }));
  return fc.oneof(
    arbGeneration(40, maxPages),
    fc
      .shuffledSubarray([...prev.tools], {
        minLength: prev.tools.length,
        maxLength: prev.tools.length,
      })
      .chain(resplit),
    fc
      .constant(prev.tools.map((t) => ({ ...t, description: `${t.description ?? ''} (edited)` })))
      .chain(resplit),
  );
}

/** A catalog that changes 1–2 times during an enumeration, at chosen request numbers. */
interface ChangePlan {
  readonly generations: readonly Generation[];
  /** `changeAt[i]`: the request (0-based) before whose answer generation i + 1 takes over. */
  readonly changeAt: readonly number[];
  /** Cursors "", "p2", "p3"… in every generation (old cursors keep working) or random ones. */
  readonly positional: boolean;
}

const arbChangePlan: fc.Arbitrary<ChangePlan> = arbGeneration(40, 8)
  .chain((g0) =>
    arbNextGeneration(g0, 8).chain((g1) =>
      fc.oneof(
        fc.constant([g0, g1]),
        arbNextGeneration(g1, 8).map((g2) => [g0, g1, g2]),
      ),
    ),
  )
  .chain((generations) =>
    fc.record({
      generations: fc.constant(generations),
      changeAt: fc
        .uniqueArray(fc.nat({ max: 12 }), {
          minLength: generations.length - 1,
          maxLength: generations.length - 1,
        })
        .map((at) => [...at].sort((a, b) => a - b)),
      positional: fc.boolean(),
    }),
  );

const cursorsOf = (g: Generation, positional: boolean): readonly string[] =>
  positional ? g.split.cursors.map((_, i) => (i === 0 ? '' : `p${i + 1}`)) : g.split.cursors;

/** True when `result` is generation `g`, whole: the same tool objects, in order, on the same pages. */
function isComplete(result: ToolDiscovery, g: Generation | undefined): boolean {
  return (
    g !== undefined &&
    g.tools.length === result.tools.length &&
    g.tools.every((tool, i) => tool === result.tools[i]) &&
    g.split.pages.length === result.pageSizes.length &&
    g.split.pages.every((page, i) => page.length === result.pageSizes[i])
  );
}

/**
 * Runs one enumeration against a {@link pagedSource} that switches generations at the planned
 * requests, optionally bumping a ChangeFeed (a `list_changed`) and carrying revision tokens.
 */
async function enumerateDuringChanges(
  plan: ChangePlan,
  mode: { readonly announce: boolean; readonly revisions: boolean },
): Promise<{ outcome: Outcome; applied: number }> {
  const feed: { version: number } & ChangeFeed = { version: 0 };
  const revision = (g: number) => (mode.revisions ? { revision: `rev-${g}` } : {});
  const [g0] = plan.generations as [Generation];
  let applied = 0;
  const source = pagedSource(g0.split.pages, {
    cursors: cursorsOf(g0, plan.positional),
    ...revision(0),
    onRequest: ({ index, source: self }) => {
      while (applied < plan.changeAt.length && plan.changeAt[applied] === index) {
        applied++;
        const g = plan.generations[applied] as Generation;
        self.replace(g.split.pages, {
          cursors: cursorsOf(g, plan.positional),
          ...revision(applied),
        });
        // A well-behaved server sends list_changed before any answer computed from the new state.
        if (mode.announce) feed.version++;
      }
    },
  });
  const outcome = await settle(
    discoverToolPages(source, { server: 'prop', changes: feed, totalTimeoutMs: 10_000 }),
  );
  return { outcome, applied };
}

describe('pagination properties (in-process source)', () => {
  it('random catalogs of 0–500 tools, split at random (empty pages, "" cursors), enumerate exactly', async () => {
    const { seed, numRuns } = propertyRun('pagination: exact', 100);
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(
        arbGeneration(500, 40),
        fc.option(fc.string({ maxLength: 8 }), { nil: undefined }),
        async ({ tools, split }, revision) => {
          const source = pagedSource(split.pages, {
            cursors: split.cursors,
            ...(revision === undefined ? {} : { revision }),
          });
          const result = await discoverToolPages(source, { server: 'prop' });
          expect(result.tools).toHaveLength(tools.length);
          expect(result.tools.every((tool, i) => tool === tools[i])).toBe(true);
          expect(result.pageSizes).toEqual(split.pages.map((p) => p.length));
          expect(result.restarts).toBe(0);
          // Every cursor is sent exactly as issued, "" included; a revision on more than one page
          // adds one re-read of page 1 (a single response is atomic and needs none).
          const reread = revision === undefined || split.cursors.length === 0 ? [] : [undefined];
          expect(source.requests).toEqual([undefined, ...split.cursors, ...reread]);
          expect(result.revision).toEqual(
            revision === undefined ? { kind: 'unversioned' } : { kind: 'proven', revision },
          );
          tally.add(tools.length > 100 ? 'tools>100' : 'tools<=100');
          if (split.pages.some((p) => p.length === 0)) tally.add('empty-page');
          if (split.cursors.includes('')) tally.add('empty-cursor');
        },
      ),
      { seed, numRuns },
    );
    tally.print('pagination: exact');
    expect(tally.get('tools>100')).toBeGreaterThan(0);
  });

  it('random cursor cycles of any length are detected (CURSOR_REPEATED, or PAGE_LIMIT past maxPages) without sending a cursor twice', async () => {
    const { seed, numRuns } = propertyRun('pagination: cycles', 300);
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(
        arbCursorCycle({ maxPages: 150 }),
        fc.option(fc.integer({ min: 1, max: 120 }), { nil: undefined }),
        async (cycle, maxPages) => {
          const source = pagedSource(cycle.pages, { cursors: cycle.cursors });
          const outcome = await settle(
            discoverToolPages(source, {
              server: 'prop',
              totalTimeoutMs: 5_000,
              ...(maxPages === undefined ? {} : { maxPages }),
            }),
          );
          const n = cycle.pages.length;
          const limit = maxPages ?? 100;
          expect(outcome.ok).toBe(false);
          if (outcome.ok) return;
          expect(outcome.error.code).toBe(n <= limit ? 'CURSOR_REPEATED' : 'PAGE_LIMIT');
          expect(source.requests).toHaveLength(Math.min(n, limit));
          expect(new Set(source.requests).size).toBe(source.requests.length);
          tally.add(outcome.error.code);
          if (cycle.cycleLength === 1) tally.add('self-loop');
        },
      ),
      { seed, numRuns, timeout: 5_000 },
    );
    tally.print('pagination: cycles');
    expect(tally.get('CURSOR_REPEATED')).toBeGreaterThan(0);
  });

  it('catalog changes announced by list_changed end in the complete current catalog, never a mixture', async () => {
    const { seed, numRuns } = propertyRun('pagination: announced changes', 300);
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(arbChangePlan, fc.boolean(), async (plan, revisions) => {
        const { outcome, applied } = await enumerateDuringChanges(plan, {
          announce: true,
          revisions,
        });
        // At most two changes against a budget of three restarts: it must succeed, and since
        // every change was announced, with the catalog in force at the end, whole.
        if (!outcome.ok) throw outcome.error;
        expect(isComplete(outcome.value, plan.generations[applied])).toBe(true);
        expect(outcome.value.restarts).toBeLessThanOrEqual(applied);
        tally.add(applied === 0 ? 'unchanged' : 'new-catalog');
        if (outcome.value.restarts > 0) tally.add('restarted');
      }),
      { seed, numRuns, timeout: 10_000 },
    );
    tally.print('pagination: announced changes');
  });

  it('a silent change that keeps names unique is undetectable without a source revision (documented: the mixture is returned)', async () => {
    const tool = (name: string, description: string): McpToolDefinition => ({
      name,
      description,
      inputSchema: { type: 'object' },
    });
    const before = [[tool('a', 'v1')], [tool('b', 'v1')]];
    const after = [[tool('a', 'v2')], [tool('b', 'v2')]];
    const source = pagedSource(before, {
      cursors: ['', undefined],
      onRequest: ({ index, source: self }) => {
        if (index === 1) self.replace(after, { cursors: ['', undefined] });
      },
    });
    const result = await discoverToolPages(source, { changes: { version: 0 } });
    // Page 1 is from the old catalog, page 2 from the new one, and nothing can tell.
    expect(result.tools.map((t) => `${t.name}@${String(t.description)}`)).toEqual(['a@v1', 'b@v2']);
    expect(result.revision).toEqual({ kind: 'unversioned' });
    expect(result.restarts).toBe(0);
  });

  it('silent catalog changes are detected with the revision convention: a complete catalog proven at its revision, or a typed error', async () => {
    const { seed, numRuns } = propertyRun('pagination: silent changes with revisions', 300);
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(arbChangePlan, async (plan) => {
        const { outcome } = await enumerateDuringChanges(plan, {
          announce: false,
          revisions: true,
        });
        if (outcome.ok) {
          // Whichever generation it is, it is whole and proven at that generation's revision.
          const proof = outcome.value.revision;
          expect(proof.kind).toBe('proven');
          const g = proof.kind === 'proven' ? Number(proof.revision.slice('rev-'.length)) : -1;
          expect(isComplete(outcome.value, plan.generations[g])).toBe(true);
          tally.add(outcome.value.restarts > 0 ? 'ok:after-restart' : 'ok:first-traversal');
        } else {
          // Unannounced, a cursor the server no longer knows can only fail (-32602).
          expect(['REVISION_CHANGED', 'SERVER_ERROR']).toContain(outcome.error.code);
          if (outcome.error.code === 'SERVER_ERROR') {
            expect(outcome.error.detail.rpcCode).toBe(-32602);
          }
          tally.add(`error:${outcome.error.code}`);
        }
      }),
      { seed, numRuns, timeout: 10_000 },
    );
    tally.print('pagination: silent changes with revisions');
    expect(tally.get('ok:after-restart')).toBeGreaterThan(0);
  });
});

describe('pagination regressions (counterexamples found by the properties above)', () => {
  const tool = (name: string, description = ''): McpToolDefinition => ({
    name,
    description,
    inputSchema: { type: 'object' },
  });

  it('a page request that fails after list_changed restarts the enumeration instead of failing (stale cursor; found by "announced changes", seed 880761246)', async () => {
    const feed = { version: 0 };
    const next = [[tool('x')], [tool('y')]];
    const source = pagedSource([[tool('a')], [tool('b')]], {
      cursors: ['old', undefined],
      onRequest: ({ index, source: self }) => {
        if (index !== 1) return;
        // The server changes, announces it, and no longer knows the cursor it issued.
        self.replace(next, { cursors: ['new', undefined] });
        feed.version++;
      },
    });
    const result = await discoverToolPages(source, { changes: feed });
    expect(result.tools.map((t) => t.name)).toEqual(['x', 'y']);
    expect(result.restarts).toBe(1);
    expect(source.requests).toEqual([undefined, 'old', undefined, 'new']);
  });

  it('a page carrying a new revision restarts the traversal before its tools are checked against older pages (found by "silent changes with revisions", seed 2038556558)', async () => {
    // The same two tools, swapped between pages: page 2 of the new revision repeats page 1's name.
    const source = pagedSource([[tool('a')], [tool('b')]], {
      revision: 'rev-0',
      onRequest: ({ index, source: self }) => {
        if (index === 1) self.replace([[tool('b')], [tool('a')]], { revision: 'rev-1' });
      },
    });
    const result = await discoverToolPages(source);
    expect(result.tools.map((t) => t.name)).toEqual(['b', 'a']);
    expect(result.revision).toEqual({ kind: 'proven', revision: 'rev-1' });
    expect(result.restarts).toBe(1);
  });
});

/** Opens one scripted in-memory server as the runtime would (real SDK client and server). */
async function openSdk(
  fixture: {
    readonly generations: readonly FixtureGeneration[];
    readonly triggers?: readonly FixtureTrigger[];
  },
  fleets: InMemoryFleet[],
): Promise<{ fleet: InMemoryFleet; connection: Connection }> {
  const fleet = createInMemoryFleet({ s: { scenario: 'fixture', fixture } });
  fleets.push(fleet);
  const config = parseConfig(fleet.config()).servers.get('s');
  if (config === undefined) throw new Error('fleet config has no server "s"');
  const connection = await fleet.connect('s', config, { signal: new AbortController().signal });
  return { fleet, connection };
}

const fixturePages = (g: Generation, cursors: readonly string[]): FixtureGeneration['pages'] =>
  g.split.pages.map((tools, i) =>
    i < cursors.length ? { tools, nextCursor: cursors[i] } : { tools },
  );

describe('pagination properties (real SDK client and server, in memory)', () => {
  const fleets: InMemoryFleet[] = [];
  afterEach(async () => {
    for (const fleet of fleets.splice(0)) await fleet.close();
  });

  it('random catalogs and page splits enumerate exactly through the SDK, every cursor audited as sent', async () => {
    const { seed, numRuns } = propertyRun('pagination/sdk: exact', 30);
    await fc.assert(
      fc.asyncProperty(arbGeneration(200, 20), async (g) => {
        const { fleet, connection } = await openSdk(
          { generations: [{ pages: fixturePages(g, g.split.cursors) }] },
          fleets,
        );
        try {
          const result = await discoverToolPages(connection.listSource, {
            changes: connection.changes,
          });
          expect(result.tools).toEqual(g.tools);
          expect(result.pageSizes).toEqual(g.split.pages.map((p) => p.length));
          const sent = fleet.audit('s').filter((e) => e.method === 'tools/list');
          expect(sent.map((e) => e.cursor)).toEqual([null, ...g.split.cursors]);
        } finally {
          await connection.close();
        }
      }),
      { seed, numRuns },
    );
  });

  it('a change with list_changed during an SDK enumeration ends in one complete catalog, never a mixture', async () => {
    const { seed, numRuns } = propertyRun('pagination/sdk: announced changes', 60);
    const tally = new Tally();
    // Orderings where list_changed reaches the client no later than the first answer computed
    // from the new catalog (the ordering a JSON-RPC stream guarantees when the server notifies as
    // it changes). A server that answers from the new catalog before notifying is undetectable
    // without a revision, like a silent change.
    const orderings: readonly Pick<FixtureTrigger, 'stateChange' | 'notify'>[] = [
      { stateChange: 'before', notify: 'before' },
      { stateChange: 'after', notify: 'before' },
      { stateChange: 'after', notify: 'after' },
    ];
    await fc.assert(
      fc.asyncProperty(
        arbGeneration(40, 6).chain((g0) => fc.tuple(fc.constant(g0), arbNextGeneration(g0, 6))),
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom(...orderings),
        fc.boolean(),
        async ([g0, g1], nth, ordering, positional) => {
          const { connection } = await openSdk(
            {
              generations: [
                { pages: fixturePages(g0, cursorsOf(g0, positional)) },
                { pages: fixturePages(g1, cursorsOf(g1, positional)) },
              ],
              triggers: [{ on: { method: 'tools/list', nth }, setGeneration: 1, ...ordering }],
            },
            fleets,
          );
          try {
            const outcome = await settle(
              discoverToolPages(connection.listSource, {
                changes: connection.changes,
                totalTimeoutMs: 10_000,
              }),
            );
            // One change against three restarts: it must succeed, with one catalog, whole.
            if (!outcome.ok) throw outcome.error;
            const served = JSON.stringify([outcome.value.tools, outcome.value.pageSizes]);
            const complete = [g0, g1].findIndex(
              (g) => JSON.stringify([g.tools, g.split.pages.map((p) => p.length)]) === served,
            );
            expect(complete).toBeGreaterThanOrEqual(0);
            tally.add(complete === 0 ? 'old' : 'new');
            if (outcome.value.restarts > 0) tally.add('restarted');
          } finally {
            await connection.close();
          }
        },
      ),
      { seed, numRuns, timeout: 10_000 },
    );
    tally.print('pagination/sdk: announced changes');
  });
});
