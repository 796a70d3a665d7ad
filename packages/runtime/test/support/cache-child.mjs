// One process of the catalog cache's exit test (test/cache/catalog-cache.test.ts): opens the cache
// file named in argv[2] from the built runtime with a long write delay, records one catalog, closes
// and prints "closed". With any timer or handle left, the process would not exit by itself.
import process from 'node:process';
import { createCatalogSnapshot } from '@stepbind/binding/internal';
import { CatalogCache } from '../../dist/cache/catalog-cache.js';

const cache = await CatalogCache.open(process.argv[2], {
  emit: (event) => process.stderr.write(`${JSON.stringify(event)}\n`),
  writeDelayMs: 3_600_000,
});
const snapshot = createCatalogSnapshot({
  identity: { name: 's', transportDigest: 'sha256:0' },
  audience: 'default',
  policyEpoch: 0,
  pages: [[{ name: 'alpha', inputSchema: { type: 'object' } }]],
  revisionProof: 'unversioned',
  discoveryStartedAt: 0,
});
cache.record(
  { server: 's', identityKey: 'sha256:0', audience: 'default', principal: '', toolFilter: '' },
  snapshot,
);
await cache.close();
process.stdout.write('closed\n');
