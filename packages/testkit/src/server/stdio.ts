import { runIfMain } from './main.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { ScriptedServerOptions } from '../types.js';
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
 * with its code before responding.
 *
 * @param argv the arguments after the script, containing `--options <JSON>`.
 */
export async function runStdioServer(argv: readonly string[]): Promise<void> {
  const scripted = createScriptedServer(parseOptions(argv), { exit: (code) => process.exit(code) });
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
