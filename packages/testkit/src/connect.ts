import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { createScriptedServer, type ScriptedServer } from './server/scripted.js';
import type { ScriptedServerEra, ScriptedServerOptions } from './types.js';

/** How to spawn a scripted stdio server; fits `new StdioClientTransport(params)`. */
export interface StdioServerParams {
  /** The Node.js binary running the tests (`process.execPath`). */
  readonly command: string;
  /** `[<absolute path of dist/server/stdio.js>, '--options', <options JSON>]`. */
  readonly args: string[];
  /** Extra environment; unset means the SDK's default environment. */
  readonly env?: Record<string, string>;
}

/** Linux refuses a single argument over 128 KiB; stay well below. */
const MAX_OPTIONS_ARG = 100 * 1024;

/** @internal Absolute path of a compiled server entry, also when this module runs from `src/`. */
export function stdioEntryPath(file = 'stdio.js'): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = basename(here) === 'src' ? join(dirname(here), 'dist') : here;
  return join(root, 'server', file);
}

/**
 * The protocol era test servers run in, from the environment variable `STEPBIND_TEST_ERA`:
 * `modern` (2026-07-28 only, so a client that falls back to `initialize` fails loudly) or `legacy`
 * (the default when unset or empty). The vitest project `modern-era` sets it.
 *
 * @throws {RangeError} for any other value.
 */
export function scriptedTestEra(): Exclude<ScriptedServerEra, 'dual'> {
  const value = process.env['STEPBIND_TEST_ERA'];
  if (value === undefined || value === '' || value === 'legacy') return 'legacy';
  if (value === 'modern') return 'modern';
  throw new RangeError(
    `STEPBIND_TEST_ERA=${JSON.stringify(value.slice(0, 40))}: expected "modern" or "legacy"`,
  );
}

/**
 * Parameters that start a scripted server as a stdio child process with `process.execPath`. The
 * entry is the compiled `dist/server/stdio.js` (run `tsc -b` first when testing from source).
 * Options without `era` get {@link scriptedTestEra}'s, so one environment variable moves every
 * such server of a test run to the 2026-07-28 era.
 *
 * @throws {RangeError} when the options JSON is over 100 KiB (too long for one argument); put a
 *   large fixture in a file and pass `fixturePath` instead.
 */
export function stdioServerParams(options: ScriptedServerOptions): StdioServerParams {
  const era = options.era ?? scriptedTestEra();
  const json = JSON.stringify(era === 'legacy' ? options : { ...options, era });
  if (json.length > MAX_OPTIONS_ARG) {
    throw new RangeError(
      `scripted-server options are ${json.length} characters, too long for a command-line argument; write the fixture to a file and pass fixturePath`,
    );
  }
  return { command: process.execPath, args: [stdioEntryPath(), '--options', json] };
}

/** A client and a scripted server joined by an in-memory transport pair. */
export interface InMemoryConnection {
  /** The SDK client, already initialized. */
  readonly client: Client;
  /** The scripted server it talks to. */
  readonly scripted: ScriptedServer;
  /** Closes the client and the server. Idempotent. */
  close(): Promise<void>;
}

/**
 * Starts a scripted server in this process and connects a real SDK `Client` to it over
 * `InMemoryTransport.createLinkedPair()`. An `exit` trigger closes the server's transport instead of
 * ending the process.
 *
 * @throws {FixtureError} when the options or fixture are malformed.
 */
export async function connectInMemory(options: ScriptedServerOptions): Promise<InMemoryConnection> {
  const scripted = createScriptedServer(options);
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  await scripted.server.connect(serverTransport);
  const client = new Client({ name: 'stepbind-testkit-client', version: '0.1.0' });
  try {
    await client.connect(clientTransport);
  } catch (error) {
    await scripted.close();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    client,
    scripted,
    close() {
      closing ??= (async () => {
        await client.close();
        await scripted.close();
      })();
      return closing;
    },
  };
}
