/**
 * Connecting: builds one server's transport (see `transports/`), picks the protocol era (a server
 * is probed with `server/discover`, see `era/probe.ts`), and hands back a {@link Connection}: a
 * 2026-07-28 `ModernConnection` or, after `initialize` through the SDK client
 * (`sdk/open-session.ts`), a 2025-era session; a failed start is one typed error. The choice is
 * a table of strategies by transport and era plan ({@link STRATEGIES}); this file imports no SDK
 * module. An HTTP server that refuses Streamable HTTP's first POST with 400, 404 or 405 is tried
 * over the legacy HTTP+SSE transport (`transports/sse.ts`), and remembered as such.
 */
import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding/internal';
import { rootsOf, type ClientHandlers } from './client-capabilities.js';
import type { ServerConfig } from './config.js';
import type { Connection, EraMemory, ProtocolEra } from './connection.js';
import type { DiscoverInfo } from './era/envelope.js';
import { ModernHttpTransport } from './era/http.js';
import { ModernConnection } from './era/modern.js';
import { eraPlan, notModernError, slowProbeHint, type EraPlan } from './era/pin.js';
import { probeEraWithRetry, startedTransport } from './era/probe.js';
import { createDebug } from './log.js';
import { NO_REDACTION, redactUrl, type Redactor } from './redact.js';
import { openSession } from './sdk/open-session.js';
import type { FaultSource } from './transports/guard.js';
import { httpFailure, type HttpSessionWatch } from './transports/http-session.js';
import { bearerAuthorizer } from './transports/http-auth.js';
import {
  identityKeyOf,
  openTransport,
  type HttpAuthOptions,
  type HttpServerConfig,
  type Transport,
} from './transports/index.js';
import { StderrTail } from './transports/stderr-tail.js';
import { isSseFallbackStatus, startSse } from './transports/sse.js';
import type { RuntimeClock } from './clock.js';

const debugConnect = createDebug('stepbind:connect');

/**
 * The wire transport of a connection: `stdio`, `http` (Streamable HTTP, both eras) or `sse` (the
 * legacy HTTP+SSE transport, by `type: "sse"` or the fallback).
 */
export type WireTransport = 'stdio' | 'http' | 'sse';

/** The transport of each connection {@link connectServer} opened (read by `status()`). */
const WIRES = new WeakMap<Connection, WireTransport>();

/** The transport `connection` runs over, when {@link connectServer} opened it. */
export function wireTransportOf(connection: Connection): WireTransport | undefined {
  return WIRES.get(connection);
}

/** Options for {@link connectServer}. */
export interface ConnectOptions {
  readonly signal?: AbortSignal;
  /** Overrides the config's `startupTimeoutMs`. */
  readonly timeoutMs?: number;
  /** Where a stdio child's stderr goes: kept as a tail for error messages, or inherited. @default "tail" */
  readonly stderr?: 'tail' | 'inherit';
  /**
   * Answers to server-to-client requests (sampling, elicitation). Roots come from the config's
   * `roots` unless given here.
   */
  readonly handlers?: ClientHandlers;
  /**
   * How long closing a stdio server waits at each step for its process group to be gone: after
   * ending stdin, after SIGTERM to the group, after SIGKILL to the group. @default 2000
   */
  readonly closeGraceMs?: number;
  /**
   * Overrides the config's `discoverTimeoutMs` for a server with `protocol: "auto"`: how long it
   * may take to answer the `server/discover` probe before stepbind falls back to `initialize` (a
   * 2025-era server answers it at once with an error). `0` skips the probe: the 2025 era only.
   * Ignored for a pinned server. @default the config's `discoverTimeoutMs` (2000)
   */
  readonly probeTimeoutMs?: number;
  /**
   * The era each `protocol: "auto"` server spoke, by identity key: a server remembered as `legacy`
   * is not probed again, and every such connection's era is recorded here. A pinned server neither
   * reads nor writes its era (and its pin is part of its identity key). An HTTP server that fell
   * back to the legacy HTTP+SSE transport is remembered as `sse`, pinned or not: it reconnects over
   * HTTP+SSE at once, with no probe and no Streamable HTTP POST. @default a fresh map (no memory)
   */
  readonly eras?: EraMemory;
  /**
   * The runtime's clock: a modern connection's listen stream arms its re-listen backoff on it.
   * @default the real clock
   */
  readonly clock?: RuntimeClock;
  /**
   * An HTTP server's authorizer and redactor, kept by the caller across reconnects (a refreshed
   * token never restarts a connection). Every request of both eras, the probe and the listen
   * stream included, goes through the authorizer; its refusal (`AUTH_REQUIRED`, `AUTH_FAILED`)
   * fails the start with that code. @default a bearer entry's static authorizer; none for OAuth
   *   (the runtime keeps one per server; other callers bring theirs)
   */
  readonly auth?: HttpAuthOptions;
}

