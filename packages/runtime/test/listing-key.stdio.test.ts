import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCatalogSnapshot } from '@stepbind/binding/internal';
import { scriptedTool, stdioServerParams } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, type ServerConfig } from '../src/config.js';
import { connectServer } from '../src/connect.js';
import { discoverCatalog, type CatalogDiscovery } from '../src/discover-catalog.js';
import { identityOf } from '../src/transports/index.js';

// The listing key of a re-list (DESIGN §21, "Discovery") is derived from the page root the builder computes
// anyway: an unchanged listing skips the snapshot, and any change a snapshot would show changes
// the key.

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-listing-key-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Tool = Record<string, unknown>;

const tools = (): Tool[] =>
  ['alpha', 'beta', 'gamma', 'delta', 'epsilon'].map((name) => ({
    ...scriptedTool(name),
    description: `Tool ${name}.`,
    annotations: { readOnlyHint: true, title: name },
  }));

/** Every object's keys in reverse order: the same JSON values, served differently. */
function reversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversed);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).reverse()) {
    out[key] = reversed((value as Record<string, unknown>)[key]);
  }
  return out;
}

let files = 0;
async function list(
  pages: Tool[][],
  options: { previousListingKey?: string; tools?: unknown } = {},
): Promise<CatalogDiscovery> {
  const fixturePath = join(dir, `fixture-${files++}.json`);
  await writeFile(
    fixturePath,
    JSON.stringify({ generations: [{ pages: pages.map((p) => ({ tools: p })) }] }),
  );
  const config: ServerConfig = parseConfig({
    mcpServers: {
      s: {
        ...stdioServerParams({ scenario: 'fixture', fixturePath }),
        ...(options.tools === undefined ? {} : { tools: options.tools }),
      },
    },
  }).servers.get('s') as ServerConfig;
  const connection = await connectServer('s', config);
  try {
    return await discoverCatalog(connection, {
      name: 's',
      config,
      identity: identityOf('s', config, connection),
      policyEpoch: 0,
      ...(options.previousListingKey === undefined
        ? {}
        : { previousListingKey: options.previousListingKey }),
    });
  } finally {
    await connection.close();
  }
}

describe('the listing key of a re-list over a real stdio server', () => {
  it('is equal for an equal listing (even reordered keys) and differs for any change a snapshot shows', async () => {
    const base = tools();
    const first = await list([base.slice(0, 2), base.slice(2)]);
    const key = first.listingKey as string;
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(first.snapshot?.tools).toHaveLength(5);
    // The key covers what the snapshot's page root covers, computed from the same pass.
    const pages = [base.slice(0, 2), base.slice(2)];
    expect(first.snapshot?.pageRoot).toBe(
      createCatalogSnapshot({
        identity: { name: 's', transportDigest: 'sha256:0' },
        audience: 'default',
        policyEpoch: 0,
        pages,
        revisionProof: 'unversioned',
        discoveryStartedAt: 0,
      }).pageRoot,
    );

    // The same listing again, and served with every object's keys reversed: no new snapshot.
    const again = await list([base.slice(0, 2), base.slice(2)], { previousListingKey: key });
    expect(again.listingKey).toBe(key);
    expect(again.snapshot).toBeUndefined();
    const reordered = await list(
      [base.slice(0, 2), base.slice(2)].map((p) => p.map((t) => reversed(t) as Tool)),
      { previousListingKey: key },
    );
    expect(reordered.listingKey).toBe(key);
    expect(reordered.snapshot).toBeUndefined();

    // One description edited on the last page: a new key and a new snapshot.
    const edited = tools();
    (edited[4] as Tool)['description'] = 'Tool epsilon, edited.';
    const changed = await list([edited.slice(0, 2), edited.slice(2)], { previousListingKey: key });
    expect(changed.listingKey).not.toBe(key);
    expect(changed.snapshot?.tools[4]?.descriptorDigest).not.toBe(
      first.snapshot?.tools[4]?.descriptorDigest,
    );

    // A nested schema member, the page boundaries, the tool order and the filter are covered too.
    const nested = tools();
    (nested[0] as { inputSchema: { properties: Record<string, unknown> } }).inputSchema.properties[
      'extra'
    ] = { type: 'string' };
    const keys = [
      (await list([nested.slice(0, 2), nested.slice(2)])).listingKey,
      (await list([base.slice(0, 3), base.slice(3)])).listingKey,
      (await list([[base[1] as Tool, base[0] as Tool], base.slice(2)])).listingKey,
      (await list([base.slice(0, 2), base.slice(2)], { tools: { deny: ['beta'] } })).listingKey,
    ];
    for (const other of keys) expect(other).not.toBe(key);
    expect(new Set(keys).size).toBe(keys.length);
  });
});
