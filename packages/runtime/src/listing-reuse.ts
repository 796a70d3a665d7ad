import type { ServerConfig } from './config.js';
import type { RuntimeCore } from './core.js';
import {
  listingContextOf,
  reuseOf,
  type CacheScope,
  type ListingFreshness,
  type ListingReuse,
  type StaleReason,
} from './era/listing-cache.js';
import type { ManagedServer } from './server/managed-server.js';

/**
 * The runtime side of the listing cache (DESIGN §10.1, "Listing freshness"): whether a reused
 * server's published listing may stand in for a re-list now, and what `status()` shows of it.
 */

/** Whether the published listing of `server` may be kept under `config` now (see {@link reuseOf}). */
function reuseNow(core: RuntimeCore, server: ManagedServer, config: ServerConfig): ListingReuse {
  const record = server.freshness;
  const { connection } = server;
  const catalog = server.slot?.catalog;
  if (record === undefined) return { reuse: false, reason: 'not-cacheable' };
  if (
    connection.era !== 'modern' ||
    connection.closed ||
    connection.lost !== undefined ||
    catalog === undefined ||
    core.forceRestart.has(server.name)
  ) {
    return { reuse: false, reason: 'connection' };
  }
  // A new policy epoch re-publishes every catalog: that needs the listing again.
  if (catalog.policyEpoch !== core.registry.policyEpoch) {
    return { reuse: false, reason: 'policy-epoch' };
  }
  return reuseOf(record, core.clock.now(), {
    ...listingContextOf(config, core.auth.principalOf(server.name, config)),
    changes: connection.changes.version,
  });
}

/**
 * For a dirty refresh about to re-list a reused server: the freshness record when its published
 * listing is still fresh for `config` (then a `listing-reused` event is emitted and no request is
 * sent), else `undefined` (re-list).
 */
export function freshListing(
  core: RuntimeCore,
  server: ManagedServer,
  config: ServerConfig,
): ListingFreshness | undefined {
  const decision = reuseNow(core, server, config);
  if (!decision.reuse) return undefined;
  core.emit({
    type: 'listing-reused',
    server: server.name,
    ageMs: decision.ageMs,
    remainingMs: decision.remainingMs,
    scope: decision.scope,
  });
  return server.freshness;
}

/** What `status()` shows of a modern server's listing freshness. */
export interface ListingStatus {
  /** A dirty refresh now would keep the published listing without a request. */
  readonly fresh: boolean;
  /** Milliseconds of freshness left (0 when not fresh). */
  readonly expiresInMs: number;
  /** The listing's scope (`private` unless every page said `public`). */
  readonly scope: CacheScope;
  /** When not fresh: why (see {@link StaleReason}). */
  readonly reason?: StaleReason;
}

/** The listing freshness of `server` for `status()`, or `undefined` when it has no record. */
export function listingStatus(core: RuntimeCore, server: ManagedServer): ListingStatus | undefined {
  const record = server.freshness;
  if (record === undefined) return undefined;
  const decision = reuseNow(core, server, server.config);
  return decision.reuse
    ? { fresh: true, expiresInMs: decision.remainingMs, scope: record.scope }
    : { fresh: false, expiresInMs: 0, scope: record.scope, reason: decision.reason };
}
