import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { readFile } from 'node:fs/promises';
import { stdioEntryPath, type StdioServerParams } from './connect.js';

/**
 * How a hostile server answers one method. Every reply except `normal` breaks the protocol in a way
 * the SDK's own server would never allow, which is why these servers speak raw JSON-RPC.
 *
 * - `normal`: a valid answer (see {@link HostileServerOptions}).
 * - `both-result-and-error` / `neither-result-nor-error`: a response carrying both members, or none.
 * - `invalid-id`: a valid result under the given id (e.g. `null`, `1.5`, `{}`) instead of the request's.
 * - `oversized`: a valid answer padded to at least `bytes` bytes on one line.
 * - `not-json`: a line that is not JSON, and no answer.
 * - `silent`: no answer at all.
 * - `progress-around`: a valid answer written in one piece with a `notifications/progress` for the
 *   request's token before it (progress 1 of 2) and one after it (2 of 2, a report after the result).
 */
export type HostileReply =
  | { readonly kind: 'normal' }
  | { readonly kind: 'both-result-and-error' }
  | { readonly kind: 'neither-result-nor-error' }
  | { readonly kind: 'invalid-id'; readonly id: unknown }
  | { readonly kind: 'oversized'; readonly bytes: number }
  | { readonly kind: 'not-json' }
  | { readonly kind: 'silent' }
  | { readonly kind: 'progress-around' };

/**
 * Options of a hostile stdio server: a raw JSON-RPC process that answers `initialize` (tools
 * capability), `tools/list` (one page with the tool `echo`), `tools/call` (`"ok"`) and `ping`, and
 * misbehaves as told. Plain JSON, so they travel on the command line.
 */
export interface HostileServerOptions {
  /** The reply per method (`initialize`, `tools/list`, `tools/call`, ...). @default normal */
  readonly replies?: Readonly<Record<string, HostileReply>>;
  /** Ignore SIGTERM, so that only SIGKILL ends the server. @default false */
  readonly ignoreSigterm?: boolean;
  /** Keep running after stdin closes (a server that never notices its client left). @default false */
  readonly ignoreStdinEnd?: boolean;
  /**
   * Before answering `initialize`, start a grandchild that shares the server's stdout and stderr
   * and lives until it is killed (what `npx`, `uv run` and `docker run -i` leave behind).
   */
  readonly grandchild?: { readonly ignoreSigterm: boolean };
  /**
   * Start the server through `sh -c '...; exit $?'`, so that the configured command is a shell and
   * the server is its child (the shell cannot replace itself with the server).
   */
  readonly wrapper?: 'sh';
  /**
   * Append one JSON line per process ({@link HostilePid}) to this file once
   * it is running (and, for the grandchild, once it ignores SIGTERM if asked to).
   */
  readonly pidFile?: string;
  /**
   * Serve Streamable HTTP on 127.0.0.1 instead of stdio, answering each request with a JSON body or
   * one SSE event (see {@link startHostileHttpServer}).
   */
  readonly http?: 'json' | 'sse';
}

/** One line of a hostile server's pid file. */
export interface HostilePid {
  readonly role: 'server' | 'grandchild';
  readonly pid: number;
  /** The parent's pid: for a server started through `sh`, the shell (the group leader). */
  readonly ppid: number;
  /** The process group the server runs in (the grandchild inherits it); Linux only. */
  readonly pgid?: number;
}

/**
 * Parameters that start a hostile server (a `mcpServers` entry's `command` and `args`, or
 * `new StdioClientTransport(params)`). The entry is the compiled `dist/server/hostile.js`.
 */
export function hostileServerParams(options: HostileServerOptions = {}): StdioServerParams {
  const node = [stdioEntryPath('hostile.js'), '--options', JSON.stringify(options)];
  if (options.wrapper === 'sh') {
    return { command: 'sh', args: ['-c', '"$0" "$@"; exit $?', process.execPath, ...node] };
  }
  return { command: process.execPath, args: node };
}

/** Reads a hostile server's pid file; `[]` when nothing was written yet. */
export async function readHostilePids(path: string): Promise<HostilePid[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as HostilePid);
}

/** @internal Appends one pid line (used by the server process). */
export function writeHostilePid(path: string, entry: HostilePid): void {
  appendFileSync(path, `${JSON.stringify(entry)}\n`);
}

/** A hostile Streamable HTTP server running as a child process. */
export interface HostileHttpServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** The child's process id. */
  readonly pid: number;
  /** Ends the child and waits for it to exit. Idempotent. */
  close(): Promise<void>;
}

/**
 * Starts a hostile server in HTTP mode (`options.http`, default `json`) as a child process and
 * resolves once it listens.
 */
export async function startHostileHttpServer(
  options: Omit<HostileServerOptions, 'http' | 'wrapper' | 'grandchild'> & {
    readonly http?: 'json' | 'sse';
  } = {},
): Promise<HostileHttpServer> {
  const params = hostileServerParams({ ...options, http: options.http ?? 'json' });
  const child = spawn(params.command, params.args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`hostile HTTP server exited with ${code}`)));
  });
  lines.close();
  child.stdout.destroy();
  const { url } = JSON.parse(first) as { url: string };
  let closing: Promise<void> | undefined;
  return {
    url,
    pid: child.pid ?? 0,
    close() {
      closing ??= (async () => {
        child.stdin.end();
        await exited;
      })();
      return closing;
    },
  };
}
