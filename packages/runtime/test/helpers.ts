// Moved to test/support/ (stdio.ts, processes.ts). Kept for the suites that still import this path.
export {
  listCursors,
  livePids,
  spawnedPids,
  startStdio,
  type StdioHarness,
} from './support/stdio.js';
export { waitUntilGone } from './support/processes.js';
