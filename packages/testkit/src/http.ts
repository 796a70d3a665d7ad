import { spawn } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { HttpServerEvent, HttpServerOptions, ScriptedServerOptions } from './types.js';

/** A scripted Streamable HTTP server running as a child process. */
export interface HttpServerProcess {
  /** The MCP endpoint, `http://<host>:<port>/mcp`. */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Every event the server printed so far, in order (live view). */
  readonly events: readonly HttpServerEvent[];
  /** Settles once the process has exited (never rejects). */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: string | null }>;
  /**
   * Resolves with the first event, already printed or still to come, that `predicate` accepts.
   * @throws Error when the process exits first.
   */
  waitFor(predicate: (event: HttpServerEvent) => boolean): Promise<HttpServerEvent>;
  /**
   * Makes the server forget every session while it keeps running (as after a restart behind a load
   * balancer, or a session expiry): the next request naming one gets 404, or 400 with
   * `unknownSession: 400`. Resolves with the number of sessions forgotten.
   */
  forgetSessions(): Promise<number>;
  /** Sends `signal` and resolves once the process is gone. @default "SIGKILL" */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Ends the server (stdin closes, it shuts down) and waits for it to exit. Idempotent. */
  close(): Promise<void>;
  /** Same as {@link HttpServerProcess.close}. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Absolute path of the compiled HTTP entry, also when this module runs from `src/`. */
function httpEntryPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = basename(here) === 'src' ? join(dirname(here), 'dist') : here;
  return join(root, 'server', 'http.js');
}

/**
 * Starts scripted MCP servers behind a real Streamable HTTP endpoint in a child process (the
 * compiled `dist/server/http.js`; run `tsc -b` first when testing from source) and resolves once it
 * listens. Each MCP session gets its own scripted server; killing the process and starting a new
 * one on the same `port` is how a test plays a server restart that forgets every session.
 *
 * @throws Error with the child's stderr when it exits before listening (a port in use, bad options).
 */
export async function spawnHttpServer(
  options: ScriptedServerOptions,
  http: HttpServerOptions = {},
): Promise<HttpServerProcess> {
  const child = spawn(
    process.execPath,
    [httpEntryPath(), '--options', JSON.stringify(options), '--http', JSON.stringify(http)],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const events: HttpServerEvent[] = [];
  interface Waiter {
    readonly test: (event: HttpServerEvent) => boolean;
    readonly resolve: (event: HttpServerEvent) => void;
    readonly reject: (error: Error) => void;
  }
  const waiters = new Set<Waiter>();
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4096);
  });
  let exitInfo: { code: number | null; signal: string | null } | undefined;
  const exitError = (): Error =>
    new Error(
      `scripted HTTP server ${String(child.pid)} exited (${exitInfo?.signal ?? `code ${String(exitInfo?.code)}`})${stderr === '' ? '' : `: ${stderr.trim()}`}`,
    );
  // 'close' comes after stdout has ended, so every line the server printed has been read.
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.once('close', (code, signal) => {
      exitInfo = { code, signal };
      for (const waiter of waiters) waiter.reject(exitError());
      waiters.clear();
      resolve(exitInfo);
    });
  });
  const waitFor = (test: (event: HttpServerEvent) => boolean): Promise<HttpServerEvent> => {
    const seen = events.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    if (exitInfo !== undefined) return Promise.reject(exitError());
    return new Promise((resolve, reject) => waiters.add({ test, resolve, reject }));
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    let event: HttpServerEvent;
    try {
      event = JSON.parse(line) as HttpServerEvent;
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
  let closing: Promise<void> | undefined;
  const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
    if (exitInfo === undefined) child.kill(signal);
    await exited;
  };
  const close = (): Promise<void> => {
    closing ??= (async () => {
      if (exitInfo !== undefined) return;
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    })();
    return closing;
  };
  let forgets = 0;
  const forgetSessions = async (): Promise<number> => {
    const nth = ++forgets;
    let seen = 0;
    const done = waitFor((e) => e.event === 'forgot' && ++seen === nth);
    child.stdin.write(`${JSON.stringify({ command: 'forget-sessions' })}\n`);
    const event = await done;
    return event.event === 'forgot' ? event.sessions : 0;
  };
  let listening: HttpServerEvent;
  try {
    listening = await waitFor((e) => e.event === 'listening');
  } catch (error) {
    await close();
    throw error;
  }
  if (listening.event !== 'listening') throw new Error('unreachable');
  const host = http.host ?? '127.0.0.1';
  return {
    url: `http://${host}:${listening.port}/mcp`,
    port: listening.port,
    pid: listening.pid,
    events,
    exited,
    waitFor,
    forgetSessions,
    kill,
    close,
    [Symbol.asyncDispose]: close,
  };
}
