#!/usr/bin/env node
import { unsupportedNodeMessage } from '../node-version.js';

// First the Node version, before anything that may need a newer Node is loaded: one plain line.
const unsupported = unsupportedNodeMessage(process.versions.node);
if (unsupported !== undefined) {
  process.stderr.write(`stepbind: UNSUPPORTED_NODE: ${unsupported}\n`);
  process.exit(1);
}
const { killAllServerGroups } = await import('../transports/stdio.js');
const { runCli } = await import('./run.js');

// The first Ctrl-C cancels discovery; every server's process group is then ended by its close()
// (SIGTERM, then SIGKILL) before the exit. A second one does not wait: SIGKILL to every group now.
const controller = new AbortController();
let interrupted = false;
const onSignal = (): void => {
  if (interrupted) {
    killAllServerGroups();
    process.exit(130);
  }
  interrupted = true;
  process.stderr.write('\nInterrupted: closing servers...\n');
  controller.abort(new Error('interrupted'));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

const code = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  signal: controller.signal,
  // Live discovery progress only on a terminal: one line, rewritten in place.
  ...(process.stderr.isTTY
    ? { progress: (line: string) => process.stderr.write(`\r\x1b[K${line}`) }
    : {}),
});
process.off('SIGINT', onSignal);
process.off('SIGTERM', onSignal);
process.exitCode = interrupted ? 130 : code;
