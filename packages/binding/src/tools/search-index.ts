/**
 * The BM25 index behind tool search (DESIGN §19.4): an inverted index of processed terms with
 * per-field postings, scored into preallocated arrays so that a search allocates nothing per
 * matching tool (the collection pauses of per-result objects were the p99 of a search).
 *
 * Scoring is BM25+ per field (k 1.2, b 0.7, δ 0.5; a field's length is its count of distinct
 * words), summed over fields with their boosts and over query terms; a query term also matches
 * longer indexed terms it is a prefix of (weight 0.375 · len / (len + 0.3 · extra letters)) and,
 * when asked, terms within an edit distance (weight 0.45 · len / (len + distance)); a tool's sum
 * is multiplied by how many distinct query terms it matched. These are the formulas of minisearch
 * 7, which the index replaced; `binding/test/tools/search-index.test.ts` checks them on a worked
 * example.
 *
 * @packageDocumentation
 */
import { editDistance } from '../nearest.js';

/** BM25+ parameters. */
const K = 1.2;
const B = 0.7;
const DELTA = 0.5;
/** Weight of a prefix match at distance 0, and of a fuzzy match. */
const PREFIX_WEIGHT = 0.375;
const FUZZY_WEIGHT = 0.45;
/** Most query terms of one search: matched terms are kept as bits of a 32-bit mask. */
export const INDEX_MAX_QUERY_TERMS = 32;

/** The postings of one term in one field: tool ids and term frequencies, ascending ids. */
interface Postings {
  readonly ids: Int32Array;
  readonly freqs: Int32Array;
}

/** A field of the indexed documents and its boost. */
export interface IndexField {
  readonly boost: number;
}

/** One query term: its text, whether it matches as a prefix, and the edit distance allowed. */
export interface IndexQueryTerm {
  readonly term: string;
  readonly prefix: boolean;
  /** 0: no fuzzy matching. */
  readonly maxDistance: number;
}

/**
 * An immutable index of `count` documents over fixed fields. Build it with {@link TermIndexBuilder}.
 */
export class TermIndex {
  readonly count: number;
  readonly #fields: readonly IndexField[];
  /** term → postings per field (undefined where the term is absent from the field). */
  readonly #postings: ReadonlyMap<string, readonly (Postings | undefined)[]>;
  /** term → the number of documents that have it in any field. */
  readonly #frequency: ReadonlyMap<string, number>;
  /** Every term, sorted: prefix matches are a range of it. */
  readonly #sorted: readonly string[];
  /** Every term by its length: fuzzy matches are looked for among terms of a near length. */
  readonly #byLength: ReadonlyMap<number, readonly string[]>;
  /** Distinct words of each document's field: `lengths[field][doc]`. */
  readonly #lengths: readonly Int32Array[];
  readonly #avgLengths: readonly number[];
  /** Scratch of one search (a search runs to completion synchronously): per document. */
  readonly #scores: Float64Array;
  readonly #partial: Float64Array;
  readonly #masks: Uint32Array;
  readonly #touched: Int32Array;
  readonly #termTouched: Int32Array;