/** Everything a connect strategy needs about the one server being started (of config `C`). */
interface ConnectContext<C extends ServerConfig = ServerConfig> {
  readonly name: string;
  readonly config: C;
  readonly options: ConnectOptions;
  /** The transport `openTransport` built (nothing sent yet). */
  readonly transport: Transport;
  readonly pid: () => number | undefined;
  readonly fault: FaultSource;
  readonly http: { readonly watch: HttpSessionWatch; readonly redactor: Redactor } | undefined;
  readonly redactor: Redactor;
  readonly stderrTail: StderrTail;
  readonly handlers: ClientHandlers;
  readonly plan: EraPlan;
  /** The whole start budget, of which `initialize` gets what the probe left. */
  readonly timeoutMs: number;
  readonly started: number;
  /** Records the era the server spoke (only when the plan remembers it). */
  readonly remember: (era: ProtocolEra) => void;
  /** Records that the server is reached over HTTP+SSE (every plan). */
  readonly rememberSse: () => void;
  /** What the strategy found out on the way, for the start error. */
  readonly state: {
    /** The probe got no answer in time: the start error then suggests a longer budget. */
    probeTimedOut: boolean;
    /** The wire transport of the connection being opened (`sse` from the fallback on). */
    wire: WireTransport;
    /** The status of the refused Streamable HTTP POST that made the start try HTTP+SSE. */
    fellBackOn?: number;
    /**
     * When the probe last found the authorizer logging in: a login is not the server's start,
     * so `initialize`'s share of the budget counts from here.
     */
    busyAt?: number;
  };
}

/** One way of connecting: what to do for a transport kind and whether the era is probed. */
type ConnectStrategy<C extends ServerConfig> = (ctx: ConnectContext<C>) => Promise<Connection>;

/**
 * The strategies by transport kind and era plan: `legacy` when the plan has no probe (pinned to
 * 2025-11-25, remembered as legacy, or `probeTimeoutMs: 0`), `probe` otherwise; for HTTP, `sse`
 * when the server is reached over the legacy HTTP+SSE transport (`type: "sse"`, or remembered so).
 */
const STRATEGIES: {
  readonly stdio: Readonly<Record<'probe' | 'legacy', ConnectStrategy<StdioConfig>>>;
  readonly http: Readonly<Record<'probe' | 'legacy' | 'sse', ConnectStrategy<HttpServerConfig>>>;
} = {
  stdio: { probe: probeStdio, legacy: initializeOnly },
  http: { probe: probeHttp, legacy: initializeHttp, sse: initializeSse },
};

type StdioConfig = Extract<ServerConfig, { readonly transport: 'stdio' }>;

