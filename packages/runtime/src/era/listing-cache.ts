/**
 * Freshness of a modern-era (2026-07-28) `tools/list` listing, by the spec's per-page `ttlMs` and
 * `cacheScope` (DESIGN §10.1, "Listing freshness"). Pure: time comes in as numbers from the
 * runtime's {@link RuntimeClock}, so the rules are unit- and property-testable.
 *
 * - A listing is fresh until the earliest `receivedAt + ttlMs` over its pages (each page's own TTL,
 *   never page 1's for all), capped at {@link MAX_LISTING_TTL_MS}.
 * - A page without `ttlMs`, or with `0`, makes the whole listing not cacheable.
 * - The listing's scope is `public` only when every page says `public`; a page without
 *   `cacheScope` counts as `private` (conservative).
 * - A `list_changed` (legacy notification or the `subscriptions/listen` stream) after the listing
 *   began makes it stale at once.
 * - A `private` listing serves only the audience and principal it was listed for; a `public` one
 *   only its audience (a stepbind catalog is built for one audience; `public` lets the server's
 *   answer be shared across principals, never across audience classes).
 *
 * The TTL is never a poll interval: nothing here schedules a request. It only lets a refresh that
 * would re-list anyway keep the published catalog without asking.
 */
import { createHash } from 'node:crypto';
import type { ChangeFeed, ListPageRequest, ToolListSource } from '@stepbind/binding/internal';
import type { RuntimeClock } from '../clock.js';
import type { ServerConfig } from '../config.js';
import { cacheHintsOf } from './envelope.js';

/** The longest a listing is reused, whatever `ttlMs` a server sends: 24 h. */
export const MAX_LISTING_TTL_MS = 24 * 60 * 60 * 1000;

/** `cacheScope` of a `tools/list` page (the spec's two values). */
export type CacheScope = 'public' | 'private';

/** One page of a listing as received: when (runtime clock, ms) and its cache hints. */
export interface PageFreshness {
  readonly receivedAt: number;
  readonly ttlMs?: number;
  readonly cacheScope?: CacheScope;
}

/** What a listing was fetched for: the reuse of a `private` listing must match both. */
export interface ListingContext {
  /** The server entry's audience class. */
  readonly audience: string;
  /** Digest of the credentials the listing was fetched with ({@link principalOf}), never a secret. */
  readonly principal: string;
  /** Digest of the configuration that shapes the catalog ({@link listingConfigKey}). */
  readonly configKey: string;
}

/** The freshness record of one complete listing of one connection. Frozen. */
export interface ListingFreshness extends ListingContext {
  readonly pages: readonly PageFreshness[];
  /** When the first page arrived (the listing's age counts from here). */
  readonly receivedAt: number;
  /** Until when it may be reused; `undefined`: not cacheable (a page without `ttlMs`, or `0`). */
  readonly expiresAt: number | undefined;
  /** `public` only when every page is; otherwise `private`. */
  readonly scope: CacheScope;
  /** The connection's `list_changed` count when the (last, complete) traversal began. */
  readonly changes: number;
}

/**
 * Why a listing may not be reused: `not-cacheable` (a page without `ttlMs` or `0`, or no record),
 * `connection` (not a live modern connection), `policy-epoch` (a new epoch re-publishes).
 */
export type StaleReason =
  | 'not-cacheable'
  | 'connection'
  | 'policy-epoch'
  | 'expired'
  | 'list-changed'
  | 'audience'
  | 'principal'
  | 'config';

/** The answer of {@link reuseOf}. */
export type ListingReuse =
  | {
      readonly reuse: true;
      readonly ageMs: number;
      readonly remainingMs: number;
      readonly scope: CacheScope;
    }
  | { readonly reuse: false; readonly reason: StaleReason };

/** The freshness record of the complete listing `pages` (in order), fetched for `context`. */
export function listingFreshness(
  pages: readonly PageFreshness[],
  context: ListingContext & { readonly changes: number },
): ListingFreshness {
  let expiresAt: number | undefined = pages.length === 0 ? undefined : Infinity;
  let scope: CacheScope = 'public';
  for (const page of pages) {
    if (page.cacheScope !== 'public') scope = 'private';
    const ttl = page.ttlMs;
    if (ttl === undefined || !Number.isFinite(ttl) || ttl <= 0) expiresAt = undefined;
    else if (expiresAt !== undefined) {
      expiresAt = Math.min(expiresAt, page.receivedAt + Math.min(ttl, MAX_LISTING_TTL_MS));
    }
  }
  const receivedAt = pages.reduce((min, p) => Math.min(min, p.receivedAt), Infinity);
  return Object.freeze({
    pages: Object.freeze(pages.map((p) => Object.freeze({ ...p }))),
    receivedAt: pages.length === 0 ? 0 : receivedAt,
    expiresAt,
    scope,
    changes: context.changes,
    audience: context.audience,
    principal: context.principal,
    configKey: context.configKey,
  });
}

