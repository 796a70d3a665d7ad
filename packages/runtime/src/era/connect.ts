/**
 * Which protocol era a server speaks, decided per server. Over stdio the child is started once and
 * probed with `server/discover` (with the envelope); a result that proves 2026-07-28 makes a
 * {@link ModernConnection}. Any other answer (an error of any code, a result that is garbage or
 * lacks the version) or no answer within the probe budget falls back to `initialize` on the same
 * process through the SDK (2025-11-25, then whatever older version the server offers). The answer
 * is remembered per connection identity, so a restart of a legacy server skips the probe.
 *
 * Streamable HTTP stays on the 2025 path for now (see DESIGN §10.1 "Protocol eras").
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding';
import { rootsOf, type ClientHandlers } from '../client-capabilities.js';
import type { ServerConfig } from '../config.js';
import { identityKeyOf } from '../identity.js';
import { connectServer, openSession, StderrTail, type SdkConnection } from '../sdk.js';
import { StdioProcessTransport } from '../transports/stdio.js';
import { parseDiscover, withEnvelope, type DiscoverInfo } from './envelope.js';
import { ModernConnection } from './modern.js';

/** A connection of either era. */
export type AnyConnection = SdkConnection | ModernConnection;

/** The era of a connection: `modern` (2026-07-28) or `legacy` (an `initialize` session). */
export function eraOf(connection: AnyConnection): 'modern' | 'legacy' {
  return connection instanceof ModernConnection ? 'modern' : 'legacy';
}

/** How long the `server/discover` probe waits before falling back to `initialize`. */
export const DISCOVER_PROBE_TIMEOUT_MS = 2_000;

/** The probe's JSON-RPC id: a string, so it can never collide with the SDK's numeric ids. */
const PROBE_ID = 'stepbind-discover';

/** Options of {@link createEraConnector}. */
export interface EraConnectOptions {
  readonly signal?: AbortSignal;
  readonly handlers?: ClientHandlers;
  /** @default {@link DISCOVER_PROBE_TIMEOUT_MS} */
  readonly probeTimeoutMs?: number;
}

/**
 * A connector that picks the era per server and remembers it per connection identity (for the
 * runtime's lifetime). HTTP servers go through {@link connectServer} unchanged.
 */
export function createEraConnector(
  defaults: { readonly handlers?: ClientHandlers; readonly probeTimeoutMs?: number } = {},
): (
  name: string,
  config: ServerConfig,
  options: { signal?: AbortSignal },
) => Promise<AnyConnection> {
  const remembered = new Map<string, 'modern' | 'legacy'>();
  return async (name, config, options) => {
    const handlers = defaults.handlers ?? {};
    if (config.transport !== 'stdio') {
      return connectServer(name, config, {
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        handlers,
      });
    }
    const key = identityKeyOf(config);
    const connection = await connectStdioEra(name, config, {
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      handlers,
      ...(defaults.probeTimeoutMs === undefined ? {} : { probeTimeoutMs: defaults.probeTimeoutMs }),
      skipProbe: remembered.get(key) === 'legacy',
    });
    remembered.set(key, eraOf(connection));
    return connection;
  };
}

/**
 * Starts a stdio server and opens it in the era it speaks (see the module comment).
 *
 * @throws RuntimeError as {@link connectServer} does.
 */
export async function connectStdioEra(
  name: string,
  config: Extract<ServerConfig, { transport: 'stdio' }>,
  options: EraConnectOptions & { readonly skipProbe?: boolean } = {},
): Promise<AnyConnection> {
  const env: Record<string, string> = {};
  for (const key of config.envPassthrough) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  Object.assign(env, config.env);
  const stderrTail = new StderrTail(config.stderr);
  let partial = '';
  const stdio = new StdioProcessTransport({
    server: name,
    command: config.command,
    args: config.args,
    env,
    ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
    stderr: config.stderr,
    onStderr: (chunk) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = (lines.pop() ?? '').slice(-4096);
      for (const line of lines) stderrTail.push(line.slice(0, 4096));
    },
    maxMessageBytes: config.maxMessageBytes,
    closeGraceMs: 2_000,
  });
  const handlers: ClientHandlers = { roots: rootsOf(config.roots), ...options.handlers };
  let discover: DiscoverInfo | undefined;
  try {
    await stdio.start();
    if (options.skipProbe !== true) {
      discover = await probe(stdio, options.probeTimeoutMs ?? DISCOVER_PROBE_TIMEOUT_MS, options);
    }
  } catch (error) {
    await stdio.close();
    // A spawn error that names its config key (cwd, command) already says what to fix.
    if (error instanceof StepbindError && error.detail['configPath'] !== undefined) throw error;
    throw new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      `Server "${name}" could not be started (command "${config.command}"): ${error instanceof Error ? error.message : String(error)}${stderrTail.text.trim() === '' ? '' : `\nLast stderr lines:\n${stderrTail.text.trim()}`}\nCheck the command, its arguments and environment in the configuration.`,
      { detail: { server: name, stderr: stderrTail.text.trim() }, cause: error },
    );
  }
  if (discover !== undefined) {
    const modern = new ModernConnection({
      name,
      transport: stdio,
      discover,
      pid: stdio.pid,
      stderr: stderrTail,
      handlers,
      fault: () => stdio.fault?.(undefined),
    });
    modern.listen();
    return modern;
  }
  // Legacy: `initialize` through the SDK on the same, already started process.
  return openSession(name, startedTransport(stdio), {
    timeoutMs: config.startupTimeoutMs,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    pid: () => stdio.pid,
    fault: () => stdio.fault,
    stderrTail,
    handlers,
  });
}

/**
 * Sends `server/discover` and waits for its answer at most `timeoutMs`. `undefined` for anything
 * but a result that proves the modern era; never keyed to one error code.
 */
function probe(
  transport: Transport,
  timeoutMs: number,
  options: { readonly signal?: AbortSignal },
): Promise<DiscoverInfo | undefined> {
  return new Promise<DiscoverInfo | undefined>((resolve, reject) => {
    const done = (value: DiscoverInfo | undefined): void => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', abort);
      transport.onmessage = undefined;
      transport.onclose = undefined;
      resolve(value);
    };
    const abort = (): void => {
      clearTimeout(timer);
      reject(new Error('the start was cancelled'));
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    options.signal?.addEventListener('abort', abort, { once: true });
    transport.onmessage = (message: JSONRPCMessage) => {
      const m = message as Record<string, unknown>;
      if (m['id'] !== PROBE_ID || 'method' in m) return;
      done('result' in m ? parseDiscover(m['result']) : undefined);
    };
    transport.onclose = () => {
      clearTimeout(timer);
      reject(new Error('the server exited while answering server/discover'));
    };
    transport
      .send({
        jsonrpc: '2.0',
        id: PROBE_ID,
        method: 'server/discover',
        params: withEnvelope(),
      })
      .catch((error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      });
  });
}

/**
 * The started stdio transport for the SDK client: `start()` does nothing more, and a late answer to
 * the probe (a server that was slow, not silent) is dropped instead of reaching the SDK.
 */
function startedTransport(inner: StdioProcessTransport): Transport {
  const wrapper: Transport = {
    start: () => Promise.resolve(),
    send: (message) => inner.send(message),
    close: () => inner.close(),
  };
  inner.onmessage = (message: JSONRPCMessage) => {
    if ((message as { id?: unknown }).id === PROBE_ID) return;
    wrapper.onmessage?.(message);
  };
  inner.onerror = (error) => wrapper.onerror?.(error);
  inner.onclose = () => wrapper.onclose?.();
  return wrapper;
}
