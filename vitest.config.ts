import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

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
  'packages/runtime/test/provisional.stdio.test.ts',
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
  'packages/testkit/test/model.provisional.prop.test.ts',
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

/**
 * The AI SDK adapter suites, run a second time (project `ai-sdk-7`) against `ai` 7 (the dev
 * dependency `ai-v7`, aliased to `ai` for these files only; `STEPBIND_TEST_AI_SDK=7` makes each
 * suite assert the major version it got). `ai` 7 declares `node >= 22`: on an older Node the run is
 * left out with a printed reason, or fails the whole run when `STEPBIND_REQUIRE_AI_SDK7=1` (CI on
 * 22 and 24) says it must not be left out.
 */
const AI_SDK_7_SUITES = ['packages/runtime/test/adapters/ai-sdk*.test.ts'];
const nodeMajor = Number(process.versions.node.split('.')[0]);
const aiSdk7Runs = nodeMajor >= 22;
if (!aiSdk7Runs) {
  const reason = `the AI SDK 7 adapter run (project ai-sdk-7) needs Node >= 22, this is Node ${process.versions.node}`;
  if (process.env['STEPBIND_REQUIRE_AI_SDK7'] === '1') {
    throw new Error(`vitest.config.ts: STEPBIND_REQUIRE_AI_SDK7=1 but ${reason}.`);
  }
  // Once per run: the workers load this config again with the same environment.
  if (process.env['STEPBIND_AI_SDK7_SKIP_SAID'] !== '1') {
    console.warn(`Skipped: ${reason} (set STEPBIND_REQUIRE_AI_SDK7=1 to fail instead).`);
    process.env['STEPBIND_AI_SDK7_SKIP_SAID'] = '1';
  }
}
const aiV7 = (path: string): string =>
  fileURLToPath(new URL(`./packages/runtime/node_modules/ai-v7/${path}`, import.meta.url));

/**
 * The longest suites (each tens of seconds to minutes, most of it waiting on child processes),
 * longest first. With two workers a long file that starts last is the whole run's tail; vitest
 * orders files by the durations of the last run when it has them, and by size otherwise (a fresh
 * CI machine has none), which put the SIGKILL campaign, a small file, near the end.
 */
const LONGEST_FIRST = [
  'packages/runtime/test/journal/kill.test.ts',
  'packages/runtime/test/auth/oidc.fleet.test.ts',
  'packages/runtime/test/install.test.ts',
  'packages/testkit/test/model.provisional.prop.test.ts',
  'packages/runtime/test/fleet/fleet.process.pg.test.ts',
  'packages/runtime/test/discover-tools.test.ts',
  'packages/runtime/test/http.sessions.test.ts',
  'packages/runtime/test/journal/group-commit.kill.test.ts',
  'packages/runtime/test/readme.test.ts',
  'packages/testkit/test/hostile.process.test.ts',
  'packages/testkit/test/model.prop.test.ts',
  'packages/runtime/test/tasks.kill.test.ts',
  'packages/runtime/test/packaging.test.ts',
];

/** vitest's order, with the {@link LONGEST_FIRST} suites (of any project) moved to the front. */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification): number => {
      const i = LONGEST_FIRST.findIndex((suite) => spec.moduleId.endsWith(suite));
      return i === -1 ? LONGEST_FIRST.length : i;
    };
    return sorted
      .map((spec, index) => ({ spec, index, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.index - b.index)
      .map(({ spec }) => spec);
  }
}

export default defineConfig({
  resolve: {
    alias: {
      // Subpaths first: an alias also matches `<key>/...`.
      '@stepbind/runtime/ai-sdk': fileURLToPath(
        new URL('./packages/runtime/src/adapters/ai-sdk.ts', import.meta.url),
      ),
      '@stepbind/runtime/langchain': fileURLToPath(
        new URL('./packages/runtime/src/adapters/langchain.ts', import.meta.url),
      ),
      '@stepbind/runtime/openai-agents': fileURLToPath(
        new URL('./packages/runtime/src/adapters/openai-agents.ts', import.meta.url),
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
      ...(aiSdk7Runs
        ? [
            {
              extends: true as const,
              resolve: {
                // Exact matches: `ai`, `ai/test` and `ai/package.json` of `ai` 7.
                alias: [
                  { find: /^ai$/, replacement: aiV7('dist/index.js') },
                  { find: /^ai\/test$/, replacement: aiV7('dist/test/index.js') },
                  { find: /^ai\/package\.json$/, replacement: aiV7('package.json') },
                ],
              },
              test: {
                name: 'ai-sdk-7',
                include: AI_SDK_7_SUITES,
                env: { STEPBIND_TEST_AI_SDK: '7' },
              },
            },
          ]
        : []),
    ],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // vitest's default (CPUs − 1) is one worker on a 2-CPU machine, and most suites wait on child
    // processes and sockets, so two workers there cut the suite's time (DESIGN §21.4 has the
    // figures). The CPU-bound property tests carry their own longer timeouts.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    sequence: { sequencer: LongestFirst },
    // A private TMPDIR per run; fails the run if a test leaves anything in it.
    globalSetup: ['./scripts/test-teardown.ts'],
    // CI also writes a JSON report, from which .ci/run prints a plain "N passed, N failed" line.
    reporters: process.env['CI']
      ? ['default', ['json', { outputFile: 'coverage/vitest.json' }]]
      : ['default'],
  },
});
