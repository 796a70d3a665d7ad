/**
 * stepbind's stdio transport: an SDK `Transport` that runs the server in its own process group, so
 * that closing it ends every process the server started (a `sh -c` wrapper, `npx`, `uv run` and
 * `docker run -i` all leave a grandchild holding stdout), and that bounds each incoming line while
 * reading it. The SDK keeps the protocol; this file owns the process and the framing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile, stat } from 'node:fs/promises';
import { resolve as resolvePath } from 'node:path';
import type { Writable } from 'node:stream';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import {
  computeTransportDigest,
  ErrorCode,
  RuntimeError,
  type StepbindError,
} from '@stepbind/binding/internal';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  ENV_NAME,
  expectArray,
  expectOneOf,
  expectString,
  expectStringRecord,
  fail,
  serverConfigPath,
  type CommonServerConfig,
} from '../config-values.js';
import type { ConfigText } from '../interpolate.js';
import { MessageGuard, messageTooLargeError, type FaultError } from './guard.js';
import type { StderrTail } from './stderr-tail.js';

/** A server started as a child process speaking MCP over stdio. */
export interface StdioServerConfig extends CommonServerConfig {
  readonly transport: 'stdio';
  readonly command: string;
  readonly args: readonly string[];
  /** Extra environment variables, on top of the SDK's safe default set (PATH, HOME, ...). */
  readonly env: Readonly<Record<string, string>>;
  /** Names of variables copied from this process's environment when they are set. */
  readonly envPassthrough: readonly string[];
  readonly cwd?: string;
  /**
   * The server's stderr: `pipe` keeps the last lines for start errors and delivers every line as a
   * `server-stderr` event; `inherit` shares this process's stderr; `ignore` drops it. @default "pipe"
   */
  readonly stderr: 'pipe' | 'inherit' | 'ignore';
}

/** The keys of a stdio server entry on top of the common ones. */
export const STDIO_KEYS: readonly string[] = [
  'command',
  'args',
  'env',
  'envPassthrough',
  'cwd',
  'stderr',
];

/** Parses the stdio keys of a server entry (`text` checks and reads a string value, `read` a string of a record, both as the file's dialect says). */
export function parseStdioConfig(
  obj: Record<string, unknown>,
  path: string,
  common: CommonServerConfig,
  text: (value: unknown, at: string, allowEmpty?: boolean) => string,
  read: ConfigText,
): StdioServerConfig {
  const args = obj['args'] === undefined ? [] : expectArray(obj['args'], `${path}.args`);
  const passthrough =
    obj['envPassthrough'] === undefined
      ? []
      : expectArray(obj['envPassthrough'], `${path}.envPassthrough`);
  const config: StdioServerConfig = {
    ...common,
    transport: 'stdio',
    command: text(obj['command'], `${path}.command`),
    args: Object.freeze(args.map((a, i) => text(a, `${path}.args[${i}]`, true))),
    env: expectStringRecord(
      obj['env'],
      `${path}.env`,
      ENV_NAME,
      'an environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
      read,
    ),
    envPassthrough: Object.freeze(
      passthrough.map((a, i) => {
        const name = expectString(a, `${path}.envPassthrough[${i}]`);
        if (!ENV_NAME.test(name)) {
          fail(
            `${path}.envPassthrough[${i}]`,
            `${JSON.stringify(name)} is not an environment variable name`,
          );
        }
        return name;
      }),
    ),
    ...(obj['cwd'] === undefined ? {} : { cwd: text(obj['cwd'], `${path}.cwd`) }),
    stderr:
      obj['stderr'] === undefined
        ? 'pipe'
        : expectOneOf(obj['stderr'], `${path}.stderr`, ['pipe', 'inherit', 'ignore'] as const),
  };
  return Object.freeze(config);
}

/**
 * The identity key of a stdio server: command, args, env, passed-through values, cwd, audience,
 * roots and a non-default `maxMessageBytes`.
 */
