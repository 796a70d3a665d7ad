/**
 * The 2026-07-28 protocol era's wire vocabulary: the `_meta` envelope every request carries, the
 * `server/discover` result, and the era's JSON-RPC errors mapped to typed stepbind errors.
 */
import {
  ErrorCode,
  RuntimeError,
  type Delivery,
  type StepbindError,
} from '@stepbind/binding/internal';
import { CLIENT_CAPABILITIES, CLIENT_INFO } from '../client-capabilities.js';

/** The stateless protocol version stepbind speaks in the modern era. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

/** Reserved `_meta` keys of the envelope and of results. */
export const META = Object.freeze({
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId',
});

/** JSON-RPC error codes of the modern era. */
export const RPC = Object.freeze({
  HEADER_MISMATCH: -32020,
  MISSING_CLIENT_CAPABILITY: -32021,
  UNSUPPORTED_PROTOCOL_VERSION: -32022,
});

/**
 * `params` with the envelope in `params._meta`. The caller's own `_meta` keys (a `progressToken`,
 * trace context) are kept; the envelope's reserved keys are always stepbind's.
 */
export function withEnvelope(
  params: Readonly<Record<string, unknown>> = {},
  options: { readonly protocolVersion?: string; readonly logLevel?: string } = {},
): Record<string, unknown> {
  const callerMeta = params['_meta'];
  return {
    ...params,
    _meta: {
      ...(typeof callerMeta === 'object' && callerMeta !== null ? callerMeta : {}),
      [META.protocolVersion]: options.protocolVersion ?? MODERN_PROTOCOL_VERSION,
      [META.clientCapabilities]: CLIENT_CAPABILITIES,
      [META.clientInfo]: CLIENT_INFO,
      ...(options.logLevel === undefined ? {} : { [META.logLevel]: options.logLevel }),
    },
  };
}