/**
 * Starts (stdio) or opens (HTTP) a connection to one configured server in the era it speaks: a
 * stdio server that answers `server/discover` with 2026-07-28 gets a {@link ModernConnection};
 * any other answer, or none within `probeTimeoutMs`, falls back to `initialize` on the same process
 * (2025-11-25, or an older version the server offers). An HTTP server is probed the same way with
 * one stateless POST (`era/http.ts`); one that does not answer it in 2026-07-28 gets a 2025
 * session. A server remembered as legacy in `eras` is not probed again. The server's `protocol`
 * pin overrides all of this (`era/pin.ts`): `2025-11-25` is never probed, `2026-07-28` never falls
 * back and may take the whole start budget to answer. A stdio server runs in its own process
 * group; a failed start ends the whole group before this rejects.
 *
 * @throws RuntimeError `SERVER_START_FAILED` (with the server's last stderr lines; for a missing
 *   working directory or command, or a server pinned to 2026-07-28 that is not one,
 *   `detail.configPath` names the key at fault), `TIMEOUT`,
 *   `ABORTED`, `MESSAGE_TOO_LARGE` or `MALFORMED_MESSAGE` (the `initialize` response);
 *   `AUTH_REQUIRED` / `AUTH_FAILED` when the server's authorizer could not authorize the start.
 */
export async function connectServer(
  name: string,
  config: ServerConfig,
  options: ConnectOptions = {},
): Promise<Connection> {
  const timeoutMs = options.timeoutMs ?? config.startupTimeoutMs;
  // A bearer token needs no state: a caller that brings no authorizer still sends it.
  if (options.auth === undefined && config.transport === 'http' && config.auth?.type === 'bearer') {
    options = { ...options, auth: { authorizer: bearerAuthorizer(name, config.auth) } };
  }
  const stderrTail = new StderrTail(config.transport === 'stdio' ? config.stderr : 'pipe');
  const key = identityKeyOf(config);
  const sse =
    config.transport === 'http' && (config.legacySse === true || options.eras?.get(key) === 'sse');
  const { transport, pid, fault, http } = openTransport(
    name,
    config,
    {
      ...(options.stderr === undefined ? {} : { stderr: options.stderr }),
      ...(options.closeGraceMs === undefined ? {} : { closeGraceMs: options.closeGraceMs }),
      ...(options.auth === undefined ? {} : { auth: options.auth }),
      sse,
    },
    stderrTail,
  );
  const plan = eraPlan(config, timeoutMs, { ...options, key });
  const ctx: ConnectContext = {
    name,
    config,
    options,
    transport,
    pid,
    fault,
    http,
    redactor: http?.redactor ?? NO_REDACTION,
    stderrTail,
    handlers: { roots: rootsOf(config.roots), ...options.handlers },
    plan,
    timeoutMs,
    started: performance.now(),
    remember: (era) => {
      // A server remembered as HTTP+SSE stays so (its era is legacy by construction).
      if (plan.remember && options.eras?.get(key) !== 'sse') options.eras?.set(key, era);
    },
    rememberSse: () => options.eras?.set(key, 'sse'),
    state: {
      probeTimedOut: false,
      wire: config.transport === 'stdio' ? 'stdio' : sse ? 'sse' : 'http',
    },
  };
  const mode = plan.probeMs > 0 ? 'probe' : 'legacy';
  let connection: Connection;
  try {
    connection = await (config.transport === 'stdio'
      ? STRATEGIES.stdio[mode]({ ...ctx, config })
      : STRATEGIES.http[sse ? 'sse' : mode]({ ...ctx, config }));
  } catch (error) {
    throw startError(ctx, error);
  }
  WIRES.set(connection, ctx.state.wire);
  return connection;
}

/** No probe: `initialize` on the transport as it is (the 2025 era). */
async function initializeOnly(ctx: ConnectContext): Promise<Connection> {
  const connection = await initialize(ctx, ctx.transport, ctx.options.signal);
  ctx.remember('legacy');
  return connection;
}

/**
 * HTTP: a stateless POST of `server/discover` (`era/http.ts`); anything but a 2026-07-28 answer
 * falls back to a 2025 session (`initialize`) on the SDK transport, untouched so far.
 */
