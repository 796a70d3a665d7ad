/**
 * Opens a 2025-era session: `initialize` through the SDK client over a transport that is ready,
 * giving an {@link SdkConnection}, or one typed start error (the transport closed first).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import { CLIENT_CAPABILITIES, CLIENT_INFO, type ClientHandlers } from '../client-capabilities.js';
import type { Redactor } from '../redact.js';
import type { FaultSource } from '../transports/guard.js';
import type { HttpSessionWatch } from '../transports/http-session.js';
import type { StderrTail } from '../transports/stderr-tail.js';
import { installClientHandlers } from './client-handlers.js';
import { SdkConnection } from './sdk-connection.js';
import { linkSignal } from './sdk-requests.js';
import { mapSdkError } from './sdk-errors.js';

/** Transport errors kept to explain a start that fails. */
const EARLY_ERRORS = 3;

/** Options of {@link openSession}. */
export interface OpenSessionOptions {
  /** Budget for `initialize`. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** The stdio child's pid, read once the session is open. */
  readonly pid: () => number | undefined;
  readonly fault: FaultSource;
  readonly stderrTail: StderrTail;
  readonly handlers?: ClientHandlers;
  readonly http?: { readonly watch: HttpSessionWatch; readonly redactor: Redactor };
}

/** Codes an `initialize` failure keeps as they are (anything else is `SERVER_START_FAILED`). */
const START_CODES: ReadonlySet<string> = new Set([
  ErrorCode.TIMEOUT,
  ErrorCode.ABORTED,
  ErrorCode.SERVER_START_FAILED,
  ErrorCode.MESSAGE_TOO_LARGE,
  ErrorCode.MALFORMED_MESSAGE,
  ErrorCode.AUTH_REQUIRED,
  ErrorCode.AUTH_FAILED,
]);

/**
 * Completes `initialize` over `transport` (started or not) and returns the session; on failure the
 * client is closed (for stdio: the whole process group, waited for) before this rejects.
 *
 * @throws RuntimeError `SERVER_START_FAILED` (with the last transport errors), `TIMEOUT`,
 *   `ABORTED`, `MESSAGE_TOO_LARGE`, `MALFORMED_MESSAGE`, `AUTH_REQUIRED` or `AUTH_FAILED`.
 */
export async function openSession(
  name: string,
  transport: Transport,
  options: OpenSessionOptions,
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
