import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (pkg: string): string =>
  fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      // Subpaths first: an alias also matches `<key>/...`.
      '@stepbind/runtime/ai-sdk': fileURLToPath(
        new URL('./packages/runtime/src/adapters/ai-sdk.ts', import.meta.url),
      ),
      '@stepbind/binding/internal': fileURLToPath(
        new URL('./packages/binding/src/internal.ts', import.meta.url),
      ),
      '@stepbind/runtime/fleet': fileURLToPath(
        new URL('./packages/runtime/src/fleet/index.ts', import.meta.url),
      ),
      '@stepbind/binding': src('binding'),
      '@stepbind/runtime': src('runtime'),
      '@stepbind/testkit': src('testkit'),
    },
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // A private TMPDIR per run; fails the run if a test leaves anything in it.
    globalSetup: ['./scripts/test-teardown.ts'],
    // CI also writes a JSON report, from which .ci/run prints a plain "N passed, N failed" line.
    reporters: process.env['CI']
      ? ['default', ['json', { outputFile: 'coverage/vitest.json' }]]
      : ['default'],
  },
});
