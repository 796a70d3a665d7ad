import { spawn } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Sdk2ServerOptions } from './sdk2-catalog.js';
import type { Sdk2HttpEvent } from './sdk2-http.js';

/** Absolute path of a compiled `era/` entry, also when this module runs from `src/`. */
function entryPath(file: string): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const src = basename(here) === 'era' && basename(dirname(here)) === 'src';
  return src ? join(dirname(dirname(here)), 'dist', 'era', file) : join(here, file);
}

/**
 * `command` / `args` of testkit's SDK 2.4.0 stdio server (`serveStdio`, dual era unless
 * `modernOnly`), for a stepbind server config or the SDK's `StdioClientTransport`.
 */
export function sdk2StdioServerParams(options: Sdk2ServerOptions = {}): {
  readonly command: string;
  readonly args: string[];
} {
  return {
    command: process.execPath,
    args: [
      entryPath('sdk2-server.js'),
      String(options.tools ?? 6),
      String(options.pageSize ?? 2),
      (options.ttls ?? [60_000, 0, 5_000]).join(','),
      ...(options.modernOnly === true ? ['--modern-only'] : []),
    ],
  };
}

/** How {@link spawnSdk2HttpServer} starts the child. */
export interface Sdk2HttpSpawnOptions {
  /** Port to listen on (a restart on the same port plays a server restart). @default 0 (any) */
  readonly port?: number;
  /** Extra environment variables of the child. */
  readonly env?: Readonly<Record<string, string>>;
}

/** A running SDK 2.4.0 Streamable HTTP server child (see {@link spawnSdk2HttpServer}). */
export interface Sdk2HttpServerProcess {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Every event the server printed so far, in order (live view). */
  readonly events: readonly Sdk2HttpEvent[];
  /**
   * Resolves with the first event, printed or still to come, that `predicate` accepts.
   * @throws Error when the process exits first.
   */
  waitFor(predicate: (event: Sdk2HttpEvent) => boolean): Promise<Sdk2HttpEvent>;
  /**
   * Resolves once every event the server printed before this call has been read into `events` (a
   * request answered a moment ago may not have been read yet).
   */
  sync(): Promise<void>;
  /** Resolves once no TCP connection to the server is open (every client socket has closed). */
  idle(): Promise<void>;
  /** Changes the catalog (adds `added<n>`) and announces it; resolves with the change count. */
  change(): Promise<number>;
  /**
   * Ends the server (stdin closes; SIGKILL after 5 s) and then kills what is left of its process
   * group. Idempotent.
   */
  close(): Promise<void>;
  /** Same as {@link Sdk2HttpServerProcess.close}. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts testkit's `@modelcontextprotocol/server` 2.4.0 server behind `createMcpHandler` over real
 * Streamable HTTP in a child process of its own process group (the compiled `dist/era/sdk2-http.js`;
 * run `tsc -b` first) and resolves with its URL once it listens. Dual era (modern, and a stateless
 * 2025 fallback) unless `modernOnly`.
 *
 * @throws Error with the child's stderr when it exits before listening.
 */
export async function spawnSdk2HttpServer(
  options: Sdk2ServerOptions = {},
  spawnOptions: Sdk2HttpSpawnOptions = {},
): Promise<Sdk2HttpServerProcess> {
  const child = spawn(
    process.execPath,
    [
      entryPath('sdk2-http.js'),
      '--options',
      JSON.stringify(options),
      '--port',
      String(spawnOptions.port ?? 0),
    ],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, ...spawnOptions.env },
    },
  );
  const pid = child.pid;
  const events: Sdk2HttpEvent[] = [];
  const waiters = new Set<{
    readonly test: (event: Sdk2HttpEvent) => boolean;
    readonly resolve: (event: Sdk2HttpEvent) => void;
    readonly reject: (error: Error) => void;
  }>();
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4096);
  });
  let exitInfo: { code: number | null; signal: string | null } | undefined;
  const exitError = (): Error =>
    new Error(
      `sdk2 HTTP server ${String(pid)} exited (${exitInfo?.signal ?? `code ${String(exitInfo?.code)}`})${stderr === '' ? '' : `: ${stderr.trim()}`}`,
    );
  const exited = new Promise<void>((resolve) => {
    child.once('close', (code, signal) => {
      exitInfo = { code, signal };
      for (const waiter of waiters) waiter.reject(exitError());
      waiters.clear();
      resolve();
    });
  });
  const waitFor = (test: (event: Sdk2HttpEvent) => boolean): Promise<Sdk2HttpEvent> => {
    const seen = events.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    if (exitInfo !== undefined) return Promise.reject(exitError());
    return new Promise((resolve, reject) => waiters.add({ test, resolve, reject }));
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    let event: Sdk2HttpEvent;
    try {
      event = JSON.parse(line) as Sdk2HttpEvent;
    } catch {
      return;
    }
    events.push(event);
    for (const waiter of [...waiters]) {
      if (!waiter.test(event)) continue;
      waiters.delete(waiter);
      waiter.resolve(event);
    }
  });
  child.stdin.on('error', () => undefined);
  const killGroup = (): void => {
    if (pid === undefined) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // The group is already gone.
    }
  };
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      if (exitInfo === undefined) {
        child.stdin.end();
        const timer = setTimeout(killGroup, 5_000);
        await exited;
        clearTimeout(timer);
      }
      killGroup();
    })();
    return closing;
  };
  let tokens = 0;
  const change = async (): Promise<number> => {
    const token = ++tokens;
    const done = waitFor((e) => e.event === 'changed' && e.token === token);
    child.stdin.write(`${JSON.stringify({ command: 'change', token })}\n`);
    const event = await done;
    return event.event === 'changed' ? event.changes : 0;
  };
  const ask = async (command: 'sync' | 'idle'): Promise<void> => {
    const token = ++tokens;
    const reply = command === 'sync' ? 'synced' : 'idle';
    const done = waitFor((e) => e.event === reply && e.token === token);
    child.stdin.write(`${JSON.stringify({ command, token })}\n`);
    await done;
  };
  const sync = (): Promise<void> => ask('sync');
  const idle = (): Promise<void> => ask('idle');
  let listening: Sdk2HttpEvent;
  try {
    listening = await waitFor((e) => e.event === 'listening');
  } catch (error) {
    await close();
    throw error;
  }
  if (listening.event !== 'listening') throw new Error('unreachable');
  return {
    url: `http://127.0.0.1:${listening.port}/mcp`,
    port: listening.port,
    pid: listening.pid,
    events,
    waitFor,
    change,
    sync,
    idle,
    close,
    [Symbol.asyncDispose]: close,
  };
}