  /** @internal */
  constructor(
    fields: readonly IndexField[],
    postings: ReadonlyMap<string, readonly (Postings | undefined)[]>,
    frequency: ReadonlyMap<string, number>,
    lengths: readonly Int32Array[],
    count: number,
  ) {
    this.count = count;
    this.#fields = fields;
    this.#postings = postings;
    this.#frequency = frequency;
    this.#sorted = [...postings.keys()].sort();
    const byLength = new Map<number, string[]>();
    for (const term of this.#sorted) {
      const same = byLength.get(term.length);
      if (same === undefined) byLength.set(term.length, [term]);
      else same.push(term);
    }
    this.#byLength = byLength;
    this.#lengths = lengths;
    // A running mean, as minisearch kept it: the same rounding gives the same scores, so tools
    // that tie still tie and keep the step's order.
    this.#avgLengths = lengths.map((l) =>
      l.reduce((mean, length, i) => (mean * i + length) / (i + 1), 0),
    );
    this.#scores = new Float64Array(count);
    this.#partial = new Float64Array(count);
    this.#masks = new Uint32Array(count);
    this.#touched = new Int32Array(count);
    this.#termTouched = new Int32Array(count);
  }

  /** Whether any document has `term`. */
  has(term: string): boolean {
    return this.#postings.has(term);
  }

  /** In how many documents `term` occurs (in any field). */
  frequency(term: string): number {
    return this.#frequency.get(term) ?? 0;
  }

  /**
   * The documents matching any of `terms` (at most {@link INDEX_MAX_QUERY_TERMS}) that `accept`
   * lets through, best first (ties by ascending id), at most `limit`.
   */
  search(
    terms: readonly IndexQueryTerm[],
    limit: number,
    accept?: (id: number) => boolean,
  ): { readonly id: number; readonly score: number }[] {
    if (terms.length > INDEX_MAX_QUERY_TERMS) {
      throw new RangeError(`at most ${INDEX_MAX_QUERY_TERMS} query terms`);
    }
    const scores = this.#scores;
    const partial = this.#partial;
    const masks = this.#masks;
    const touched = this.#touched;
    const termTouched = this.#termTouched;
    let touchedCount = 0;
    let termCount = 0;
    const add = (term: string, weight: number, bit: number): void => {
      const perField = this.#postings.get(term);
      if (perField === undefined) return;
      for (let f = 0; f < this.#fields.length; f++) {
        const postings = perField[f];
        if (postings === undefined) continue;
        const boost = weight * (this.#fields[f] as IndexField).boost;
        const n = postings.ids.length;
        const idf = Math.log(1 + (this.count - n + 0.5) / (n + 0.5));
        const lengths = this.#lengths[f] as Int32Array;
        const avg = this.#avgLengths[f] as number;
        for (let i = 0; i < n; i++) {
          const id = postings.ids[i] as number;
          const tf = postings.freqs[i] as number;
          const length = lengths[id] as number;
          const score =
            boost * (idf * (DELTA + (tf * (K + 1)) / (tf + K * (1 - B + (B * length) / avg))));
          const mask = masks[id] as number;
          if ((mask & bit) === 0) {
            if (mask === 0) touched[touchedCount++] = id;
            masks[id] = mask | bit;
            termTouched[termCount++] = id;
            partial[id] = score;
          } else {
            partial[id] = (partial[id] as number) + score;
          }
        }
      }
    };
    terms.forEach((query, q) => {
      const bit = 1 << q;
      termCount = 0;
      add(query.term, 1, bit);
      const prefixed = new Set<string>();
      if (query.prefix) {
        for (let i = lowerBound(this.#sorted, query.term); i < this.#sorted.length; i++) {
          const term = this.#sorted[i] as string;
          if (!term.startsWith(query.term)) break;
          if (term.length === query.term.length) continue;
          prefixed.add(term);
          const extra = term.length - query.term.length;
          add(term, (PREFIX_WEIGHT * term.length) / (term.length + 0.3 * extra), bit);
        }
      }
      const max = query.maxDistance;
      for (
        let length = query.term.length - max;
        max > 0 && length <= query.term.length + max;
        length++
      ) {
        for (const term of this.#byLength.get(length) ?? []) {
          if (term === query.term || prefixed.has(term)) continue;
          const distance = editDistance(query.term, term, max);
          if (distance > max) continue;
          add(term, (FUZZY_WEIGHT * term.length) / (term.length + distance), bit);
        }
      }
      // A term's sum per document is added to the document's total in query order: minisearch's
      // grouping, hence its rounding.
      for (let i = 0; i < termCount; i++) {
        const id = termTouched[i] as number;
        scores[id] = (scores[id] as number) + (partial[id] as number);
      }
    });
    const hits: { id: number; score: number }[] = [];
    for (let i = 0; i < touchedCount; i++) {
      const id = touched[i] as number;
      const score = (scores[id] as number) * popcount(masks[id] as number);
      scores[id] = 0;
      masks[id] = 0;
      if (accept === undefined || accept(id)) hits.push({ id, score });
    }
    hits.sort((a, b) => b.score - a.score || a.id - b.id);
    if (hits.length > limit) hits.length = limit;
    return hits;
  }
}

/** Collects documents for a {@link TermIndex}. */
export class TermIndexBuilder {
  readonly #fields: readonly IndexField[];
  /** term → per field, ascending ids and their frequencies (documents arrive in id order). */
  readonly #postings = new Map<string, ({ ids: number[]; freqs: number[] } | undefined)[]>();
  readonly #frequency = new Map<string, number>();
  readonly #lengths: number[][];
  /** The term of each word met so far (`termOf` is pure). */
  readonly #terms = new Map<string, string | null>();
  #count = 0;

  constructor(fields: readonly IndexField[]) {
    this.#fields = fields;
    this.#lengths = fields.map(() => []);
  }

  /**
   * Adds the next document (ids are 0, 1, …): per field, its words (the field's length is the
   * number of distinct words) and each word's term (`null`: not indexed, e.g. a stop word).
   * `termOf` must be pure: its answer per word is kept.
   */
  add(fieldWords: readonly (readonly string[])[], termOf: (word: string) => string | null): void {
    const id = this.#count++;
    const seen = new Set<string>();
    this.#fields.forEach((_, f) => {
      const words = fieldWords[f] ?? [];
      (this.#lengths[f] as number[]).push(new Set(words).size);
      for (const word of words) {
        let term = this.#terms.get(word);
        if (term === undefined) {
          term = termOf(word);
          this.#terms.set(word, term);
        }
        if (term === null || term === '') continue;
        seen.add(term);
        let perField = this.#postings.get(term);
        if (perField === undefined) {
          perField = this.#fields.map(() => undefined);
          this.#postings.set(term, perField);
        }
        let list = perField[f];
        if (list === undefined) {
          list = { ids: [], freqs: [] };
          perField[f] = list;
        }
        const last = list.ids.length - 1;
        if (list.ids[last] === id) list.freqs[last] = (list.freqs[last] as number) + 1;
        else {
          list.ids.push(id);
          list.freqs.push(1);
        }
      }
    });
    for (const term of seen) this.#frequency.set(term, (this.#frequency.get(term) ?? 0) + 1);
  }

  build(): TermIndex {
    const postings = new Map<string, (Postings | undefined)[]>();
    for (const [term, perField] of this.#postings) {
      postings.set(
        term,
        perField.map((list) =>
          list === undefined
            ? undefined
            : { ids: Int32Array.from(list.ids), freqs: Int32Array.from(list.freqs) },
        ),
      );
    }
    return new TermIndex(
      this.#fields,
      postings,
      this.#frequency,
      this.#lengths.map((l) => Int32Array.from(l)),
      this.#count,
    );
  }
}

function lowerBound(sorted: readonly string[], value: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as string) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function popcount(mask: number): number {
  let n = 0;
  for (let m = mask; m !== 0; m &= m - 1) n++;
  return n;
}
