/**
 * A fresh application that installs the packed `@stepbind/*` tarballs OFFLINE, with pnpm, from the
 * local pnpm store. Offline resolution of ranges needs registry metadata the machine does not have,
 * so the app gets a lockfile written here: its own importer (the tarballs and the extra packages
 * asked for), entries for the three tarballs whose dependencies are the versions the workspace
 * lockfile resolved, and the workspace lockfile's `packages`/`snapshots` for everything else. Then
 * `pnpm install --offline --frozen-lockfile` links every package from the store, as an app with a
 * committed lockfile installs.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/** The three packages, by directory. */
export const PACKAGES = ['binding', 'runtime', 'testkit'] as const;
type PackageDir = (typeof PACKAGES)[number];

/** Runs `command` to its end; rejects with its output when it fails. */
export function run(
  command: string,
  args: readonly string[],
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv },
): Promise<{ readonly stdout: string; readonly stderr: string }> {
  return new Promise((resolve, reject) => {
    // pnpm's shims set NODE_PATH to the workspace's modules: an app must not see them.
    const env = { ...(options.env ?? process.env) };
    delete env['NODE_PATH'];
    const child = spawn(command, args, {
      cwd: options.cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve({ stdout, stderr });
      else {
        const shown = [command, ...args].join(' ');
        reject(new Error(`${shown} exited ${code}\n${stdout}\n${stderr}`));
      }
    });
  });
}

/** Packs the three packages (built) into `dir`, in parallel; returns each tarball's file name. */
export async function packAll(dir: string): Promise<Record<PackageDir, string>> {
  mkdirSync(dir, { recursive: true });
  await Promise.all(
    PACKAGES.map((name) =>
      run('pnpm', ['pack', '--pack-destination', dir], { cwd: join(ROOT, 'packages', name) }),
    ),
  );
  return {
    binding: 'stepbind-binding-0.1.0.tgz',
    runtime: 'stepbind-runtime-0.1.0.tgz',
    testkit: 'stepbind-testkit-0.1.0.tgz',
  };
}

/** One importer dependency of the workspace lockfile: name → resolved version (with peers). */
type Resolved = Map<string, string>;

/** Reads `importers.<path>.dependencies` of the workspace lockfile (line-based: fixed indents). */
function importerDependencies(lock: string, importer: string): Resolved {
  const lines = lock.split('\n');
  const start = lines.indexOf(`  ${importer}:`);
  if (start < 0) throw new Error(`importer ${importer} is not in pnpm-lock.yaml`);
  const out: Resolved = new Map();
  let inDependencies = false;
  let name: string | undefined;
  for (const line of lines.slice(start + 1)) {
    if (/^ {0,2}\S/.test(line)) break;
    if (/^ {4}\S/.test(line)) inDependencies = line.trim() === 'dependencies:';
    else if (inDependencies && /^ {6}\S/.test(line)) name = line.trim().replace(/:$/, '');
    else if (inDependencies && name !== undefined && line.startsWith('        version: ')) {
      out.set(unquote(name), line.slice('        version: '.length).trim());
    }
  }
  return out;
}

/** The version (with peers) the workspace lockfile gives `name` in any importer. */
function workspaceVersion(lock: string, name: string): string {
  for (const importer of ['.', 'packages/binding', 'packages/runtime', 'packages/testkit']) {
    const lines = lock.split('\n');
    const start = lines.indexOf(`  ${importer}:`);
    const key = /^[@]/.test(name) ? `'${name}':` : `${name}:`;
    for (let i = start + 1; i < lines.length && !/^ {0,2}\S/.test(lines[i] ?? ''); i++) {
      if (lines[i]?.trim() === key && lines[i + 2]?.startsWith('        version: ')) {
        return (lines[i + 2] ?? '').slice('        version: '.length).trim();
      }
    }
  }
  throw new Error(`${name} is not a dependency of the workspace`);
}

function unquote(text: string): string {
  return text.replace(/^'(.*)'$/, '$1');
}

function quote(text: string): string {
  return /^[@]/.test(text) || text.includes(':') ? `'${text}'` : text;
}

/** What {@link createOfflineApp} installs. */
export interface OfflineAppOptions {
  /** The directory the tarballs were packed into (see {@link packAll}). */
  readonly tarballs: string;
  /** The `@stepbind/*` packages to add (binding is always added: runtime needs it). */
  readonly stepbind: readonly Exclude<PackageDir, 'binding'>[];
  /** Registry packages to add, at the version the workspace lockfile resolved (`better-sqlite3`). */
  readonly extra?: readonly string[];
}

