/**
 * Refresh is single-flight across processes on one FileTokenStore: up to 8 real processes find the
 * same login expired at once and refresh it with real refresh_token grants against a rotating
 * endpoint that revokes the token family at the first reuse (see support/refresh-fleet.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { FileTokenStore } from '../../src/auth/file-token-store.js';
import {
  checkSingleFlightRefresh,
  MAX_WORKERS,
  startRefreshWorkers,
  type RefreshWorker,
} from '../support/refresh-fleet.js';
import { startTokenEndpoint, type TokenEndpoint } from '../support/token-endpoint.js';

let dir: string;
let endpoint: TokenEndpoint;
let workers: RefreshWorker[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stepbind-refresh-'));
  endpoint = await startTokenEndpoint();
  workers = await startRefreshWorkers(MAX_WORKERS, {
    kind: 'file',
    path: join(dir, 'tokens.json'),
  });
}, 60_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await endpoint?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('single-flight refresh across processes on one token file', () => {
  it('every process stays logged in and the endpoint sees exactly one refresh per expiry, never a reused refresh token', async () => {
    await checkSingleFlightRefresh({
      name: 'refresh.process.file',
      workers,
      endpoint,
      store: new FileTokenStore({ path: join(dir, 'tokens.json') }),
      numRuns: 12,
    });
  }, 120_000);
});