async function probeHttp(ctx: ConnectContext<HttpServerConfig>): Promise<Connection> {
  const { name, config } = ctx;
  const modernHttp = new ModernHttpTransport({
    server: name,
    url: config.url,
    headers: config.headers,
    maxMessageBytes: config.maxMessageBytes,
    redactor: ctx.redactor,
    ...(ctx.options.auth?.authorizer === undefined
      ? {}
      : { authorizer: ctx.options.auth.authorizer }),
  });
  const authorizer = ctx.options.auth?.authorizer;
  const outcome = await startAndProbe(
    name,
    modernHttp,
    ctx.plan.probeMs,
    ctx.options.signal,
    () => {
      const busy = authorizer?.busy?.() === true;
      if (busy) ctx.state.busyAt = performance.now();
      return busy;
    },
  );
  if (outcome.era === 'modern') {
    ctx.remember('modern');
    return modernConnection({
      name,
      transport: modernHttp,
      discover: outcome.discover,
      stderr: ctx.stderrTail,
      handlers: ctx.handlers,
      redactor: ctx.redactor,
      ...(ctx.options.clock === undefined ? {} : { clock: ctx.options.clock }),
    });
  }
  await modernHttp.close();
  if (ctx.plan.modernOnly) throw notModernError(name, outcome, ctx.plan.probeMs);
  ctx.state.probeTimedOut = outcome.answer === 'timeout';
  // A 404 or 405 to a POST is no Streamable HTTP endpoint: the SSE stream is tried at once rather
  // than POSTing initialize to be refused the same way (a 400 may be a stateful Streamable HTTP
  // server refusing a request outside a session, so initialize decides then).
  const refused = modernHttp.lastHttpFailure;
  if (refused === 404 || refused === 405) return fallBackToSse(ctx, refused, 'server/discover');
  return initializeHttp(ctx);
}

/**
 * `initialize` over Streamable HTTP; when the server refuses that first POST with 400, 404 or 405
 * (the specification's backwards compatibility rule) and no JSON-RPC answer, the legacy HTTP+SSE
 * transport is tried.
 */
async function initializeHttp(ctx: ConnectContext<HttpServerConfig>): Promise<Connection> {
  try {
    return await initializeOnly(ctx);
  } catch (error) {
    const refused = ctx.http?.watch.firstPostRefusal;
    if (!isSseFallbackStatus(refused) || ctx.options.signal?.aborted === true) throw error;
    return fallBackToSse(ctx, refused!, 'initialize');
  }
}

/**
 * Opens the legacy HTTP+SSE transport after Streamable HTTP was refused with `status` (logged on
 * `stepbind:connect`), `initialize`s over it and remembers the server as `sse`.
 */
async function fallBackToSse(
  ctx: ConnectContext<HttpServerConfig>,
  status: number,
  method: string,
): Promise<Connection> {
  const { name, config } = ctx;
  debugConnect(
    `server "${name}": the Streamable HTTP POST of ${method} was answered HTTP ${status}; trying the legacy HTTP+SSE transport (GET ${redactUrl(config.url)})`,
  );
  const opened = openTransport(
    name,
    config,
    { ...(ctx.options.auth === undefined ? {} : { auth: ctx.options.auth }), sse: true },
    ctx.stderrTail,
  );
  ctx.state.wire = 'sse';
  ctx.state.fellBackOn = status;
  const connection = await initializeSse({
    ...ctx,
    transport: opened.transport,
    fault: opened.fault,
    http: opened.http,
  });
  debugConnect(`server "${name}": connected over HTTP+SSE; reconnects use it directly`);
  return connection;
}

/**
 * HTTP+SSE: opens the GET stream and waits for its `endpoint` event within the start budget (the
 * SDK's `start()` has none), then `initialize` (always the 2025 era: no probe).
 */
async function initializeSse(ctx: ConnectContext<HttpServerConfig>): Promise<Connection> {
  const { name, transport, options } = ctx;
  await startSse(name, transport, remainingMs(ctx), options.signal);
  const connection = await initialize(ctx, startedTransport(transport), options.signal);
  ctx.remember('legacy');
  ctx.rememberSse();
  return connection;
}

/** What is left of the start budget (a login in progress not counted). */
function remainingMs(ctx: ConnectContext): number {
  return Math.max(
    1,
    ctx.timeoutMs - Math.round(performance.now() - Math.max(ctx.started, ctx.state.busyAt ?? 0)),
  );
}