/**
 * Writes a fresh app into `dir` (package.json, lockfile, the tarballs under `vendor/`), installs it
 * offline from the pnpm store and returns how long the install took (ms).
 */
export async function createOfflineApp(dir: string, options: OfflineAppOptions): Promise<number> {
  const lock = readFileSync(join(ROOT, 'pnpm-lock.yaml'), 'utf8');
  const vendor = join(dir, 'vendor');
  mkdirSync(vendor, { recursive: true });
  const ours = ['binding', ...options.stepbind] as PackageDir[];
  const file = (name: PackageDir): string => `file:vendor/stepbind-${name}-0.1.0.tgz`;
  const packages: string[] = [];
  const snapshots: string[] = [];
  for (const name of ours) {
    const tarball = join(options.tarballs, `stepbind-${name}-0.1.0.tgz`);
    copyFileSync(tarball, join(vendor, `stepbind-${name}-0.1.0.tgz`));
    const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
    const manifest = JSON.parse(
      readFileSync(join(ROOT, 'packages', name, 'package.json'), 'utf8'),
    ) as { peerDependencies?: Record<string, string> };
    const key = `'@stepbind/${name}@${file(name)}'`;
    const peers = Object.entries(manifest.peerDependencies ?? {});
    packages.push(
      `  ${key}:`,
      `    resolution: {integrity: ${integrity}, tarball: ${file(name)}}`,
      `    version: 0.1.0`,
      ...(peers.length === 0
        ? []
        : [
            '    peerDependencies:',
            ...peers.map(([peer, range]) => `      ${quote(peer)}: ${range}`),
          ]),
      '',
    );
    const dependencies = [...importerDependencies(lock, `packages/${name}`)].map(
      ([dependency, version]) =>
        version.startsWith('link:')
          ? `      ${quote(dependency)}: ${file(dependency.replace('@stepbind/', '') as PackageDir)}`
          : `      ${quote(dependency)}: ${version}`,
    );
    // A peer the app installs (better-sqlite3 beside the runtime) is linked to the package, as
    // pnpm resolves an optional peer from the parent.
    for (const [peer] of peers) {
      if (options.extra?.includes(peer) === true) {
        dependencies.push(`      ${quote(peer)}: ${workspaceVersion(lock, peer)}`);
      }
    }
    // testkit's peer fast-check is satisfied by the app's own fast-check.
    if (name === 'testkit')
      dependencies.push(`      fast-check: ${workspaceVersion(lock, 'fast-check')}`);
    snapshots.push(`  ${key}:`, '    dependencies:', ...dependencies, '');
  }
  const extra = [
    ...(options.extra ?? []),
    ...(options.stepbind.includes('testkit') ? ['fast-check'] : []),
  ];
  const direct: [string, string, string][] = [
    ...ours.map((name): [string, string, string] => [`@stepbind/${name}`, file(name), file(name)]),
    ...extra.map((name): [string, string, string] => {
      const version = workspaceVersion(lock, name);
      return [name, version.replace(/\(.*$/, ''), version];
    }),
  ];
  const importer = [
    'importers:',
    '',
    '  .:',
    '    dependencies:',
    ...direct.flatMap(([name, specifier, version]) => [
      `      ${quote(name)}:`,
      `        specifier: ${specifier}`,
      `        version: ${version}`,
    ]),
    '',
  ];
  const sections = lock.slice(lock.indexOf('\npackages:\n') + 1);
  const [workspacePackages = '', workspaceSnapshots = ''] = sections.split('\nsnapshots:\n');
  const appLock = [
    "lockfileVersion: '9.0'",
    '',
    'settings:',
    '  autoInstallPeers: true',
    '  excludeLinksFromLockfile: false',
    '',
    ...importer,
    'packages:',
    '',
    ...packages,
    workspacePackages.replace(/^packages:\n\n/, ''),
    'snapshots:',
    '',
    ...snapshots,
    workspaceSnapshots.replace(/^\n/, ''),
  ].join('\n');
  writeFileSync(join(dir, 'pnpm-lock.yaml'), appLock);
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify(
      {
        name: 'stepbind-offline-app',
        private: true,
        type: 'module',
        dependencies: Object.fromEntries(direct.map(([name, specifier]) => [name, specifier])),
        // better-sqlite3 compiles (or reuses the store's cached build) only when it is asked for.
        pnpm: { onlyBuiltDependencies: ['better-sqlite3'] },
      },
      null,
      2,
    )}\n`,
  );
  const started = performance.now();
  await run(
    'pnpm',
    ['install', '--offline', '--frozen-lockfile', '--config.confirmModulesPurge=false'],
    {
      cwd: dir,
    },
  );
  return Math.round(performance.now() - started);
}
