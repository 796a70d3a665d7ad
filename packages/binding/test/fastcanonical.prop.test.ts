import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '@stepbind/binding';
import { canonicalText } from '../src/fastcanonical.js';

const seed = Number(process.env.STEPBIND_SEED ?? Date.now());
console.log(`fastcanonical.prop: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

describe('the snapshot hot-path canonicaliser (property)', () => {
  it('produces exactly canonicalJson for every JSON value, undefined members included', () => {
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
        expect(canonicalText(v)).toBe(canonicalJson(v));
      }),
      { seed, verbose: true, numRuns: 500 },
    );
  });

  it('refuses what JSON cannot represent, like canonicalJson', () => {
    for (const bad of [{ a: Number.NaN }, { f: () => 1 }, [1n]]) {
      expect(() => canonicalText(bad)).toThrow(TypeError);
      expect(() => canonicalJson(bad)).toThrow(TypeError);
    }
  });
});
