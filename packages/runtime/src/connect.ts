/**
 * Connecting: builds one server's transport (see `transports/`), picks the protocol era (a stdio
 * server is probed with `server/discover`, see `era/probe.ts`), and hands back a
 * {@link ModernConnection} or, after `initialize` through the SDK client, an {@link SdkConnection};
 * a failed start is one typed error.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding/internal';
import {
  CLIENT_CAPABILITIES,
  installClientHandlers,
  rootsOf,
  type ClientHandlers,
} from './client-capabilities.js';
import type { ServerConfig } from './config.js';
import type { Connection, EraMemory } from './connection.js';
import { ModernHttpTransport } from './era/http.js';
import type { DiscoverInfo } from './era/envelope.js';
import { ModernConnection } from './era/modern.js';
import { eraPlan, notModernError, slowProbeHint } from './era/pin.js';
import { probeEraWithRetry, startedTransport, type LateProbeTransport } from './era/probe.js';
import { NO_REDACTION, redactUrl, type Redactor } from './redact.js';
import { CLIENT_INFO, linkSignal, SdkConnection } from './sdk.js';
import { mapSdkError } from './sdk-errors.js';
import type { FaultError } from './transports/guard.js';
import { httpFailure, type HttpSessionWatch } from './transports/http-session.js';
import { identityKeyOf, openTransport } from './transports/index.js';
import { StderrTail } from './transports/stderr-tail.js';

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
   * reads nor writes it (and its pin is part of its identity key). @default a fresh map (no memory)
   */
  readonly eras?: EraMemory;
}

const EARLY_ERRORS = 3;

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
 *   `ABORTED`, `MESSAGE_TOO_LARGE` or `MALFORMED_MESSAGE` (the `initialize` response).
 */
export async function connectServer(
  name: string,
  config: ServerConfig,
  options: ConnectOptions = {},
): Promise<Connection> {
  const timeoutMs = options.timeoutMs ?? config.startupTimeoutMs;
  const stderrTail = new StderrTail(config.transport === 'stdio' ? config.stderr : 'pipe');
  const { transport, pid, fault, http } = openTransport(
    name,
    config,
    {
      ...(options.stderr === undefined ? {} : { stderr: options.stderr }),
      ...(options.closeGraceMs === undefined ? {} : { closeGraceMs: options.closeGraceMs }),
    },
    stderrTail,
  );
  const redactor = http?.redactor ?? NO_REDACTION;
  const handlers: ClientHandlers = { roots: rootsOf(config.roots), ...options.handlers };
  const key = identityKeyOf(config);
  const plan = eraPlan(config, timeoutMs, { ...options, key });
  const probe = plan.probeMs > 0;
  const remember = (era: 'modern' | 'legacy'): void => {
    if (plan.remember) options.eras?.set(key, era);
  };
  const started = performance.now();
  let probeTimedOut = false;
  const lateProbe = new AbortController();
  let lateDiscover: DiscoverInfo | undefined;
  let lateTransport: LateProbeTransport | undefined;
  try {
    let session = transport;
    if (probe && config.transport === 'http') {
      // The modern era over HTTP: a stateless POST of server/discover; anything but a 2026-07-28
      // answer falls back to a 2025 session (initialize) on the SDK transport, untouched so far.
      const modernHttp = new ModernHttpTransport({
        server: name,
        url: config.url,
        headers: config.headers,
        maxMessageBytes: config.maxMessageBytes,
        redactor,
      });
      const outcome = await startAndProbe(name, modernHttp, plan.probeMs, options.signal);
      if (outcome.era === 'modern') {
        const modern = new ModernConnection({
          name,
          transport: modernHttp,
          discover: outcome.discover,
          stderr: stderrTail,
          handlers,
        });
        modern.listen();
        remember('modern');
        return modern;
      }
      await modernHttp.close();
      if (plan.modernOnly) throw notModernError(name, outcome, plan.probeMs);
      probeTimedOut = outcome.answer === 'timeout';
    } else if (probe) {
      const outcome = await startAndProbe(name, transport, plan.probeMs, options.signal);
      if (outcome.era === 'modern') {
        const modern = new ModernConnection({
          name,
          transport,
          discover: outcome.discover,
          pid: pid(),
          stderr: stderrTail,
          handlers,
          fault: () => fault()?.(undefined),
        });
        modern.listen();
        remember('modern');
        return modern;
      }
      if (plan.modernOnly) {
        // Ends the whole process group before the pin's error is reported.
        await transport.close();
        throw notModernError(name, outcome, plan.probeMs);
      }
      probeTimedOut = outcome.answer === 'timeout';
      // A server that was slow rather than silent may still answer server/discover while (or
      // after) initialize is asked: a modern answer ends the initialize and the connection is
      // modern after all (a modern-only server that booted after the budget, under load).
      const late = startedTransport(transport, (discover) => {
        lateDiscover = discover;
        lateProbe.abort();
      });
      lateTransport = late;
      session = late;
    }
    let connection: Connection;
    try {
      connection = await openSession(name, session, {
        timeoutMs: Math.max(1, timeoutMs - Math.round(performance.now() - started)),
        signal: AbortSignal.any(
          options.signal === undefined ? [lateProbe.signal] : [options.signal, lateProbe.signal],
        ),
        pid,
        fault,
        stderrTail,
        handlers,
        ...(http === undefined ? {} : { http }),
      });
    } catch (error) {
      if (lateDiscover === undefined || options.signal?.aborted === true) {
        if (lateDiscover !== undefined) await transport.close();
        throw error;
      }
      const modern = new ModernConnection({
        name,
        transport,
        discover: lateDiscover,
        // The SDK's initialize took id 0; its late answer is dropped as no pending request.
        firstId: 1,
        pid: pid(),
        stderr: stderrTail,
        handlers,
        fault: () => fault()?.(undefined),
      });
      modern.listen();
      remember('modern');
      return modern;
    }
    // A late modern answer that came with a 2025 session that succeeded: the session is kept.
    lateTransport?.attach();
    remember('legacy');
    return connection;
  } catch (error) {
    if (!(error instanceof StepbindError) || error.code !== ErrorCode.SERVER_START_FAILED)
      throw redactor.error(error as Error);
    // A start error that names its config key (cwd, command) already says what to fix.
    if (error.detail['configPath'] !== undefined) throw error;
    const tail = stderrTail.text.trim();
    const what =
      config.transport === 'stdio' ? `command "${config.command}"` : `URL ${redactUrl(config.url)}`;
    const failure = config.transport === 'http' ? httpFailure(error.cause) : {};
    const advice = probeTimedOut
      ? slowProbeHint(name, plan.probeMs)
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
    throw redactor.error(
      new RuntimeError(
        ErrorCode.SERVER_START_FAILED,
        `Server "${name}" could not be started (${what}): ${why}${tail === '' ? '' : `\nLast stderr lines:\n${tail}`}\n${advice}`,
        { detail: { server: name, stderr: tail, ...failure }, cause: error.cause },
      ),
    );
  }
}

