/**
 * The BM25 index behind tool search, checked against the formulas written out here (BM25+ per
 * field with k 1.2, b 0.7, δ 0.5, prefix and fuzzy weights, the matched-terms multiplier) and its
 * edit distance against a plain Levenshtein table, on generated words (seed printed by fast-check).
 */
import { editDistance, TermIndexBuilder } from '@stepbind/binding/internal';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const seed = Number(process.env['STEPBIND_SEED'] ?? Date.now());
console.log(`search-index: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

const word = (w: string): string | null => (w === 'the' ? null : w);

/** BM25+ of one field, written out: idf · (δ + tf·(k+1) / (tf + k·(1 − b + b·len/avg))). */
function bm25(tf: number, matching: number, total: number, length: number, avg: number): number {
  const idf = Math.log(1 + (total - matching + 0.5) / (matching + 0.5));
  return idf * (0.5 + (tf * 2.2) / (tf + 1.2 * (0.3 + (0.7 * length) / avg)));
}

function levenshtein(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const up = d[i - 1] as number[];
      row[j] = Math.min(
        (up[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
        (up[j] as number) + 1,
        (row[j - 1] as number) + 1,
      );
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

describe('TermIndex', () => {
  // Two fields (boosts 3 and 1); field lengths count distinct words, stop words included.
  const builder = new TermIndexBuilder([{ boost: 3 }, { boost: 1 }]);
  builder.add(
    [
      ['send', 'mail'],
      ['send', 'the', 'mail', 'now'],
    ],
    word,
  ); // 0
  builder.add(
    [
      ['read', 'mail'],
      ['read', 'mailbox'],
    ],
    word,
  ); // 1
  builder.add(
    [
      ['list', 'files'],
      ['list', 'the', 'files'],
    ],
    word,
  ); // 2
  const index = builder.build();
  const avg0 = 2;
  const avg1 = (4 + 2 + 3) / 3;

  it('scores an exact term per field with its boost, and multiplies by the matched terms', () => {
    const hits = index.search([{ term: 'send', prefix: false, maxDistance: 0 }], 10);
    expect(hits.map((h) => h.id)).toEqual([0]);
    const expected = 3 * bm25(1, 1, 3, 2, avg0) + 1 * bm25(1, 1, 3, 4, avg1);
    expect(hits[0]?.score).toBeCloseTo(expected, 12);

    const two = index.search(
      [
        { term: 'send', prefix: false, maxDistance: 0 },
        { term: 'mail', prefix: false, maxDistance: 0 },
      ],
      10,
    );
    const mail0 = 3 * bm25(1, 2, 3, 2, avg0) + bm25(1, 1, 3, 4, avg1);
    expect(two[0]?.id).toBe(0);
    expect(two[0]?.score).toBeCloseTo((expected + mail0) * 2, 12);
    // Tool 1 has `mail` in its first field only (its second has `mailbox`): one matched term.
    expect(two[1]?.id).toBe(1);
    expect(two[1]?.score).toBeCloseTo(3 * bm25(1, 2, 3, 2, avg0), 12);
  });

  it('weights a prefix match by how much longer the indexed term is', () => {
    const hits = index.search([{ term: 'mail', prefix: true, maxDistance: 0 }], 10);
    const box = (0.375 * 7) / (7 + 0.3 * 3);
    const mail1 = 3 * bm25(1, 2, 3, 2, avg0) + box * bm25(1, 1, 3, 2, avg1);
    expect(hits.find((h) => h.id === 1)?.score).toBeCloseTo(mail1, 12);
  });

  it('weights a fuzzy match by its distance, and never counts a prefix match twice', () => {
    const hits = index.search([{ term: 'fils', prefix: false, maxDistance: 1 }], 10);
    const weight = (0.45 * 5) / (5 + 1);
    expect(hits.map((h) => h.id)).toEqual([2]);
    expect(hits[0]?.score).toBeCloseTo(
      weight * (3 * bm25(1, 1, 3, 2, avg0) + bm25(1, 1, 3, 3, avg1)),
      12,
    );
    const both = index.search([{ term: 'file', prefix: true, maxDistance: 1 }], 10);
    const prefixOnly = index.search([{ term: 'file', prefix: true, maxDistance: 0 }], 10);
    expect(both).toEqual(prefixOnly);
  });

  it('leaves nothing behind between searches, breaks ties by id and honours limit and accept', () => {
    const query = [{ term: 'list', prefix: false, maxDistance: 0 }] as const;
    const first = index.search(query, 10);
    index.search([{ term: 'mail', prefix: true, maxDistance: 0 }], 10);
    expect(index.search(query, 10)).toEqual(first);
    const tie = new TermIndexBuilder([{ boost: 1 }]);
    for (let i = 0; i < 5; i++) tie.add([['same', `w${i}`]], word);
    const tied = tie.build().search([{ term: 'same', prefix: false, maxDistance: 0 }], 3);
    expect(tied.map((h) => h.id)).toEqual([0, 1, 2]);
    const accepted = tie
      .build()
      .search([{ term: 'same', prefix: false, maxDistance: 0 }], 10, (id) => id % 2 === 1);
    expect(accepted.map((h) => h.id)).toEqual([1, 3]);
    expect(index.frequency('mail')).toBe(2);
    expect(index.frequency('the')).toBe(0);
  });

  it('matches fuzzily within an edit distance that agrees with a full Levenshtein table', () => {
    const letters = fc.string({ unit: fc.constantFrom('a', 'b', 'c'), maxLength: 9 });
    fc.assert(
      fc.property(letters, letters, fc.integer({ min: 0, max: 3 }), (a, b, max) => {
        const full = levenshtein(a, b);
        expect(editDistance(a, b, max)).toBe(Math.min(full, max + 1));
      }),
      { seed, numRuns: 2000 },
    );
  });
});
