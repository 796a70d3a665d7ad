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
import type { ServerSession } from './session.js';

/**
 * The runtime side of the listing cache (DESIGN §10.1, "Listing freshness"): whether a reused
 * session's published listing may stand in for a re-list now, and what `status()` shows of it.
 */

/** Whether the published listing of `session` may be kept under `config` now (see {@link reuseOf}). */
function reuseNow(core: RuntimeCore, session: ServerSession, config: ServerConfig): ListingReuse {
  const record = session.freshness;
  const { connection } = session;
  const catalog = session.slot?.catalog;
  if (record === undefined) return { reuse: false, reason: 'not-cacheable' };
  if (
    connection.era !== 'modern' ||
    connection.closed ||
    connection.lost !== undefined ||
    catalog === undefined ||
    core.forceRestart.has(session.name)
  ) {
    return { reuse: false, reason: 'connection' };
  }
  // A new policy epoch re-publishes every catalog: that needs the listing again.
  if (catalog.policyEpoch !== core.registry.policyEpoch) {
    return { reuse: false, reason: 'policy-epoch' };
  }
  return reuseOf(record, core.clock.now(), {
    ...listingContextOf(config),
    changes: connection.changes.version,
  });
}

/**
 * For a dirty refresh about to re-list a reused session: the freshness record when its published
 * listing is still fresh for `config` (then a `listing-reused` event is emitted and no request is
 * sent), else `undefined` (re-list).
 */
export function freshListing(
  core: RuntimeCore,
  session: ServerSession,
  config: ServerConfig,
): ListingFreshness | undefined {
  const decision = reuseNow(core, session, config);
  if (!decision.reuse) return undefined;
  core.emit({
    type: 'listing-reused',
    server: session.name,
    ageMs: decision.ageMs,
    remainingMs: decision.remainingMs,
    scope: decision.scope,
  });
  return session.freshness;
}

/** What `status()` shows of a modern session's listing freshness. */
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

/** The listing freshness of `session` for `status()`, or `undefined` when it has no record. */
export function listingStatus(
  core: RuntimeCore,
  session: ServerSession,
): ListingStatus | undefined {
  const record = session.freshness;
  if (record === undefined) return undefined;
  const decision = reuseNow(core, session, session.config);
  return decision.reuse
    ? { fresh: true, expiresInMs: decision.remainingMs, scope: record.scope }
    : { fresh: false, expiresInMs: 0, scope: record.scope, reason: decision.reason };
}
