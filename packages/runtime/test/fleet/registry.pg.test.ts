import {
  createCatalogSnapshot,
  type CatalogSnapshot,
  type ServerIdentity,
} from '@stepbind/binding/internal';
import {
  FleetRegistry,
  migrateFleetStore,
  PgHandle,
  snapshotDigest,
  type FleetPublication,
} from '@stepbind/runtime/fleet';
import fc from 'fast-check';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { usePostgres } from '../support/postgres.js';

const server = await usePostgres('registry.pg.test.ts');
afterAll(() => server?.stop());

const identity: ServerIdentity = { name: 'files', transportDigest: 'sha256:t1' };

/** Candidate `variant` of the catalog: variants differ in their tools, so in their digest. */
function candidate(variant: number, policyEpoch = 0, discoveryStartedAt = 0): CatalogSnapshot {
  return createCatalogSnapshot({
    identity,
    audience: 'user',
    policyEpoch,
    pages: [[{ name: `tool_${variant}`, inputSchema: { type: 'object' } }]],
    revisionProof: 'unversioned',
    discoveryStartedAt,
  });
}

async function workers(
  schema: string,
  n: number,
): Promise<{ registries: FleetRegistry[]; handles: PgHandle[] }> {
  const handles = Array.from({ length: n }, () => new PgHandle({ url: server!.url, schema }));
  await migrateFleetStore(handles[0]!);
  return { handles, registries: handles.map((h, i) => new FleetRegistry(h, `worker-${i}`)) };
}

