/**
 * The Node versions stepbind supports, and the check the CLI and `McpRuntime.open` run first, so
 * a Node outside the range is one line naming the running and the needed versions instead of a
 * stack from a missing API. The range is the `engines.node` of every package (`packaging.test.ts`
 * keeps them equal). See DESIGN §18.3.
 */
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';

/**
 * The supported Node range (`engines.node`). The floors are where `require()` of an ES module
 * works without a flag (20.19, 22.12): every stepbind package is ESM only, so a CommonJS
 * application loads it that way. Odd (non-LTS) lines before 24 are not supported.
 */
export const SUPPORTED_NODE_RANGE = '^20.19.0 || ^22.12.0 || >=24.0.0';

/** The Node versions CI runs the suite on (README "Supported Node versions"). */
export const TESTED_NODE_VERSIONS = ['20.20', '22.23', '24.22'] as const;

/** Per supported major line its lowest minor; majors from 24 on are all supported. */
const FLOORS: ReadonlyMap<number, number> = new Map([
  [20, 19],
  [22, 12],
]);
const OPEN_FROM_MAJOR = 24;

/** True when `version` (`20.19.0` or `v20.19.0`) is inside {@link SUPPORTED_NODE_RANGE}. */
export function isSupportedNode(version: string): boolean {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (match === null) return false;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (major >= OPEN_FROM_MAJOR) return true;
  const floor = FLOORS.get(major);
  return floor !== undefined && minor >= floor;
}

/**
 * The one-line message for an unsupported `version`, or `undefined` when it is supported.
 *
 * @param what - Who is refusing, for the message (`stepbind`, `McpRuntime.open`).
 */
export function unsupportedNodeMessage(version: string, what = 'stepbind'): string | undefined {
  if (isSupportedNode(version)) return undefined;
  const running = version.replace(/^v/, '');
  return `${what} needs Node ${SUPPORTED_NODE_RANGE} (tested on ${TESTED_NODE_VERSIONS.join(', ')}); this is Node ${running}. Run it with a supported Node, such as the current 22 or 24 LTS.`;
}

/**
 * Throws when the running Node (or `version`, for tests) is outside {@link SUPPORTED_NODE_RANGE}.
 *
 * @throws RuntimeError `UNSUPPORTED_NODE` with `detail.running` and `detail.required`.
 */
export function checkNodeVersion(version: string = process.versions.node, what = 'stepbind'): void {
  const message = unsupportedNodeMessage(version, what);
  if (message === undefined) return;
  throw new RuntimeError(ErrorCode.UNSUPPORTED_NODE, message, {
    detail: { running: version.replace(/^v/, ''), required: SUPPORTED_NODE_RANGE },
  });
}