export function stdioIdentityKey(config: StdioServerConfig): string {
  // A non-default message limit is part of the transport (a new limit needs a new connection);
  // the default is left out so that digests of configurations without it stay as they were.
  return computeTransportDigest({
    transport: 'stdio',
    command: config.command,
    args: config.args,
    env: config.env,
    // Values, not just names: a rotated token in this process's environment means a reconnect.
    envPassthrough: Object.fromEntries(
      config.envPassthrough.map((name) => [name, process.env[name] ?? null]),
    ),
    cwd: config.cwd ?? null,
    audience: config.audience,
    // Roots are declared at initialize: other roots need a new session.
    ...(config.roots.length === 0 ? {} : { roots: config.roots }),
    // A pinned era is part of the connection (left out for "auto", so older digests stay).
    ...(config.protocol === 'auto' ? {} : { protocol: config.protocol }),
    ...(config.maxMessageBytes === DEFAULT_MAX_MESSAGE_BYTES
      ? {}
      : { maxMessageBytes: config.maxMessageBytes }),
  });
}

/** The process-group transport of a stdio server entry, its stderr split into lines for `tail`. */
export function openStdioTransport(
  name: string,
  config: StdioServerConfig,
  options: { readonly stderr?: 'tail' | 'inherit'; readonly closeGraceMs?: number },
  tail: StderrTail,
): StdioProcessTransport {
  const env: Record<string, string> = {};
  for (const key of config.envPassthrough) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  Object.assign(env, config.env);
  let partial = '';
  return new StdioProcessTransport({
    server: name,
    command: config.command,
    args: config.args,
    env,
    ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
    stderr:
      options.stderr === 'inherit' || config.stderr === 'inherit'
        ? 'inherit'
        : config.stderr === 'ignore'
          ? 'ignore'
          : 'pipe',
    onStderr: (chunk) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = (lines.pop() ?? '').slice(-4096);
      for (const line of lines) tail.push(line.slice(0, 4096));
    },
    maxMessageBytes: config.maxMessageBytes,
    closeGraceMs: options.closeGraceMs ?? 2_000,
  });
}

/** Options of {@link StdioProcessTransport}. */
export interface StdioTransportOptions {
  /** Configured server name, for errors and config paths. */
  readonly server: string;
  readonly command: string;
  readonly args: readonly string[];
  /** Variables set on top of the SDK's default safe environment (PATH, HOME, ...). */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  /** `pipe` hands stderr to `onStderr`; `inherit` shares this process's stderr; `ignore` drops it. */
  readonly stderr: 'pipe' | 'inherit' | 'ignore';
  readonly onStderr?: (chunk: Buffer) => void;
  /** The longest line (one JSON-RPC message) the server may write, in bytes. */
  readonly maxMessageBytes: number;
  /**
   * How long `close()` waits at each step (after ending stdin, after SIGTERM, after SIGKILL) for the
   * process group to be gone before escalating.
   */
  readonly closeGraceMs: number;
}

/** Process groups of every stdio server alive in this process (for a forced exit). */
const liveGroups = new Map<number, ChildProcess>();
const GROUPS = process.platform !== 'win32';
const POLL_MS = 20;
const uncork = (stdin: Writable): void => stdin.uncork();

/**
 * Sends SIGKILL to the process group of every stdio server still running in this process, at once.
 * For a forced exit (a second Ctrl-C) that cannot wait for `close()`.
 */
export function killAllServerGroups(): void {
  for (const [pgid, child] of liveGroups) signalGroup(pgid, child, 'SIGKILL');
}