/** Starts a transport and probes its era; the transport is closed when either fails. */
async function startAndProbe(
  name: string,
  transport: Transport,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): ReturnType<typeof probeEraWithRetry> {
  try {
    await transport.start();
    return await probeEraWithRetry(name, transport, {
      timeoutMs,
      ...(signal === undefined ? {} : { signal }),
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
      const modern = new ModernConnection({
        name,
        transport,
        discover: outcome.discover,
        stderr: new StderrTail('pipe'),
        ...(options.handlers === undefined ? {} : { handlers: options.handlers }),
      });
      modern.listen();
      return modern;
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

/** Codes an `initialize` failure keeps as they are (anything else is `SERVER_START_FAILED`). */
const START_CODES: ReadonlySet<string> = new Set([
  ErrorCode.TIMEOUT,
  ErrorCode.ABORTED,
  ErrorCode.SERVER_START_FAILED,
  ErrorCode.MESSAGE_TOO_LARGE,
  ErrorCode.MALFORMED_MESSAGE,
]);

async function openSession(
  name: string,
  transport: Transport,
  options: {
    readonly timeoutMs: number;
    readonly signal?: AbortSignal;
    readonly pid: () => number | undefined;
    readonly fault: () => FaultError | undefined;
    readonly stderrTail: StderrTail;
    readonly handlers?: ClientHandlers;
    readonly http?: { readonly watch: HttpSessionWatch; readonly redactor: Redactor };
  },
): Promise<SdkConnection> {
  const client = new Client({ ...CLIENT_INFO }, { capabilities: CLIENT_CAPABILITIES });
  installClientHandlers(client, name, options.handlers ?? {});
  // Transport errors are observed from spawn on: those before the session exists explain a start
  // that fails (the SdkConnection takes over the handler once it succeeds).
  const early: Error[] = [];
  client.onerror = (error) => {
    early.push(error);
    if (early.length > EARLY_ERRORS) early.shift();
  };
  // The client reports the negotiated version only through this optional transport hook.
  let protocolVersion: string | undefined;
  const forward = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (version: string) => {
    protocolVersion = version;
    forward?.(version);
  };
  const link = linkSignal(options.signal);
  try {
    await client.connect(transport, {
      timeout: options.timeoutMs,
      ...(link === undefined ? {} : { signal: link.signal }),
    });
  } catch (error) {
    try {
      // Ends a stdio server's whole process group (and waits for it) on every failure path.
      await client.close();
    } catch {
      // The start already failed; the close is best effort and the original error is reported.
    }
    const mapped = mapSdkError(error, {
      server: name,
      operation: 'initialize',
      timeoutMs: options.timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      fault: options.fault(),
    });
    if (START_CODES.has(mapped.code)) throw mapped;
    const seen = early.map((e) => `\n  transport: ${e.message}`).join('');
    throw new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      `${error instanceof Error ? error.message : String(error)}${seen}`,
      { detail: { server: name }, cause: error },
    );
  } finally {
    link?.dispose();
  }
  return new SdkConnection(
    name,
    client,
    options.pid(),
    options.stderrTail,
    protocolVersion,
    options.fault,
    options.http,
  );
}
