import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, digestOf } from '@stepbind/binding';

const seed = Number(process.env.STEPBIND_SEED ?? Date.now());
console.log(`canonical.prop: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

/**
 * An independent statement of the canonical form (RFC 8785 for the JSON that JSON.parse yields):
 * members sorted by UTF-16 code units, `JSON.stringify` for strings and numbers, no whitespace,
 * `undefined` members dropped and `undefined` array items written `null`. Written as plainly as
 * possible, token by token, so it cannot share a bug with the fast string-building encoder.
 */
function reference(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    return `[${value.map((item: unknown) => (item === undefined ? 'null' : reference(item))).join(',')}]`;
  }
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const members = Object.keys(record)
      .sort()
      .filter((key) => record[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${reference(record[key])}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

describe('canonicalJson (property)', () => {
  it('equals the canonical form of every JSON value, undefined members included', () => {
    const value = fc.letrec((tie) => ({
      any: fc.oneof(
        { depthSize: 'small' },
        fc.jsonValue({ maxDepth: 2 }),
        fc.constant(undefined),
        fc.array(tie('any'), { maxLength: 4 }),
        fc.dictionary(fc.string({ unit: 'grapheme', maxLength: 4 }), tie('any'), { maxKeys: 5 }),
      ),
    })).any;
    fc.assert(
      fc.property(value, (v) => {
        if (v === undefined) return;
        expect(canonicalJson(v)).toBe(reference(v));
      }),
      { seed, verbose: true, numRuns: 500 },
    );
  });

  it('is the same text for every key order, and parses back to an equal value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = canonicalJson(v);
        const reordered = JSON.parse(JSON.stringify(v), (_key, member: unknown) =>
          typeof member === 'object' && member !== null && !Array.isArray(member)
            ? Object.fromEntries(Object.entries(member).reverse())
            : member,
        ) as unknown;
        expect(canonicalJson(reordered)).toBe(text);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
      { seed, verbose: true, numRuns: 300 },
    );
  });

  it('writes the RFC 8785 example exactly', () => {
    // RFC 8785 section 3.2.2 (numbers, string escapes, literals) and 3.2.3 (member sort order).
    const input = JSON.parse(
      '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],' +
        '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
    ) as unknown;
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
    const sorted = JSON.parse(
      '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",' +
        '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
    ) as Record<string, unknown>;
    expect(canonicalJson(sorted)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control",' +
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",' +
        '"\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
    expect(digestOf({ b: 1, a: [true, null] })).toBe(digestOf({ a: [true, null], b: 1 }));
  });

  it('refuses what JSON cannot represent', () => {
    for (const bad of [{ a: Number.NaN }, { f: () => 1 }, [1n], { s: Symbol('x') }]) {
      expect(() => canonicalJson(bad)).toThrow(TypeError);
    }
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(RangeError);
  });
});
