import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { propertyRun } from '@stepbind/testkit';
import { parseConfig, type ServerConfig } from '../../src/config.js';
import {
  listingFreshness,
  MAX_LISTING_TTL_MS,
  principalOf,
  recordListing,
  reuseOf,
  type PageFreshness,
} from '../../src/era/listing-cache.js';

const CONTEXT = { audience: 'default', principal: 'p1', configKey: 'k1', changes: 0 } as const;

/** Pages arriving in order (non-decreasing receivedAt), each with its own hints or none. */
const pagesArb = fc
  .tuple(
    fc.integer({ min: 0, max: 1e9 }),
    fc.array(
      fc.record(
        {
          gap: fc.integer({ min: 0, max: 10_000 }),
          ttlMs: fc.oneof(
            fc.constant(0),
            fc.integer({ min: 1, max: 100_000 }),
            fc.constant(MAX_LISTING_TTL_MS * 10),
          ),
          cacheScope: fc.constantFrom('public' as const, 'private' as const),
        },
        { requiredKeys: ['gap'] },
      ),
      { minLength: 1, maxLength: 12 },
    ),
  )
  .map(([start, raw]) => {
    let at = start;
    return raw.map(({ gap, ...hints }): PageFreshness => {
      at += gap;
      return { receivedAt: at, ...hints };
    });
  });

describe('listing freshness (pure rules)', () => {
  it('a listing is reusable exactly while every page is inside its own TTL, and never when a page has none or 0', () => {
    const { seed, numRuns } = propertyRun('listing-cache.freshness', 300);
    fc.assert(
      fc.property(pagesArb, fc.integer({ min: -1000, max: 200_000 }), (pages, offset) => {
        const first = pages[0]?.receivedAt ?? 0;
        const now = (pages.at(-1)?.receivedAt ?? first) + offset;
        const record = listingFreshness(pages, CONTEXT);
        const decision = reuseOf(record, now, CONTEXT);
        const cacheable = pages.every((p) => p.ttlMs !== undefined && p.ttlMs > 0);
        // Stated per page, not through the implementation's minimum.
        const inside = pages.every(
          (p) => now < p.receivedAt + Math.min(p.ttlMs ?? 0, MAX_LISTING_TTL_MS),
        );
        expect(decision.reuse).toBe(cacheable && now >= first && inside);
        if (!cacheable) expect(decision).toEqual({ reuse: false, reason: 'not-cacheable' });
        expect(record.scope).toBe(
          pages.every((p) => p.cacheScope === 'public') ? 'public' : 'private',
        );
        if (decision.reuse) {
          expect(decision.ageMs).toBe(now - first);
          const remaining = Math.min(
            ...pages.map((p) => p.receivedAt + Math.min(p.ttlMs ?? 0, MAX_LISTING_TTL_MS) - now),
          );
          expect(decision.remainingMs).toBe(remaining);
          expect(decision.remainingMs).toBeGreaterThan(0);
          // Page 1's TTL alone never decides: the listing ends no later than any page's TTL.
          for (const p of pages) {
            expect(now + decision.remainingMs).toBeLessThanOrEqual(p.receivedAt + (p.ttlMs ?? 0));
          }
        }
        // Once expired, never fresh again as time goes on.
        if (!decision.reuse && now >= first) {
          expect(reuseOf(record, now + 1 + offset * offset, CONTEXT).reuse).toBe(false);
        }
      }),
      { seed, numRuns },
    );
  });

  it('a list_changed, another audience or configuration, or another principal for a private listing, is never served from the record', () => {
    const { seed, numRuns } = propertyRun('listing-cache.context', 200);
    fc.assert(
      fc.property(
        pagesArb.map((pages) => pages.map((p) => ({ ...p, ttlMs: MAX_LISTING_TTL_MS }))),
        fc.constantFrom('changes', 'audience', 'principal', 'configKey'),
        (pages, field) => {
          const record = listingFreshness(pages, CONTEXT);
          const now = pages.at(-1)?.receivedAt ?? 0;
          expect(reuseOf(record, now, CONTEXT).reuse).toBe(true);
          const other = { ...CONTEXT, [field]: field === 'changes' ? 1 : 'other' };
          const decision = reuseOf(record, now, other);
          // `public` lets a server's answer be shared across principals; nothing else moves.
          expect(decision.reuse).toBe(field === 'principal' && record.scope === 'public');
        },
      ),
      { seed, numRuns },
    );
  });

  it('an empty listing and a clock that went back are not fresh', () => {
    expect(reuseOf(listingFreshness([], CONTEXT), 0, CONTEXT)).toEqual({
      reuse: false,
      reason: 'not-cacheable',
    });
    const record = listingFreshness(
      [{ receivedAt: 1000, ttlMs: 5000, cacheScope: 'public' }],
      CONTEXT,
    );
    expect(reuseOf(record, 999, CONTEXT)).toEqual({ reuse: false, reason: 'expired' });
    expect(reuseOf(record, 5999, CONTEXT)).toMatchObject({ reuse: true, remainingMs: 1 });
    expect(reuseOf(record, 6000, CONTEXT)).toEqual({ reuse: false, reason: 'expired' });
  });

  it('the recorder times each page when it arrives and starts over with a traversal that restarts', async () => {
    let now = 100;
    const clock = { now: () => now, setTimeout: () => undefined, clearTimeout: () => undefined };
    const changes = { version: 0 };
    const served = [
      { tools: [], nextCursor: 'c', ttlMs: 9000, cacheScope: 'public' },
      { tools: [], ttlMs: 4000 },
    ];
    const recorder = recordListing(
      {
        listTools: (request) => {
          now += 10; // the request is in flight
          return Promise.resolve(served[request.cursor === undefined ? 0 : 1]);
        },
      },
      clock,
      changes,
    );
    const request = { signal: new AbortController().signal, timeoutMs: 1000 };
    await recorder.source.listTools({ ...request, cursor: undefined });
    changes.version = 1; // a list_changed: the traversal starts over
    await recorder.source.listTools({ ...request, cursor: undefined });
    await recorder.source.listTools({ ...request, cursor: 'c' });
    const record = recorder.finish(2, CONTEXT);
    expect(record.pages).toEqual([
      { receivedAt: 120, ttlMs: 9000, cacheScope: 'public' },
      { receivedAt: 130, ttlMs: 4000 },
    ]);
    expect(record).toMatchObject({ changes: 1, expiresAt: 4130, scope: 'private' });
    // A page count that does not match the listing (a traversal cut short) is not cacheable.
    expect(recorder.finish(3, CONTEXT).expiresAt).toBeUndefined();
  });

  it('the principal is a digest of the credentials: order-free, changes with a value, never holds it', () => {
    const http = (headers: Record<string, string>): ServerConfig => {
      const server = parseConfig({
        mcpServers: { s: { type: 'http', url: 'https://example.test/mcp', headers } },
      }).servers.get('s');
      if (server === undefined) throw new Error('no server');
      return server;
    };
    const a = principalOf(http({ Authorization: 'Bearer secret-1', 'X-Team': 'blue' }));
    expect(principalOf(http({ 'X-Team': 'blue', Authorization: 'Bearer secret-1' }))).toBe(a);
    expect(principalOf(http({ Authorization: 'Bearer secret-2', 'X-Team': 'blue' }))).not.toBe(a);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(a).not.toContain('secret');
  });
});