function signalGroup(pgid: number, child: ChildProcess, signal: NodeJS.Signals | 0): boolean {
  try {
    if (GROUPS) process.kill(-pgid, signal);
    else if (signal === 0) return child.exitCode === null && child.signalCode === null;
    else child.kill(signal);
    return true;
  } catch (error) {
    // EPERM: a member exists that we may not signal; it still counts as alive.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether a member of process group `pgid` is still running. `kill(-pgid, 0)` also counts zombies
 * (killed processes their new parent has not reaped yet; a container's init can take seconds), which
 * hold no pipe and no resource: on Linux the group's members are read from /proc and zombies are
 * left out.
 */
async function groupRunning(pgid: number, child: ChildProcess): Promise<boolean> {
  if (!signalGroup(pgid, child, 0)) return false;
  // The leader is our own child: while it runs, the group does (Node reaps it at once on exit).
  if (child.exitCode === null && child.signalCode === null) return true;
  if (process.platform !== 'linux') return true;
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return true;
  }
  const states = await Promise.all(
    entries
      .filter((name) => /^\d+$/.test(name))
      .map((name) =>
        readFile(`/proc/${name}/stat`, 'utf8').then(
          (text) => {
            // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
            return Number(fields[2]) === pgid ? (fields[0] ?? '') : '';
          },
          () => '',
        ),
      ),
  );
  return states.some((state) => state !== '' && state !== 'Z' && state !== 'X');
}

/**
 * A stdio client transport whose server is the leader of a new process group (a new session, via
 * `detached`). `close()` ends stdin, waits `closeGraceMs` for a clean exit, then sends SIGTERM and
 * later SIGKILL to the whole group, and resolves once no process of the group is left and every
 * pipe, listener and timer of the transport is released. A line over `maxMessageBytes` fails every
 * request in flight with `MESSAGE_TOO_LARGE` and closes the connection (framing is lost); malformed
 * messages go through a {@link MessageGuard}.
 */
export class StdioProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  readonly #options: StdioTransportOptions;
  readonly #guard: MessageGuard;
  #child: ChildProcess | undefined;
  #started = false;
  #shutdown: Promise<void> | undefined;
  #closeFired = false;
  #fault: FaultError | undefined;
  #partial: Buffer[] = [];
  #partialBytes = 0;
  #reading = true;
  #stdoutEnded = false;
  #stderrEnded = false;
  readonly #wakers = new Set<() => void>();
  readonly #drains = new Set<(error?: Error) => void>();
  #drain: Promise<void> | undefined;

  constructor(options: StdioTransportOptions) {
    this.#options = options;
    this.#guard = new MessageGuard(
      options.server,
      (message) => this.onmessage?.(message),
      (error) => this.onerror?.(error),
    );
  }

  /** The server's process id, which is also its process group id; `undefined` before spawn. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** The fault that closed this connection (an oversized message), if any. */
  get fault(): FaultError | undefined {
    return this.#fault;
  }

  /**
   * Spawns the server. @throws RuntimeError `SERVER_START_FAILED` whose detail names the config key
   *   at fault: `cwd` for a missing or non-directory working directory, otherwise `command`.
   */
  async start(): Promise<void> {
    if (this.#started) throw new Error('StdioProcessTransport already started');
    this.#started = true;
    const { command, args, env, cwd } = this.#options;
    let child: ChildProcess;
    try {
      child = spawn(command, [...args], {
        env: { ...getDefaultEnvironment(), ...env },
        ...(cwd === undefined ? {} : { cwd }),
        stdio: ['pipe', 'pipe', this.#options.stderr],
        detached: GROUPS,
        shell: false,
        windowsHide: true,
      });
    } catch (error) {
      // Some failures (ENOTDIR, EACCES on cwd) are thrown at once instead of emitted.
      this.#reading = false;
      throw await this.#spawnError(error as NodeJS.ErrnoException);
    }
    this.#child = child;
    const pid = child.pid;
    if (pid !== undefined) liveGroups.set(pid, child);
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
    } catch (error) {
      this.#reading = false;
      throw await this.#spawnError(error as NodeJS.ErrnoException);
    }
    child.on('error', (error) => this.onerror?.(error));
    child.once('exit', () => {
      this.#wake();
      this.#lost();
    });
    const { stdin, stdout, stderr } = child;
    stdin?.on('error', (error) => this.onerror?.(error));
    stdout?.on('data', (chunk: Buffer) => this.#onData(chunk));
    stdout?.on('error', (error) => this.onerror?.(error));
    stdout?.once('end', () => {
      this.#stdoutEnded = true;
      this.#wake();
      this.#lost();
    });
    const onStderr = this.#options.onStderr;
    if (stderr === null) {
      this.#stderrEnded = true;
    } else {
      stderr.on('data', onStderr ?? (() => undefined));
      stderr.once('end', () => {
        this.#stderrEnded = true;
        this.#wake();
      });
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (this.#shutdown !== undefined || stdin === null || stdin === undefined || !stdin.writable) {
      return Promise.reject(new Error('Not connected'));
    }
    // With requests in flight, the messages of one turn of the event loop leave in one write (one
    // syscall, one wake-up of the server): answers arrive together, so do their callers' next
    // requests. A lone request (sequential calls) is written at once.
    if (this.#guard.liveCount > 0 && stdin.writableCorked === 0) {
      stdin.cork();
      process.nextTick(uncork, stdin);
    }
    this.#guard.sent(message);
    let flushed: boolean;
    try {
      flushed = stdin.write(serializeMessage(message));
    } catch (error) {
      this.#guard.unsent(message);
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    if (flushed) return Promise.resolve();
    return this.#drained(stdin).catch((error: unknown) => {
      this.#guard.unsent(message);
      throw error;
    });
  }

  /**
   * One wait for `drain` shared by every write that found the pipe full: `drain` means the whole
   * buffer was flushed, so one listener serves a thousand concurrent calls (no listener warnings).
   */
  #drained(stdin: NodeJS.WritableStream): Promise<void> {
    this.#drain ??= new Promise<void>((resolve, reject) => {
      const settle = (error?: Error): void => {
        this.#drains.delete(settle);
        stdin.off('drain', onDrain);
        this.#drain = undefined;
        if (error === undefined) resolve();
        else reject(error);
      };
      const onDrain = (): void => settle();
      this.#drains.add(settle);
      stdin.once('drain', onDrain);
    });
    return this.#drain;
  }

  /** Ends the session and the server's whole process group. Idempotent; never rejects. */
  close(): Promise<void> {
    this.#shutdown ??= this.#stop();
    return this.#shutdown;
  }

  /** The server went away on its own (exit, or stdout closed): end the group and report it. */
  #lost(): void {
    if (this.#shutdown !== undefined) return;
    this.#shutdown = this.#stop();
  }

  async #stop(): Promise<void> {
    const child = this.#child;
    const pgid = child?.pid;
    for (const settle of [...this.#drains]) settle(new Error('Not connected'));
    if (child !== undefined && pgid !== undefined) {
      try {
        child.stdin?.end();
      } catch {
        // A stdin that already failed cannot be ended; the signals below still run.
      }
      const grace = this.#options.closeGraceMs;
      let gone = await this.#waitGroupGone(pgid, child, grace);
      for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
        if (gone) break;
        signalGroup(pgid, child, signal);
        gone = await this.#waitGroupGone(pgid, child, grace);
      }
      if (!gone) {
        // Only a process stuck in the kernel survives SIGKILL; it must not keep this host alive.
        child.unref();
        this.onerror?.(
          new Error(`process group ${pgid} of server "${this.#options.server}" survived SIGKILL`),
        );
      }
      // What the server wrote before it exited may still be in the pipes (its last messages, the
      // stderr lines that explain a crash): read it first, unless a process outside the group
      // keeps a pipe open.
      await this.#wait(grace, () => this.#stdoutEnded && this.#stderrEnded);
      liveGroups.delete(pgid);
      this.#release(child);
    }
    this.#reading = false;
    this.#partial = [];
    this.#guard.clear();
    if (!this.#closeFired) {
      this.#closeFired = true;
      this.onclose?.();
    }
  }

  #release(child: ChildProcess): void {
    child.removeAllListeners();
    for (const stream of [child.stdin, child.stdout, child.stderr]) {
      if (stream === null) continue;
      stream.removeAllListeners();
      // Swallow a late EPIPE from a stream being torn down.
      stream.on('error', () => undefined);
      stream.destroy();
    }
  }

  /** Resolves true once no process of the group runs, false after `ms`. Every timer is cleared. */
  #waitGroupGone(pgid: number, child: ChildProcess, ms: number): Promise<boolean> {
    return this.#wait(ms, async () => !(await groupRunning(pgid, child)));
  }

  /** Re-checks `done` on every exit/end event and every POLL_MS, for at most `ms`. */
  async #wait(ms: number, done: () => boolean | Promise<boolean>): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!(await done())) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          this.#wakers.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(POLL_MS, left));
        this.#wakers.add(wake);
      });
    }
    return true;
  }

  #wake(): void {
    for (const wake of [...this.#wakers]) wake();
  }

  #onData(chunk: Buffer): void {
    const max = this.#options.maxMessageBytes;
    let start = 0;
    while (this.#reading && start < chunk.length) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        const rest = chunk.length - start;
        if (this.#partialBytes + rest > max) {
          this.#tooLarge();
          return;
        }
        this.#partial.push(start === 0 ? chunk : chunk.subarray(start));
        this.#partialBytes += rest;
        return;
      }
      const length = this.#partialBytes + (newline - start);
      if (length > max) {
        this.#tooLarge();
        return;
      }
      let line: string;
      if (this.#partial.length === 0) {
        line = chunk.toString('utf8', start, newline);
      } else {
        this.#partial.push(chunk.subarray(start, newline));
        line = Buffer.concat(this.#partial, length).toString('utf8');
        this.#partial = [];
        this.#partialBytes = 0;
      }
      start = newline + 1;
      this.#line(line);
    }
  }

  #line(line: string): void {
    const text = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (text.trim() === '') return;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (error) {
      this.#guard.unparsable(text, error);
      return;
    }
    this.#guard.receive(raw);
  }

  #tooLarge(): void {
    this.#reading = false;
    this.#partial = [];
    this.#partialBytes = 0;
    const { server, maxMessageBytes } = this.#options;
    const context = {
      server,
      limit: maxMessageBytes,
      configKey: serverConfigPath(server, 'maxMessageBytes'),
      closed: true,
    };
    const fault: FaultError = (request) => messageTooLargeError(context, request);
    this.#fault = fault;
    const live = this.#guard.live;
    this.#guard.failAll(fault);
    if (live.length === 0) this.onerror?.(fault(undefined));
    this.#lost();
  }

  async #spawnError(error: NodeJS.ErrnoException): Promise<StepbindError> {
    const { server, command, cwd } = this.#options;
    if (cwd !== undefined && ['ENOENT', 'ENOTDIR', 'EACCES'].includes(error.code ?? '')) {
      const absolute = resolvePath(cwd);
      const problem = await stat(absolute).then(
        (s) => (s.isDirectory() ? undefined : 'is not a directory'),
        () => 'does not exist',
      );
      if (problem !== undefined) {
        const configPath = serverConfigPath(server, 'cwd');
        return new RuntimeError(
          ErrorCode.SERVER_START_FAILED,
          `Server "${server}" could not be started: its working directory ${absolute} ${problem}. Fix ${configPath} in the configuration.`,
          { detail: { server, cwd: absolute, configPath, reason: 'cwd' }, cause: error },
        );
      }
    }
    const configPath = serverConfigPath(server, 'command');
    const problem =
      error.code === 'ENOENT'
        ? 'was not found (not on PATH, or no such file)'
        : error.code === 'EACCES'
          ? 'is not executable'
          : `could not be run (${error.code ?? error.message})`;
    return new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      `Server "${server}" could not be started: command "${command}" ${problem}. Check ${configPath} (and PATH) in the configuration.`,
      { detail: { server, command, configPath, reason: 'command' }, cause: error },
    );
  }
}
