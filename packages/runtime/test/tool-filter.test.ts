import fc from 'fast-check';
import { MAX_TOOL_NAME_LENGTH } from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { compileGlob, globMatch, toolFilterOf, type GlobMeter } from '../src/tool-filter.js';

/** The reference: a glob as an anchored regular expression of `[^]*` and `[^]` (no `u` flag). */
function reference(glob: string, name: string): boolean {
  const body = [...glob]
    .map((c) => (c === '*' ? '[^]*' : c === '?' ? '[^]' : c.replace(/[\\^$.|+()[\]{}]/g, '\\$&')))
    .join('');
  return new RegExp(`^${body}$`).test(name);
}

describe('tool filter globs', () => {
  it('agree with an anchored regular expression on random globs and names, parts longer than a word included (property)', () => {
    const unit = fc.constantFrom('a', 'b', '_');
    const globUnit = fc.oneof(
      { weight: 6, arbitrary: unit },
      { weight: 2, arbitrary: fc.constant('*') },
      { weight: 2, arbitrary: fc.constant('?') },
    );
    fc.assert(
      fc.property(
        fc.string({ unit: globUnit, maxLength: 80 }),
        fc.string({ unit, maxLength: 120 }),
        (glob, name) => globMatch(glob, name) === reference(glob, name),
      ),
      { numRuns: 3000 },
    );
    // Names built from the glob itself, so long matching parts are exercised, not only misses.
    fc.assert(
      fc.property(
        fc.string({ unit: globUnit, maxLength: 80 }),
        fc.array(fc.string({ unit, maxLength: 5 }), { maxLength: 20 }),
        (glob, fills) => {
          let i = 0;
          const name = [...glob]
            .map((c) => (c === '*' ? (fills[i++] ?? '') : c === '?' ? 'b' : c))
            .join('');
          return globMatch(glob, name) && reference(glob, name);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('compare or scan at most name length + glob length characters, whatever the glob (property)', () => {
    const globUnit = fc.constantFrom('a', 'b', '*', '?');
    fc.assert(
      fc.property(
        fc.string({ unit: globUnit, maxLength: 40 }),
        fc.string({ unit: fc.constantFrom('a', 'b'), maxLength: 400 }),
        (glob, name) => {
          const meter: GlobMeter = { steps: 0 };
          compileGlob(glob)(name, meter);
          return meter.steps <= name.length + glob.length;
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('match a leading-* glob against a megabyte name in one pass over it', () => {
    // The attack's shape: each `a` almost matches, which made the old matcher back up per character.
    const glob = '*aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab*';
    const name = 'a'.repeat(1 << 20);
    const meter: GlobMeter = { steps: 0 };
    expect(compileGlob(glob)(name, meter)).toBe(false);
    expect(meter.steps).toBeLessThanOrEqual(name.length + glob.length);
  });

  it('keep a name longer than any tool name unmatched, for validation to refuse', () => {
    const keep = toolFilterOf({ allow: ['*_file'], deny: ['*'] });
    expect(keep?.('a'.repeat(MAX_TOOL_NAME_LENGTH + 1))).toBe(true);
    expect(keep?.('read_file')).toBe(false);
    expect(toolFilterOf({ allow: ['*_file'] })?.('a'.repeat(MAX_TOOL_NAME_LENGTH))).toBe(false);
  });
});
