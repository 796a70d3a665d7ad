import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  FOREIGN_TYPE_PACKAGES,
  KNOWN_LEAKS,
  unexportedReachableTypes,
} from './support/public-types.js';
import { SUPPORTED_NODE_RANGE, TESTED_NODE_VERSIONS } from '../src/node-version.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** Runs `script` in a fresh CommonJS `node -e` from the repository root, against the built dist. */
function node(script: string): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

interface PackageJson {
  readonly name: string;
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>;
}

/** The optional peer each adapter subpath imports, and the one declaration file that may name it. */
const ADAPTER_PEERS: Readonly<Record<string, string>> = {
  ai: 'adapters/ai-sdk.d.ts',
  '@langchain/core': 'adapters/langchain.d.ts',
  '@openai/agents': 'adapters/openai-agents.d.ts',
};

describe('packaging', () => {
  it('lets CommonJS require() every public entry point, with the same exports as import', () => {
    const run = node(`
      const entries = ['@stepbind/binding', '@stepbind/runtime', '@stepbind/runtime/ai-sdk', '@stepbind/runtime/internal', '@stepbind/runtime/langchain', '@stepbind/runtime/openai-agents', '@stepbind/testkit'];
      (async () => {
        const out = {};
        for (const entry of entries) {
          const required = Object.keys(require(entry)).sort();
          const imported = Object.keys(await import(entry)).filter((k) => k !== 'default').sort();
          out[entry] = { same: JSON.stringify(required) === JSON.stringify(imported), count: required.length };
        }
        console.log(JSON.stringify(out));
      })();
    `);
    expect(run.stderr).toBe('');
    const out = JSON.parse(run.stdout) as Record<string, { same: boolean; count: number }>;
    for (const entry of Object.values(out)) {
      expect(entry.same).toBe(true);
      expect(entry.count).toBeGreaterThan(1);
    }
    expect(Object.keys(out)).toHaveLength(7);
  });

  it('publishes declarations that compile for a consumer and name no unexported type of the public classes', () => {
    const { walked, missing, diagnostics, packages } = unexportedReachableTypes('dist');
    expect(diagnostics).toEqual([]);
    expect(missing).toEqual(KNOWN_LEAKS);
    expect(walked).toBeGreaterThan(30);
    // The walk compiled the declarations of its dependencies (the SDK at least)...
    expect(packages).toContain('@modelcontextprotocol/sdk');
    // ...and none of an optional driver: a consumer without them still compiles.
    expect(packages.filter((name) => FOREIGN_TYPE_PACKAGES.includes(name))).toEqual([]);
  }, 120_000);

  it('publishes declarations that import only node builtins, the package itself and its declared dependencies', () => {
    const found: string[] = [];
    for (const name of ['binding', 'runtime', 'testkit']) {
      const pkg = JSON.parse(
        readFileSync(new URL(`../../${name}/package.json`, import.meta.url), 'utf8'),
      ) as PackageJson;
      const declared = new Set([
        pkg.name,
        ...Object.keys(pkg.dependencies ?? {}),
        // A peer a declaration may name: required ones, and each adapter's framework (only its
        // adapter's declarations name it).
        ...Object.keys(pkg.peerDependencies ?? {}).filter(
          (peer) => pkg.peerDependenciesMeta?.[peer]?.optional !== true || peer in ADAPTER_PEERS,
        ),
      ]);
      const dist = fileURLToPath(new URL(`../../${name}/dist/`, import.meta.url));
      const files = readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((file) =>
        file.endsWith('.d.ts'),
      );
      expect(files.length).toBeGreaterThan(5);
      for (const file of files) {
        const text = readFileSync(`${dist}${file}`, 'utf8');
        for (const match of text.matchAll(/(?:from\s+|import\()['"]([^'"]+)['"]/g)) {
          const specifier = match[1] ?? '';
          if (specifier.startsWith('.') || specifier.startsWith('node:')) continue;
          const bare = specifier.startsWith('@')
            ? specifier.split('/').slice(0, 2).join('/')
            : (specifier.split('/')[0] ?? '');
          const adapter = ADAPTER_PEERS[bare];
          if (adapter !== undefined && file !== adapter) found.push(`${name}/${file}: ${bare}`);
          if (!declared.has(bare)) found.push(`${name}/${file}: ${specifier}`);
        }
      }
    }
    expect(found).toEqual([]);
  });

  it('gives every export a default condition and declares the published files', () => {
    for (const name of ['binding', 'runtime', 'testkit']) {
      const pkg = JSON.parse(
        readFileSync(new URL(`../../${name}/package.json`, import.meta.url), 'utf8'),
      ) as {
        exports: Record<string, string | Record<string, string>>;
        files: string[];
        license: string;
      };
      for (const [path, target] of Object.entries(pkg.exports)) {
        if (typeof target === 'string') continue;
        expect(Object.keys(target), `${name} ${path}`).toEqual(['types', 'import', 'default']);
      }
      expect(pkg.files).toEqual(['dist', '!dist/.tsbuildinfo', 'README.md', 'LICENSE']);
      expect(pkg.license).toBe('Apache-2.0');
      expect(readFileSync(new URL(`../../${name}/LICENSE`, import.meta.url), 'utf8')).toContain(
        'Apache License\n                           Version 2.0, January 2004',
      );
    }
  });

  it('makes fast-check a peer of testkit, and ai, better-sqlite3, pg, @langchain/core and @openai/agents optional peers of runtime', () => {
    const read = (name: string): Record<string, Record<string, unknown>> =>
      JSON.parse(
        readFileSync(new URL(`../../${name}/package.json`, import.meta.url), 'utf8'),
      ) as Record<string, Record<string, unknown>>;
    const testkit = read('testkit');
    expect(testkit['dependencies']?.['fast-check']).toBeUndefined();
    expect(testkit['peerDependencies']).toEqual({ 'fast-check': '^4.0.0' });
    const runtime = read('runtime');
    expect(runtime['dependencies']?.['ai']).toBeUndefined();
    expect(runtime['peerDependencies']).toEqual({
      ai: '^6.0.0 || ^7.0.0',
      'better-sqlite3': '^12.0.0',
      pg: '^8.11.0',
      '@langchain/core': '^1.0.0',
      '@openai/agents': '^0.20.0',
    });
    expect(runtime['peerDependenciesMeta']).toEqual({
      ai: { optional: true },
      'better-sqlite3': { optional: true },
      pg: { optional: true },
      '@langchain/core': { optional: true },
      '@openai/agents': { optional: true },
    });
    // Installing the runtime builds nothing native and pulls no database driver.
    expect(runtime['dependencies']?.['better-sqlite3']).toBeUndefined();
    expect(runtime['dependencies']?.['pg']).toBeUndefined();
  });

  it('declares every dependency as a range an application can dedupe with (caret or workspace)', () => {
    const pinned: string[] = [];
    for (const name of ['binding', 'runtime', 'testkit']) {
      const pkg = JSON.parse(
        readFileSync(new URL(`../../${name}/package.json`, import.meta.url), 'utf8'),
      ) as PackageJson;
      for (const [dependency, range] of Object.entries({
        ...pkg.dependencies,
        ...pkg.peerDependencies,
      })) {
        // A caret range, or caret ranges joined by `||` (zod: `^3.25 || ^4.0`, the SDK's own).
        const caret = range.split(' || ').every((part) => /^\^\d+(\.\d+){0,2}$/.test(part));
        if (!caret && range !== 'workspace:*') pinned.push(`${name}: ${dependency}@${range}`);
      }
    }
    expect(pinned).toEqual([]);
  });

  it('states one supported Node range: engines of the root and every package, the check, the README', () => {
    const engines = ['.', 'packages/binding', 'packages/runtime', 'packages/testkit'].map((dir) => {
      const pkg = JSON.parse(readFileSync(`${root}${dir}/package.json`, 'utf8')) as {
        engines?: { node?: string };
      };
      return [dir, pkg.engines?.node];
    });
    expect(engines).toEqual(engines.map(([dir]) => [dir, SUPPORTED_NODE_RANGE]));
    const readme = readFileSync(`${root}README.md`, 'utf8');
    const section = readme.slice(readme.indexOf('### Supported Node versions'));
    expect(section).toContain(`\`engines.node\` of every package is \`${SUPPORTED_NODE_RANGE}\``);
    // The whole suite on the first tested version, the Node-sensitive suites on the others.
    const [first, ...others] = TESTED_NODE_VERSIONS;
    expect(section.replace(/\s+/g, ' ')).toContain(
      `CI runs the whole suite on Node ${first} and, on Node ${others.join(' and ')} (`,
    );
  });
});