/**
 * stdio: `server/discover` on the started process; a 2026-07-28 answer is a modern connection.
 * Otherwise `initialize` on the same process, during which a server that was slow rather than
 * silent may still answer the probe: a modern answer then ends the `initialize` and the connection
 * is modern after all (a modern-only server that booted after the budget, under load).
 */
async function probeStdio(ctx: ConnectContext): Promise<Connection> {
  const { name, transport, options } = ctx;
  const outcome = await startAndProbe(name, transport, ctx.plan.probeMs, options.signal);
  if (outcome.era === 'modern') {
    ctx.remember('modern');
    return modernConnection(stdioModern(ctx, outcome.discover));
  }
  if (ctx.plan.modernOnly) {
    // Ends the whole process group before the pin's error is reported.
    await transport.close();
    throw notModernError(name, outcome, ctx.plan.probeMs);
  }
  ctx.state.probeTimedOut = outcome.answer === 'timeout';
  const lateProbe = new AbortController();
  let lateDiscover: DiscoverInfo | undefined;
  const late = startedTransport(transport, (discover) => {
    lateDiscover = discover;
    lateProbe.abort();
  });
  let connection: Connection;
  try {
    connection = await initialize(
      ctx,
      late,
      AbortSignal.any(
        options.signal === undefined ? [lateProbe.signal] : [options.signal, lateProbe.signal],
      ),
    );
  } catch (error) {
    if (lateDiscover === undefined || options.signal?.aborted === true) {
      if (lateDiscover !== undefined) await transport.close();
      throw error;
    }
    ctx.remember('modern');
    // The SDK's initialize took id 0; its late answer is dropped as no pending request.
    return modernConnection({ ...stdioModern(ctx, lateDiscover), firstId: 1 });
  }
  // A late modern answer that came with a 2025 session that succeeded: the session is kept.
  late.attach();
  ctx.remember('legacy');
  return connection;
}

/** `initialize` with what is left of the start budget. */
function initialize(
  ctx: ConnectContext,
  transport: Transport,
  signal: AbortSignal | undefined,
): Promise<Connection> {
  return openSession(ctx.name, transport, {
    timeoutMs: remainingMs(ctx),
    ...(signal === undefined ? {} : { signal }),
    pid: ctx.pid,
    fault: ctx.fault,
    stderrTail: ctx.stderrTail,
    handlers: ctx.handlers,
    ...(ctx.http === undefined ? {} : { http: ctx.http }),
  });
}

/** The options of a modern connection over a stdio process. */
function stdioModern(
  ctx: ConnectContext,
  discover: DiscoverInfo,
): ConstructorParameters<typeof ModernConnection>[0] {
  return {
    name: ctx.name,
    transport: ctx.transport,
    discover,
    pid: ctx.pid(),
    stderr: ctx.stderrTail,
    handlers: ctx.handlers,
    fault: ctx.fault,
    ...(ctx.options.clock === undefined ? {} : { clock: ctx.options.clock }),
  };
}

/** The one place a {@link ModernConnection} is made: built, and its listen stream started. */
function modernConnection(options: ConstructorParameters<typeof ModernConnection>[0]): Connection {
  const modern = new ModernConnection(options);
  modern.listen();
  return modern;
}

/**
 * A start failure as the caller sees it: `SERVER_START_FAILED` says what was started, why, the
 * server's last stderr lines and what to check; other codes pass (redacted).
 */
