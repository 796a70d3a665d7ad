#!/usr/bin/env node
import { runCli } from './run.js';

const controller = new AbortController();
let interrupted = false;
const onSignal = (): void => {
  if (interrupted) process.exit(130);
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
