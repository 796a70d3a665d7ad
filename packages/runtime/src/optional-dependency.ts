/**
 * Loading of the optional dependencies: `better-sqlite3` (the SQLite journal's driver where
 * `node:sqlite` is not used) and `pg` (the fleet
 * store and its token store) are optional peers of `@stepbind/runtime`, loaded on first use so an
 * application that wants neither installs no native build and no database driver. A package that
 * is missing, or installed but not loadable, is a typed `DEPENDENCY_MISSING` naming it, the feature
 * that needed it and the command that installs it. See DESIGN §17.4.
 */
import { createRequire } from 'node:module';
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';

/** The optional peer dependencies and the range this build supports (the `install` advice). */
export const OPTIONAL_DEPENDENCIES = {
  'better-sqlite3': '^12',
  pg: '^8',
} as const;

/** One of the optional peer dependencies. */
export type OptionalDependency = keyof typeof OPTIONAL_DEPENDENCIES;

const requireHere = createRequire(import.meta.url);

/**
 * `require`s the optional package `name` (both are CommonJS, so loading is synchronous and works
 * from a synchronous constructor), resolved from this package as Node resolves a peer.
 *
 * @param feature - What needs it, for the message (`the SQLite journal ${path}`).
 * @param load - The loader (tests pass one resolving from elsewhere).
 * @throws RuntimeError `DEPENDENCY_MISSING` when the package is not installed or fails to load.
 */
export function requireOptional<T>(
  name: OptionalDependency,
  feature: string,
  load: (specifier: string) => unknown = requireHere,
): T {
  try {
    return load(name) as T;
  } catch (error) {
    throw dependencyMissing(name, feature, error);
  }
}

/**
 * The `DEPENDENCY_MISSING` error for `name`: `not-installed` when the package itself cannot be
 * found, otherwise `not-loadable` (a missing file of its own, a native build for another Node).
 */
export function dependencyMissing(
  name: OptionalDependency,
  feature: string,
  cause: unknown,
): RuntimeError {
  const install = `npm install ${name}@${OPTIONAL_DEPENDENCIES[name]}`;
  const reason = isNotFound(cause, name) ? 'not-installed' : 'not-loadable';
  const why =
    reason === 'not-installed'
      ? `the optional package "${name}", which is not installed`
      : `the optional package "${name}", which is installed but failed to load (${firstLine(cause)}); it was built for another Node version than this one (${process.version}) or its install is incomplete`;
  const next =
    reason === 'not-installed'
      ? `Run \`${install}\` in your application (stepbind loads it only for this feature).`
      : `Run \`npm rebuild ${name}\` under this Node (or \`${install}\` again)${name === 'better-sqlite3' ? `; on Node 22.13 or later the journal's default driver ("auto") uses the built-in node:sqlite and needs no native module` : ''}.`;
  return new RuntimeError(
    ErrorCode.DEPENDENCY_MISSING,
    `${capitalise(feature)} needs ${why}. ${next}`,
    { detail: { package: name, feature, install, reason }, cause },
  );
}

/** True when `error` says that `name` itself (not one of its own files or dependencies) is missing. */
function isNotFound(error: unknown, name: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== 'MODULE_NOT_FOUND' && code !== 'ERR_MODULE_NOT_FOUND') return false;
  return firstLine(error).includes(`'${name}'`);
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n', 1)[0] ?? text;
}

/** `text` with its first letter in upper case (a feature name starting a message). */
export function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