/**
 * Whether `record` may stand in for a new listing at `now` for `context` and a connection whose
 * `list_changed` count is `changes`. A clock that went back before the listing means not fresh.
 */
export function reuseOf(
  record: ListingFreshness,
  now: number,
  context: ListingContext & { readonly changes: number },
): ListingReuse {
  if (record.expiresAt === undefined) return { reuse: false, reason: 'not-cacheable' };
  if (context.changes !== record.changes) return { reuse: false, reason: 'list-changed' };
  if (now < record.receivedAt || now >= record.expiresAt)
    return { reuse: false, reason: 'expired' };
  if (context.configKey !== record.configKey) return { reuse: false, reason: 'config' };
  // A stepbind catalog belongs to one audience: even a public answer is not carried to another.
  if (context.audience !== record.audience) return { reuse: false, reason: 'audience' };
  if (record.scope === 'private' && context.principal !== record.principal) {
    return { reuse: false, reason: 'principal' };
  }
  return {
    reuse: true,
    ageMs: now - record.receivedAt,
    remainingMs: record.expiresAt - now,
    scope: record.scope,
  };
}

/**
 * The principal a listing is fetched as: a sha256 digest of the credentials the server sees (the
 * HTTP headers and bearer token; the stdio environment, passed-through values included) and of the
 * OAuth principal the tokens act for (`authPrincipal`, `issuer + ' ' + subject`). Never the
 * values, never an access token: a refreshed token of the same principal keeps the principal.
 */
export function principalOf(config: ServerConfig, authPrincipal = ''): string {
  const credentials =
    config.transport === 'stdio'
      ? {
          env: sorted(config.env),
          passthrough: config.envPassthrough.map((name) => [name, process.env[name] ?? null]),
        }
      : {
          headers: sorted(config.headers),
          // Left out without auth, so the principal of a plain entry stays as it was.
          ...(config.auth === undefined
            ? {}
            : {
                auth:
                  config.auth.type === 'bearer'
                    ? { bearer: config.auth.token }
                    : { oauth: authPrincipal },
              }),
        };
  return createHash('sha256').update(JSON.stringify(credentials)).digest('hex');
}

/** The configuration that shapes a catalog from the same pages: the tool filter and the limits. */
export function listingConfigKey(config: ServerConfig): string {
  return JSON.stringify({ tools: config.tools ?? null, limits: sorted(config.limits) });
}

/** The listing context of a server entry whose OAuth tokens act for `authPrincipal`. */
export function listingContextOf(config: ServerConfig, authPrincipal = ''): ListingContext {
  return {
    audience: config.audience,
    principal: principalOf(config, authPrincipal),
    configKey: listingConfigKey(config),
  };
}

/**
 * Wraps a connection's page source to time each page on `clock` as it arrives and keep its
 * hints; a traversal that starts over (no cursor) starts a new record.
 */
export function recordListing(
  source: ToolListSource,
  clock: RuntimeClock,
  changes: ChangeFeed,
): {
  readonly source: ToolListSource;
  /** The record of the last traversal, if it has `pageCount` pages (else not cacheable). */
  finish(pageCount: number, context: ListingContext): ListingFreshness;
} {
  let pages: PageFreshness[] = [];
  let changesAtStart = changes.version;
  return {
    source: {
      async listTools(request: ListPageRequest): Promise<unknown> {
        if (request.cursor === undefined) {
          pages = [];
          changesAtStart = changes.version;
        }
        const result = await source.listTools(request);
        pages.push({ receivedAt: clock.now(), ...cacheHintsOf(result) });
        return result;
      },
    },
    finish(pageCount, context) {
      return listingFreshness(pageCount === pages.length ? pages : [], {
        ...context,
        changes: changesAtStart,
      });
    },
  };
}

function sorted(record: object): [string, unknown][] {
  return Object.entries(record).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
