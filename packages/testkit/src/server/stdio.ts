import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
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

const isMain = (): boolean => {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
};

if (isMain()) {
  runStdioServer(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(
      `stepbind testkit server: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(2);
  });
}
