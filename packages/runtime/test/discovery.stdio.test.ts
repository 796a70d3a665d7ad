import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli/run.js';
import { stdioServerParams, type ScriptedServerOptions } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_ERA, TEST_PROTOCOL_VERSION } from './support/era.js';

const fixtureDir = fileURLToPath(
  new URL('../../testkit/test/fixtures/validation/', import.meta.url),
);
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stepbind-discovery-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Report {
  readonly name: string;
  readonly ok: boolean;
  readonly state?: string;
  readonly sourceRevision?: string | null;
  readonly error?: { readonly code: string; readonly message: string };
  readonly era?: string;
  readonly protocolVersion?: string | null;
}

async function catalog(
  servers: Record<string, ScriptedServerOptions>,
): Promise<Map<string, Report>> {
  const mcpServers: Record<string, unknown> = {};
  for (const [name, options] of Object.entries(servers))
    mcpServers[name] = stdioServerParams(options);
  const path = join(dir, `${Object.keys(servers).join('-').slice(0, 60)}.json`);
  // Ten children booting at once on a loaded machine can miss the 2 s server/discover budget; a
  // modern one is still found modern by its late answer (DESIGN §10.1), so no era needs fewer.
  const concurrency = 8;
  await writeFile(path, JSON.stringify({ mcpServers, concurrency }));
  let out = '';
  await runCli(['catalog', '--config', path, '--json'], {
    stdout: (t) => (out += t),
    stderr: () => undefined,
  });
  const reports = (JSON.parse(out) as { servers: Report[] }).servers;
  // Every server that listed spoke this run's era: the modern run cannot fall back unnoticed.
  for (const r of reports.filter((r) => r.ok)) {
    expect([r.name, r.era, r.protocolVersion]).toEqual([r.name, TEST_ERA, TEST_PROTOCOL_VERSION]);
  }
  return new Map(reports.map((r) => [r.name, r]));
}

describe('catalog validation over real stdio servers', () => {
  const codes = readdirSync(fixtureDir).map((f) => f.replace(/\.json$/, ''));

  it('refuses each validation fixture with its own code, naming the server and what to do', async () => {
    const servers: Record<string, ScriptedServerOptions> = {};
    for (const code of codes)
      servers[code] = { scenario: 'fixture', fixturePath: join(fixtureDir, `${code}.json`) };
    const reports = await catalog(servers);
    for (const code of codes) {
      const report = reports.get(code);
      expect(report?.ok, code).toBe(false);
      expect(report?.error?.code, `${code}: ${report?.error?.message}`).toBe(code);
      expect(report?.error?.message, code).toContain(`"${code}"`);
    }
    expect(codes).toHaveLength(10);
  });
});

describe('source revision proof over real stdio servers', () => {
  it('proves a catalog whose every page and the final re-read carry one revision', async () => {
    const reports = await catalog({ consistent: { scenario: 'revision-consistent' } });
    expect(reports.get('consistent')).toMatchObject({
      ok: true,
      state: 'ELIGIBLE',
      sourceRevision: 'rev-1',
    });
  });

  it('restarts a traversal whose revision changed mid-way and proves the new revision', async () => {
    const reports = await catalog({ changing: { scenario: 'revision-changing' } });
    expect(reports.get('changing')).toMatchObject({
      ok: true,
      state: 'ELIGIBLE',
      sourceRevision: 'rev-2',
    });
  });

  it('refuses a catalog whose revision is missing on one page, after the restart budget', async () => {
    const reports = await catalog({ missing: { scenario: 'revision-missing-page' } });
    expect(reports.get('missing')?.error?.code).toBe('REVISION_CHANGED');
  });

  it('publishes a catalog without any revision as an unversioned observation', async () => {
    const reports = await catalog({ plain: { scenario: 'normal' } });
    expect(reports.get('plain')).toMatchObject({
      ok: true,
      state: 'UNVERSIONED_OBSERVATION',
      sourceRevision: null,
    });
  });
});