/** What `server/discover` said, checked (see {@link parseDiscover}). */
export interface DiscoverInfo {
  readonly supportedVersions: readonly string[];
  readonly capabilities: Readonly<Record<string, unknown>>;
  readonly serverInfo: { readonly name: string; readonly version: string } | undefined;
  readonly instructions?: string;
  readonly ttlMs?: number;
  readonly cacheScope?: 'public' | 'private';
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The `{ name, version }` in a result's `_meta`, if it has one. */
export function serverInfoOf(
  result: unknown,
): { readonly name: string; readonly version: string } | undefined {
  const meta = isRecord(result) ? result['_meta'] : undefined;
  const info = isRecord(meta) ? meta[META.serverInfo] : undefined;
  if (!isRecord(info) || typeof info['name'] !== 'string' || typeof info['version'] !== 'string') {
    return undefined;
  }
  return Object.freeze({ name: info['name'], version: info['version'] });
}

/** The per-result cache hints (`ttlMs`, `cacheScope`), when well formed. */
export function cacheHintsOf(result: unknown): {
  readonly ttlMs?: number;
  readonly cacheScope?: 'public' | 'private';
} {
  if (!isRecord(result)) return {};
  const ttl = result['ttlMs'];
  const scope = result['cacheScope'];
  return {
    ...(typeof ttl === 'number' && Number.isFinite(ttl) && ttl >= 0 ? { ttlMs: ttl } : {}),
    ...(scope === 'public' || scope === 'private' ? { cacheScope: scope } : {}),
  };
}

/**
 * A `server/discover` result that proves a modern server: an object whose `supportedVersions` is a
 * list of strings containing {@link MODERN_PROTOCOL_VERSION}. Anything else (an error, garbage, a
 * list without it) is `undefined`: the caller falls back to `initialize`.
 */
export function parseDiscover(result: unknown): DiscoverInfo | undefined {
  if (!isRecord(result)) return undefined;
  const versions = result['supportedVersions'];
  if (
    !Array.isArray(versions) ||
    versions.length > 64 ||
    !versions.every((v) => typeof v === 'string') ||
    !versions.includes(MODERN_PROTOCOL_VERSION)
  ) {
    return undefined;
  }
  const capabilities = isRecord(result['capabilities']) ? result['capabilities'] : {};
  const instructions = result['instructions'];
  // In the result's `_meta` like every other result, or as the result's own `serverInfo` field.
  const serverInfo =
    serverInfoOf(result) ?? serverInfoOf({ _meta: { [META.serverInfo]: result['serverInfo'] } });
  return Object.freeze({
    supportedVersions: Object.freeze([...versions]),
    capabilities,
    serverInfo,
    ...(typeof instructions === 'string' ? { instructions } : {}),
    ...cacheHintsOf(result),
  });
}

/** A JSON-RPC error object as it arrived. */
export interface RpcErrorObject {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

/**
 * The typed error for a JSON-RPC error answer in the modern era: -32022 →
 * `UNSUPPORTED_PROTOCOL_VERSION` (with the server's supported versions), -32020 → `HEADER_MISMATCH`,
 * -32021 → `MISSING_CLIENT_CAPABILITY` (naming the capability), anything else → `SERVER_ERROR`.
 * Every detail keeps the JSON-RPC number as `rpcCode`.
 */
export function eraError(
  error: RpcErrorObject,
  ctx: {
    readonly server: string;
    readonly method: string;
    readonly tool?: string;
    readonly delivery?: Delivery;
  },
): StepbindError {
  const where = `${ctx.method} on server "${ctx.server}"${ctx.tool === undefined ? '' : ` (tool "${ctx.tool}")`}`;
  const base = {
    server: ctx.server,
    ...(ctx.tool === undefined ? {} : { tool: ctx.tool }),
    ...(ctx.delivery === undefined ? {} : { delivery: ctx.delivery }),
    rpcCode: error.code,
  };
  const data = isRecord(error.data) ? error.data : {};
  const text = String(error.message).slice(0, 500);
  if (error.code === RPC.UNSUPPORTED_PROTOCOL_VERSION) {
    const supported = Array.isArray(data['supported'])
      ? data['supported'].filter((v): v is string => typeof v === 'string').slice(0, 64)
      : [];
    const requested = typeof data['requested'] === 'string' ? data['requested'] : undefined;
    return new RuntimeError(
      ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
      `${where} was refused: the server does not support protocol version ${requested ?? MODERN_PROTOCOL_VERSION} (it supports ${supported.length === 0 ? 'no version it named' : supported.join(', ')}). Upgrade the server or stepbind.`,
      { detail: { ...base, supported, ...(requested === undefined ? {} : { requested }) } },
    );
  }
  if (error.code === RPC.HEADER_MISMATCH) {
    return new RuntimeError(
      ErrorCode.HEADER_MISMATCH,
      `${where} was refused: the server says the HTTP headers do not match the request body (${text}). A proxy may be rewriting MCP headers; report it with the server's name.`,
      { detail: base },
    );
  }
  if (error.code === RPC.MISSING_CLIENT_CAPABILITY) {
    const required = isRecord(data['requiredCapabilities']) ? data['requiredCapabilities'] : {};
    const names = Object.keys(required).slice(0, 16);
    return new RuntimeError(
      ErrorCode.MISSING_CLIENT_CAPABILITY,
      `${where} needs client capabilit${names.length === 1 ? 'y' : 'ies'} ${names.length === 0 ? '(unnamed)' : names.map((n) => `"${n}"`).join(', ')} that stepbind did not declare. Give McpRuntime.open the matching handler (onSampling / onElicitation) or use another tool.`,
      { detail: { ...base, capabilities: names } },
    );
  }
  return new RuntimeError(
    ErrorCode.SERVER_ERROR,
    `${where} failed with JSON-RPC error ${error.code}: ${text}`,
    { detail: base },
  );
}