function startError(ctx: ConnectContext, error: unknown): Error {
  const { name, config, redactor } = ctx;
  if (!(error instanceof StepbindError) || error.code !== ErrorCode.SERVER_START_FAILED)
    return redactor.error(error as Error);
  // A start error that names its config key (cwd, command) already says what to fix.
  if (error.detail['configPath'] !== undefined) return error;
  const tail = ctx.stderrTail.text.trim();
  const what =
    config.transport === 'stdio' ? `command "${config.command}"` : `URL ${redactUrl(config.url)}`;
  const failure = config.transport === 'http' ? httpFailure(error.cause) : {};
  const fellBackOn = ctx.state.fellBackOn;
  const advice = ctx.state.probeTimedOut
    ? slowProbeHint(name, ctx.plan.probeMs)
    : fellBackOn !== undefined
      ? `It refused Streamable HTTP (HTTP ${fellBackOn} to the first POST), so the legacy HTTP+SSE transport was tried and failed too: check the URL (an HTTP+SSE server's is usually its SSE stream, such as /sse).`
      : config.transport === 'stdio'
        ? 'Check the command, its arguments and environment in the configuration.'
        : failure.httpStatus === 401 || failure.httpStatus === 403
          ? 'The server refused the credentials: check the values sent in "headers".'
          : 'Check the URL, the headers and that the server is running.';
  const why = [
    failure.httpStatus === undefined ? '' : `HTTP ${failure.httpStatus}: `,
    error.message,
    failure.code === undefined ? '' : ` (${failure.code})`,
  ].join('');
  return redactor.error(
    new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      `Server "${name}" could not be started (${what}): ${why}${tail === '' ? '' : `\nLast stderr lines:\n${tail}`}\n${advice}`,
      {
        detail: {
          server: name,
          stderr: tail,
          ...failure,
          ...(config.transport === 'http' ? { transport: ctx.state.wire } : {}),
        },
        cause: error.cause,
      },
    ),
  );
}

/**
 * Starts a transport and probes its era; the transport is closed when either fails. `busy` (the
 * authorizer logging in) stops the probe's budget from running out under a login.
 */
async function startAndProbe(
  name: string,
  transport: Transport,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  busy?: () => boolean,
): ReturnType<typeof probeEraWithRetry> {
  try {
    await transport.start();
    return await probeEraWithRetry(name, transport, {
      timeoutMs,
      ...(signal === undefined ? {} : { signal }),
      ...(busy === undefined ? {} : { busy }),
    });
  } catch (error) {
    // Ends the whole process group (and waits for it) before the start error is reported.
    await transport.close();
    throw error;
  }
}

/** Options of {@link connectTransport}. */
export interface ConnectTransportOptions {
  readonly signal?: AbortSignal;
  /** Budget for `initialize`. @default 30000 */
  readonly timeoutMs?: number;
  /** Answers to server-to-client requests (roots, sampling, elicitation). */
  readonly handlers?: ClientHandlers;
  /**
   * Probe the era with `server/discover` first, waiting at most this long (capped by
   * `timeoutMs`), as a stdio start does: a 2026-07-28 answer gives a {@link ModernConnection}.
   * @default 0 (no probe: `initialize`, the 2025 era)
   */
  readonly probeTimeoutMs?: number;
}

/**
 * Completes `initialize` over any SDK transport (for example one end of
 * `InMemoryTransport.createLinkedPair()`) and returns the session; with `probeTimeoutMs`, probes
 * the era first and returns a modern connection to a 2026-07-28 server. The transport is closed
 * on failure.
 *
 * @throws RuntimeError `SERVER_START_FAILED`, `TIMEOUT` or `ABORTED`.
 */
export async function connectTransport(
  name: string,
  transport: Transport,
  options: ConnectTransportOptions = {},
): Promise<Connection> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const probeMs = Math.min(options.probeTimeoutMs ?? 0, timeoutMs);
  let session = transport;
  if (probeMs > 0) {
    const outcome = await startAndProbe(name, transport, probeMs, options.signal);
    if (outcome.era === 'modern') {
      return modernConnection({
        name,
        transport,
        discover: outcome.discover,
        stderr: new StderrTail('pipe'),
        ...(options.handlers === undefined ? {} : { handlers: options.handlers }),
      });
    }
    session = startedTransport(transport);
  }
  return openSession(name, session, {
    timeoutMs,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    pid: () => undefined,
    fault: () => undefined,
    stderrTail: new StderrTail('pipe'),
    ...(options.handlers === undefined ? {} : { handlers: options.handlers }),
  });
}
