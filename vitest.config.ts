import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (pkg: string): string =>
  fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url));

/**
 * The discovery, refresh and stale-call suites, run a second time (project `modern-era`) with every
 * scripted server speaking 2026-07-28 through testkit's modern front (`STEPBIND_TEST_ERA=modern`,
 * read by `stdioServerParams`). Each asserts the era stepbind negotiated, so the run cannot pass by
 * falling back to `initialize`.
 */
const MODERN_ERA_SUITES = [
  'packages/runtime/test/discovery.stdio.test.ts',
  'packages/runtime/test/discovery-states.stdio.test.ts',
  'packages/runtime/test/runtime.stdio.test.ts',
  'packages/runtime/test/delivery.stdio.test.ts',
  'packages/runtime/test/journal/runtime.journal.test.ts',
  'packages/runtime/test/adapters/ai-sdk.test.ts',
  'packages/testkit/test/faults.stdio.test.ts',
  // In memory: the fleet puts the same front on its link, and the runtime probes first.
  'packages/runtime/test/runtime.memory.test.ts',
  'packages/runtime/test/hard-refresh.clock.test.ts',
  'packages/testkit/test/faults.test.ts',
  'packages/testkit/test/interleavings.prop.test.ts',
  // The model-based test against the oracle (in memory and over stdio), page walks, discovery,
  // the CLI's call path and tracing.
  'packages/testkit/test/model.prop.test.ts',
  'packages/testkit/test/pagination.prop.test.ts',
  'packages/runtime/test/discover-tools.test.ts',
  'packages/runtime/test/cli/call.test.ts',
  'packages/runtime/test/observability.test.ts',
];

// A suite renamed or moved must not drop out of the modern-era run without a word.
const missingSuites = MODERN_ERA_SUITES.filter(
  (suite) => !existsSync(fileURLToPath(new URL(`./${suite}`, import.meta.url))),
);
if (missingSuites.length > 0) {
  throw new Error(
    `vitest.config.ts: MODERN_ERA_SUITES names missing files: ${missingSuites.join(', ')}`,
  );
}

export default defineConfig({
  resolve: {
    alias: {
      // Subpaths first: an alias also matches `<key>/...`.
      '@stepbind/runtime/ai-sdk': fileURLToPath(
        new URL('./packages/runtime/src/adapters/ai-sdk.ts', import.meta.url),
      ),
      '@stepbind/runtime/internal': fileURLToPath(
        new URL('./packages/runtime/src/internal.ts', import.meta.url),
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
    projects: [
      {
        extends: true,
        test: {
          name: 'default',
          include: ['packages/*/test/**/*.test.ts', 'examples/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'modern-era',
          include: MODERN_ERA_SUITES,
          env: { STEPBIND_TEST_ERA: 'modern' },
        },
      },
    ],
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
