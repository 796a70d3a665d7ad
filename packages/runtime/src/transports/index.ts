/**
 * The transports, one file per kind: each holds its configuration keys and their parsing, its
 * identity key (what makes a connection reusable) and its SDK transport. This file is the switch
 * over the kinds; a new transport is one new file and one case in each function here.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { computeTransportDigest, type ServerIdentity } from '@stepbind/binding/internal';
import type { CommonServerConfig } from '../config-values.js';
import type { ConfigText } from '../interpolate.js';
import type { Redactor } from '../redact.js';
import type { FaultError } from './guard.js';
import {
  HTTP_KEYS,
  httpIdentityKey,
  openHttpTransport,
  parseHttpConfig,
  type HttpAuthOptions,
  type HttpServerConfig,
} from './http.js';
import type { HttpSessionWatch } from './http-session.js';
import type { StderrTail } from './stderr-tail.js';
import {
  openStdioTransport,
  parseStdioConfig,
  STDIO_KEYS,
  stdioIdentityKey,
  type StdioServerConfig,
} from './stdio.js';

export type { Transport };
export type { HttpAuthOptions, HttpServerConfig } from './http.js';
export type { StdioServerConfig } from './stdio.js';

/**
 * One configured server: a stdio child process or an HTTP endpoint (Streamable HTTP, or the legacy
 * HTTP+SSE transport with `legacySse`).
 */
export type ServerConfig = StdioServerConfig | HttpServerConfig;

/**
 * The transport of a server entry as its `type` says (inferred from `command`/`url`): `sse` is an
 * HTTP server reached over the legacy HTTP+SSE transport only (`transports/sse.ts`).
 */
export type TransportKind = ServerConfig['transport'] | 'sse';

/** The transport keys a server entry of `kind` may have (on top of the common ones). */
export function transportKeysOf(kind: TransportKind): readonly string[] {
  return kind === 'stdio' ? STDIO_KEYS : HTTP_KEYS;
}

/** Parses the transport keys of one server entry into its whole configuration. */
export function parseTransportConfig(
  kind: TransportKind,
  obj: Record<string, unknown>,
  path: string,
  common: CommonServerConfig,
  text: (value: unknown, at: string, allowEmpty?: boolean) => string,
  read: ConfigText,
): ServerConfig {
  return kind === 'stdio'
    ? parseStdioConfig(obj, path, common, text, read)
    : parseHttpConfig(obj, path, common, text, read, kind === 'sse');
}

/**
 * The digest of the transport settings that make a connection reusable: transport, command, args,
 * env, cwd, url, headers, auth (secrets as digests), audience and `maxMessageBytes`. A change means a new connection (and a
 * new identity).
 */
export function identityKeyOf(config: ServerConfig): string {
  return config.transport === 'stdio' ? stdioIdentityKey(config) : httpIdentityKey(config);
}

/**
 * The identity of a live connection: configured name, transport digest, serverInfo, protocol.
 * With OAuth, the digest also covers the `principal` the tokens act for (never a token), so the
 * catalog of one principal is never the registry entry, local or fleet-wide, of another; a
 * refreshed token of the same principal keeps the identity.
 */
export function identityOf(
  name: string,
  config: ServerConfig,
  connection: {
    readonly hello: {
      readonly serverInfo: { readonly name: string; readonly version: string } | undefined;
      readonly protocolVersion: string | undefined;
    };
  },
  principal = '',
): ServerIdentity {
  const { serverInfo, protocolVersion } = connection.hello;
  const key = identityKeyOf(config);
  return Object.freeze({
    name,
    // Without a principal the digest stays the transport's own (older digests unchanged).
    transportDigest: principal === '' ? key : computeTransportDigest({ key, principal }),
    ...(serverInfo === undefined ? {} : { serverInfo }),
    ...(protocolVersion === undefined ? {} : { protocolVersion }),
  });
}

/** A transport opened for one server entry, not connected yet. */
export interface OpenedTransport {
  readonly transport: Transport;
  /** The stdio child's pid, once spawned. */
  readonly pid: () => number | undefined;
  /** The fault that closed a stdio transport (an oversized line). */
  readonly fault: () => FaultError | undefined;
  /** For HTTP (both transports): the session watch and the redactor of its URL and headers. */
  readonly http?: { readonly watch: HttpSessionWatch; readonly redactor: Redactor };
}

/** Builds the SDK transport of one server entry (nothing is sent until the client connects). */
export function openTransport(
  name: string,
  config: ServerConfig,
  options: {
    readonly stderr?: 'tail' | 'inherit';
    readonly closeGraceMs?: number;
    /** An HTTP server's authorization and redactor (see {@link HttpAuthOptions}). */
    readonly auth?: HttpAuthOptions;
    /**
     * An HTTP server over the legacy HTTP+SSE transport (`transports/sse.ts`).
     * @default the entry's `legacySse` (`type: "sse"`)
     */
    readonly sse?: boolean;
  },
  tail: StderrTail,
): OpenedTransport {
  if (config.transport === 'stdio') {
    const stdio = openStdioTransport(name, config, options, tail);
    return { transport: stdio, pid: () => stdio.pid, fault: () => stdio.fault };
  }
  const { transport, watch, redactor } = openHttpTransport(
    name,
    config,
    options.auth,
    options.sse ?? config.legacySse === true,
  );
  return {
    transport,
    pid: () => undefined,
    fault: () => transport.fault,
    http: { watch, redactor },
  };
}
