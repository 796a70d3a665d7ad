import { describe, expect, it } from 'vitest';
import {
  CATALOG_TRANSITIONS,
  CatalogError,
  CatalogState,
  DiscoveryTracker,
  classifyRevisions,
  isLegalTransition,
  transition,
} from '@stepbind/binding/internal';

const all = Object.values(CatalogState);
const legal: readonly [CatalogState, CatalogState][] = [
  ['DISCOVERING', 'VALIDATING'],
  ['DISCOVERING', 'INCOMPLETE'],
  ['DISCOVERING', 'QUARANTINED'],
  ['VALIDATING', 'SNAPSHOT_PROVEN'],
  ['VALIDATING', 'UNVERSIONED_OBSERVATION'],
  ['VALIDATING', 'QUARANTINED'],
  ['SNAPSHOT_PROVEN', 'ELIGIBLE'],
  ['SNAPSHOT_PROVEN', 'RETIRED'],
  ['UNVERSIONED_OBSERVATION', 'RETIRED'],
  ['ELIGIBLE', 'RETIRED'],
  ['INCOMPLETE', 'DISCOVERING'],
];

describe('catalog state machine', () => {
  it('allows exactly the documented transitions', () => {
    const table = all.flatMap((from) => CATALOG_TRANSITIONS[from].map((to) => [from, to]));
    expect(table.sort()).toEqual([...legal].map((p) => [...p]).sort());
  });

  it.each(legal)('allows %s → %s', (from, to) => {
    expect(transition(from, to)).toBe(to);
  });

  it('refuses every other move with a CatalogError', () => {
    for (const from of all) {
      for (const to of all) {
        if (legal.some(([f, t]) => f === from && t === to)) continue;
        expect(isLegalTransition(from, to)).toBe(false);
        expect(() => transition(from, to)).toThrow(CatalogError);
      }
    }
  });

  it('never lets an unversioned catalog become ELIGIBLE', () => {
    expect(isLegalTransition('UNVERSIONED_OBSERVATION', 'ELIGIBLE')).toBe(false);
  });

  it('records the path of a discovery that restarts, then is proven and published', () => {
    const t = new DiscoveryTracker();
    t.to('INCOMPLETE').to('DISCOVERING').to('VALIDATING').to('SNAPSHOT_PROVEN').to('ELIGIBLE');
    expect(t.state).toBe('ELIGIBLE');
    expect(t.path).toEqual([
      'DISCOVERING',
      'INCOMPLETE',
      'DISCOVERING',
      'VALIDATING',
      'SNAPSHOT_PROVEN',
      'ELIGIBLE',
    ]);
  });

  it('leaves the tracker unchanged after an illegal move', () => {
    const t = new DiscoveryTracker();
    expect(() => t.to('ELIGIBLE')).toThrow(CatalogError);
    expect(t.state).toBe('DISCOVERING');
    expect(t.path).toEqual(['DISCOVERING']);
  });
});

describe('classifyRevisions', () => {
  it('proves a catalog whose pages and re-read all carry the same revision', () => {
    expect(classifyRevisions(['r1', 'r1', 'r1'], 'r1')).toEqual({
      state: 'SNAPSHOT_PROVEN',
      revision: 'r1',
    });
  });

  it('proves a single page without a re-read', () => {
    expect(classifyRevisions(['r1'], 'not-read')).toEqual({
      state: 'SNAPSHOT_PROVEN',
      revision: 'r1',
    });
  });

  it('cannot prove several pages without the re-read', () => {
    expect(classifyRevisions(['r1', 'r1'], 'not-read')).toEqual({
      state: 'UNVERSIONED_OBSERVATION',
    });
  });

  it('observes a catalog without revisions as unversioned', () => {
    expect(classifyRevisions([undefined, undefined], undefined)).toEqual({
      state: 'UNVERSIONED_OBSERVATION',
    });
    expect(classifyRevisions([undefined], 'not-read')).toEqual({
      state: 'UNVERSIONED_OBSERVATION',
    });
  });

  it.each([
    [['r1', 'r2', 'r2'], 'r2', 'revision-changed', 1],
    [['r1', undefined, 'r1'], 'r1', 'revision-missing', 1],
    [[undefined, 'r1'], 'r1', 'revision-missing', 0],
    [['r1', 'r1'], 'r2', 'reread-changed', -1],
    [['r1', 'r1'], undefined, 'reread-missing', -1],
    [[undefined, undefined], 'r1', 'revision-appeared', -1],
  ] as const)(
    'pages %j with re-read %j are INCOMPLETE (%s)',
    (pages, reread, reason, pageIndex) => {
      expect(classifyRevisions(pages, reread)).toEqual({ state: 'INCOMPLETE', reason, pageIndex });
    },
  );
});