describe.skipIf(server === undefined)('fleet catalog registry (compare-and-set)', () => {
  it('refuses a candidate whose expectation is stale with PUBLISH_CONFLICT (reason generation), and the next attempt wins', async () => {
    const { registries, handles } = await workers(server!.schema('cas'), 2);
    const [a, b] = registries as [FleetRegistry, FleetRegistry];
    try {
      expect((await a.publish([candidate(1)]))[0]).toMatchObject({
        generation: 1,
        outcome: 'published',
      });
      await b.observe(identity, 'user');
      expect((await a.publish([candidate(2)]))[0]).toMatchObject({
        generation: 2,
        outcome: 'published',
      });
      const refused = await b.publish([candidate(3)]).catch((e: unknown) => e);
      expect(refused).toMatchObject({
        code: 'PUBLISH_CONFLICT',
        detail: { reason: 'generation', expectedGeneration: 1, activeGeneration: 2 },
      });
      // The refusal taught b the active generation: its next refresh publishes over it.
      expect((await b.publish([candidate(3)]))[0]).toMatchObject({
        generation: 3,
        outcome: 'published',
      });
      // The same listing as the active one is adopted, without moving the pointer.
      expect((await a.publish([candidate(3)]))[0]).toMatchObject({
        generation: 3,
        outcome: 'adopted',
      });
      const wrongEpoch = await a.publish([candidate(4, 9)]).catch((e: unknown) => e);
      expect(wrongEpoch).toMatchObject({
        code: 'PUBLISH_CONFLICT',
        detail: { reason: 'policy-epoch' },
      });
      expect((await a.current(identity, 'user'))?.generation).toBe(3);
    } finally {
      await Promise.all(handles.map((h) => h.close()));
    }
  });

  it('orders a listing against the active publication on the database clock: a host whose clock runs an hour ahead cannot publish a listing that started before the active one', async () => {
    const { registries, handles } = await workers(server!.schema('skew'), 2);
    const [a, b] = registries as [FleetRegistry, FleetRegistry];
    const hour = 3_600_000;
    const realNow = Date.now.bind(Date);
    try {
      await b.observe(identity, 'user');
      // b's listing starts now, on b's clock (an hour ahead)...
      const startedOnB = realNow() + hour;
      // ...then a publishes a later listing.
      expect((await a.publish([candidate(1)]))[0]).toMatchObject({ generation: 1 });
      // b publishes its earlier listing with its fast clock: it must not replace a's.
      const skewed = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + hour);
      let refused: unknown;
      try {
        refused = await b.publish([candidate(2, 0, startedOnB)]).catch((e: unknown) => e);
      } finally {
        skewed.mockRestore();
      }
      expect(refused).toMatchObject({
        code: 'PUBLISH_CONFLICT',
        detail: { reason: 'generation', expectedGeneration: 0, activeGeneration: 1 },
      });
    } finally {
      await Promise.all(handles.map((h) => h.close()));
    }
  });

  it('adoption checks the stored snapshot against the listing; load rebuilds it; an altered row is refused as corrupt', async () => {
    const { registries, handles } = await workers(server!.schema('adopt'), 2);
    const [a, b] = registries as [FleetRegistry, FleetRegistry];
    try {
      const published = candidate(1);
      const [first] = await a.publish([published]);
      const [adopted] = await b.publish([candidate(1)]);
      expect(adopted).toMatchObject({ generation: 1, outcome: 'adopted' });
      // Rebuilt from the store alone: a validated candidate with the published digest and tools.
      const loaded = await b.load(first!.snapshotDigest);
      expect(loaded && snapshotDigest(loaded)).toBe(first!.snapshotDigest);
      expect(loaded?.tools.map((t) => [t.name, t.descriptorDigest])).toEqual(
        published.tools.map((t) => [t.name, t.descriptorDigest]),
      );
      expect(await b.load('sha256:none')).toBeUndefined();
      // Options a JavaScript caller misspells or gets wrong are refused, not ignored.
      await expect(
        b.load(first!.snapshotDigest, { ttl: 5 } as unknown as { ttlMs: number }),
      ).rejects.toMatchObject({ code: 'INVALID_OPTIONS', detail: { option: 'ttl' } });
      await expect(b.load(first!.snapshotDigest, { ttlMs: -1 })).rejects.toMatchObject({
        code: 'INVALID_OPTIONS',
        detail: { option: 'ttlMs', value: -1 },
      });
      expect((await b.load(first!.snapshotDigest, { ttlMs: 1000 }))?.tools).toHaveLength(
        published.tools.length,
      );
      // Someone rewrites the stored tool: adopting it now would serve a catalog nobody listed.
      await handles[0]!.query(
        `UPDATE catalog_snapshots SET body = replace(body, '"tool_1"', '"tool_x"') WHERE digest = $1`,
        [first!.snapshotDigest],
      );
      const refused = await b.publish([candidate(1)]).catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 'STORE_UNAVAILABLE', detail: { reason: 'corrupt' } });
      await expect(b.load(first!.snapshotDigest)).rejects.toMatchObject({
        detail: { reason: 'corrupt' },
      });
      expect((await a.current(identity, 'user'))?.generation).toBe(1);
    } finally {
      await Promise.all(handles.map((h) => h.close()));
    }
  });

  it('concurrent publications: exactly one winner per round when any listing differs, generations monotonic (property)', async () => {
    const { registries, handles } = await workers(server!.schema('prop'), 6);
    const seed = Number(process.env['FC_SEED'] ?? Date.now() % 1_000_000);
    console.log(`[fast-check] registry CAS seed=${seed}`);
    let active: string | undefined;
    let generation = 0;
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 6, maxLength: 6 }),
          async (variants) => {
            await Promise.all(registries.map((r) => r.observe(identity, 'user')));
            const outcomes = await Promise.all(
              registries.map((r, i) =>
                r.publish([candidate(variants[i]!)]).then(
                  (p): FleetPublication | Error => p[0]!,
                  (e: unknown) => e as Error,
                ),
              ),
            );
            const digests = variants.map((v) => snapshotDigest(candidate(v)));
            const winners = outcomes.filter(
              (o): o is FleetPublication => !(o instanceof Error) && o.outcome === 'published',
            );
            const anyDiffers = digests.some((d) => d !== active);
            expect(winners).toHaveLength(anyDiffers ? 1 : 0);
            for (const o of outcomes) {
              if (o instanceof Error)
                expect(o).toMatchObject({
                  code: 'PUBLISH_CONFLICT',
                  detail: { reason: 'generation' },
                });
            }
            if (winners[0] !== undefined) {
              expect(winners[0].generation).toBe(generation + 1);
              generation = winners[0].generation;
              active = winners[0].snapshotDigest;
            }
            // Every adopter adopted the digest that was active when it ran, under its generation.
            for (const o of outcomes) {
              if (!(o instanceof Error) && o.outcome === 'adopted')
                expect(o.generation).toBeLessThanOrEqual(generation);
            }
            expect((await registries[0]!.current(identity, 'user'))?.generation ?? 0).toBe(
              generation,
            );
          },
        ),
        { numRuns: 40, seed },
      );
      const { rows } = await handles[0]!.query<{ generation: string }>(
        'SELECT generation FROM catalog_publications ORDER BY id',
      );
      const gens = rows.map((r) => Number(r.generation));
      expect(gens).toEqual(gens.map((_, i) => i + 1));
    } finally {
      await Promise.all(handles.map((h) => h.close()));
    }
  });
});
