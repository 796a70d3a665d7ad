/**
 * `docs/options.md` is generated from the options schemas (DESIGN §17.1): it must be what
 * `scripts/options-doc.ts` writes today, so a schema change without a regenerated reference fails.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderOptionsReference } from '@stepbind/runtime/internal';
import { format, resolveConfig } from 'prettier';
import { describe, expect, it } from 'vitest';

describe('the options reference', () => {
  it('docs/options.md is the reference rendered from the current schemas (run scripts/options-doc.ts)', async () => {
    const target = join(import.meta.dirname, '..', '..', '..', 'docs', 'options.md');
    const config = await resolveConfig(target);
    const expected = await format(renderOptionsReference(), { ...config, filepath: target });
    expect(readFileSync(target, 'utf8')).toBe(expected);
  });

  it('lists every key of every bag, so a key cannot be undocumented', () => {
    const text = renderOptionsReference();
    for (const key of [
      'journal',
      'synchronous',
      'idempotencyKey',
      'poolSize',
      'onCall',
      'stepId',
    ]) {
      expect(text).toContain(`| \`${key}\` |`);
    }
  });
});
