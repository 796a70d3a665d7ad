import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CatalogError, CatalogRegistry, createCatalogSnapshot } from '@stepbind/binding/internal';

const seed = Number(process.env.STEPBIND_SEED ?? Date.now());
console.log(`registry.prop: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

const identity = { name: 'files', transportDigest: 'sha256:t' };

function candidate(i: number, audience: string) {
  return createCatalogSnapshot({
    identity,
    audience,
    policyEpoch: 0,
    pages: [[{ name: `tool_${i}`, inputSchema: { type: 'object' } }]],
    revisionProof: 'unversioned',
    discoveryStartedAt: i,
  });
}

describe('CatalogRegistry under arbitrary interleavings (property)', () => {
  it('never lets an older refresh replace a newer one', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(fc.constantFrom('user', 'admin'), { minLength: 1, maxLength: 8 }),
        async (s, audiences) => {
          const registry = new CatalogRegistry();
          // Every publication, in the order it happened: generation before and after.
          const log: { audience: string; read: number; before: number; after: number }[] = [];
          const refresh = async (i: number, audience: string): Promise<void> => {
            const read = registry.current('files', audience)?.generation ?? 0;
            await s.schedule(Promise.resolve(), `discover #${i}`);
            const c = candidate(i, audience);
            await s.schedule(Promise.resolve(), `validate #${i}`);
            const before = registry.current('files', audience)?.generation ?? 0;
            try {
              const p = registry.publish(c, { expectedGeneration: read });
              log.push({ audience, read, before, after: p.generation });
            } catch (error) {
              expect(error).toBeInstanceOf(CatalogError);
              expect((error as CatalogError).code).toBe('PUBLISH_CONFLICT');
              // A refused publication changed nothing and was refused for a real reason.
              expect(registry.current('files', audience)?.generation ?? 0).toBe(before);
              expect(before).not.toBe(read);
            }
          };
          const done = Promise.all(audiences.map((a, i) => refresh(i, a)));
          await s.waitAll();
          await done;
          for (const audience of ['user', 'admin']) {
            const mine = log.filter((l) => l.audience === audience);
            // Each success saw the generation it expected, and generations strictly increase.
            for (const l of mine) expect(l.before).toBe(l.read);
            for (let i = 1; i < mine.length; i++) {
              expect((mine[i]?.after ?? 0) > (mine[i - 1]?.after ?? 0)).toBe(true);
            }
            const last = mine.at(-1);
            expect(registry.current('files', audience)?.generation ?? 0).toBe(last?.after ?? 0);
            expect(registry.current('files', audience)?.audience ?? audience).toBe(audience);
          }
          // At least the first refresh of each audience that ran publishes.
          expect(log.length).toBeGreaterThan(0);
        },
      ),
      { seed, verbose: true },
    );
  });
});
