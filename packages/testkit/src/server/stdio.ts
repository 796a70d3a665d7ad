import { runIfMain } from './main.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { ScriptedServerOptions } from '../types.js';
import { runModernFront } from './modern-front.js';
import { createScriptedServer } from './scripted.js';

function parseOptions(argv: readonly string[]): ScriptedServerOptions {
  const at = argv.indexOf('--options');
  const json = at === -1 ? undefined : argv[at + 1];
  if (json === undefined) throw new Error('usage: stdio.js --options <ScriptedServerOptions JSON>');
  return JSON.parse(json) as ScriptedServerOptions;
}

/**
 * Runs a scripted server on this process's stdin/stdout until stdin closes, then exits with code 0.
 * Only protocol messages go to stdout; diagnostics go to stderr. An `exit` trigger ends the process
 * with its code before responding. With `era: 'modern'` or `'dual'` the 2026-07-28 front
 * (`modern-front.ts`) stands between stdin/stdout and the server.
 *
 * @param argv the arguments after the script, containing `--options <JSON>`.
 */
export async function runStdioServer(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  const era = options.era ?? 'legacy';
  if (era === 'modern' || era === 'dual') return runModernFront(options, era);
  if (era !== 'legacy') throw new Error(`unknown era ${JSON.stringify(era)}`);
  const scripted = createScriptedServer(options, { exit: (code) => process.exit(code) });
  // The SDK transport ignores end-of-input; without this, a pending delay would outlive the client.
  process.stdin.once('end', () => {
    scripted.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`stepbind testkit server: close failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  });
  await scripted.server.connect(new StdioServerTransport());
}

runIfMain(import.meta.url, 'stepbind testkit server', () => runStdioServer(process.argv.slice(2)));
