/**
 * The fleet's token store in PostgreSQL: logins keyed by (issuer, resource, client id) with
 * versions, registrations, an advisory lock per key that excludes other workers (bounded wait,
 * abort ends it), no token in any error; and the cross-process refresh proof of
 * support/refresh-fleet.ts with 8 worker processes on one PostgreSQL store.
 */
import {
  attachFleet,
  migrateFleetStore,
  PgHandle,
  PostgresTokenStore,
} from '@stepbind/runtime/fleet';
import { afterAll, describe, expect, it } from 'vitest';
import type { StoredLogin, TokenKey } from '../../src/auth/types.js';
import { usePostgres } from '../support/postgres.js';
import {
  checkSingleFlightRefresh,
  MAX_WORKERS,
  startRefreshWorkers,
} from '../support/refresh-fleet.js';
import { startTokenEndpoint } from '../support/token-endpoint.js';

const server = await usePostgres('tokens.pg.test.ts');
afterAll(() => server?.stop());

const KEY: TokenKey = {
  issuer: 'https://as.example',
  resource: 'https://mcp.example/mcp',
  clientId: 'client-1',
};
const LOGIN: Omit<StoredLogin, 'version' | 'updatedAt'> = {
  principal: 'https://as.example user-1',
  server: 'docs',
  scopes: ['read', 'write'],
  tokens: {
    accessToken: 'at-secret-0001',
    tokenType: 'DPoP',
    refreshToken: 'rt-secret-0001',
    expiresAt: 1_900_000_000_000,
    scope: 'read write',
  },
};

/** `n` stores over handles of their own (as `n` workers would have), on one migrated schema. */
async function stores(
  n: number,
  lockTimeoutMs?: number,
): Promise<{ stores: PostgresTokenStore[]; close(): Promise<void> }> {
  const schema = server!.schema('tokens');
  const handles = Array.from({ length: n }, () => new PgHandle({ url: server!.url, schema }));
  await migrateFleetStore(handles[0]!);
  return {
    stores: handles.map(
      (h) => new PostgresTokenStore(h, lockTimeoutMs === undefined ? {} : { lockTimeoutMs }),
    ),
    close: async () => {
      await Promise.all(handles.map((h) => h.close()));
    },
  };
}

describe.skipIf(server === undefined)('PostgreSQL token store', () => {
  it('stores a login with versions growing by one, reads it from another worker, lists it without tokens, deletes it', async () => {
    const fleet = await stores(2);
    const [a, b] = fleet.stores as [PostgresTokenStore, PostgresTokenStore];
    try {
      expect(await a.get(KEY)).toBeUndefined();
      const first = await a.put(KEY, LOGIN);
      expect(first).toMatchObject({ ...LOGIN, version: 1 });
      const second = await b.put(KEY, {
        ...LOGIN,
        tokens: { ...LOGIN.tokens, accessToken: 'at-secret-0002' },
      });
      expect(second.version).toBe(2);
      expect(await a.get(KEY)).toEqual(second);
      expect(await a.get({ ...KEY, resource: 'https://other/mcp' })).toBeUndefined();
      const listed = await b.list();
      expect(listed).toEqual([
        expect.objectContaining({ key: KEY, principal: LOGIN.principal, hasRefreshToken: true }),
      ]);
      expect(JSON.stringify(listed)).not.toContain('secret');
      expect(await a.delete(KEY)).toBe(true);
      expect(await b.delete(KEY)).toBe(false);
      expect(await b.get(KEY)).toBeUndefined();
    } finally {
      await fleet.close();
    }
  });

  it('keeps one client registration per (issuer, redirect URI), replaced by the next', async () => {
    const fleet = await stores(1);
    const [store] = fleet.stores as [PostgresTokenStore];
    try {
      const registration = {
        issuer: KEY.issuer,
        redirectUri: 'http://127.0.0.1:33418/callback',
        clientId: 'dyn-1',
        clientSecret: 'cs-secret',
        tokenEndpointAuthMethod: 'client_secret_post' as const,
      };
      await store.putRegistration(registration);
      await store.putRegistration({ ...registration, clientId: 'dyn-2' });
      expect(await store.getRegistration(KEY.issuer, registration.redirectUri)).toEqual({
        ...registration,
        clientId: 'dyn-2',
      });
      expect(await store.getRegistration(KEY.issuer, '')).toBeUndefined();
    } finally {
      await fleet.close();
    }
  });

  /** Holds `store`'s lock of KEY until the returned release is called. */
  async function hold(
    store: PostgresTokenStore,
  ): Promise<{ release(): void; done: Promise<void> }> {
    let release: () => void = () => undefined;
    let entered: () => void = () => undefined;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const done = store.withLock(KEY, async () => {
      const held = new Promise<void>((resolve) => (release = resolve));
      entered();
      await held;
    });
    await inside;
    return { release: () => release(), done };
  }

  it("excludes another worker from a key's lock while it is held (its wait ends at lockTimeoutMs: STORE_UNAVAILABLE, reason timeout), never from another key's", async () => {
    const fleet = await stores(2, 100);
    const [a, b] = fleet.stores as [PostgresTokenStore, PostgresTokenStore];
    try {
      const held = await hold(a);
      let ran = false;
      const refused = await b.withLock(KEY, async () => (ran = true)).catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 'STORE_UNAVAILABLE', detail: { reason: 'timeout' } });
      expect((refused as Error).message).toMatch(/another worker held the lock/);
      expect(ran).toBe(false);
      expect(await b.withLock({ ...KEY, clientId: 'other' }, async () => 'other key')).toBe(
        'other key',
      );
      held.release();
      await held.done;
      expect(await b.withLock(KEY, async () => 'after release')).toBe('after release');
    } finally {
      await fleet.close();
    }
  });

  it('ends a lock wait on abort with ABORTED, without running the work', async () => {
    const fleet = await stores(2);
    const [a, b] = fleet.stores as [PostgresTokenStore, PostgresTokenStore];
    try {
      const held = await hold(a);
      const controller = new AbortController();
      let ran = false;
      const waiting = b.withLock(KEY, async () => (ran = true), controller.signal);
      controller.abort();
      await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
      expect(ran).toBe(false);
      held.release();
      await held.done;
    } finally {
      await fleet.close();
    }
  });

  it('refuses the put of work whose lock session was lost (the row stays as it was) and fails the work', async () => {
    const fleet = await stores(1);
    const [store] = fleet.stores as [PostgresTokenStore];
    const admin = new PgHandle({
      url: server!.url,
      schema: store.location.match(/schema (\w+)/)![1]!,
    });
    try {
      await store.put(KEY, LOGIN);
      const outcome = await store
        .withLock(KEY, async () => {
          // Another party ends the lock's session (a restart, a dropped connection): the lock is free.
          await admin.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE application_name = 'stepbind-token-lock' AND datname = current_database()
                AND pid <> pg_backend_pid()`,
          );
          return await store.put(KEY, {
            ...LOGIN,
            tokens: { ...LOGIN.tokens, accessToken: 'at-2' },
          });
        })
        .catch((e: unknown) => e);
      expect(outcome).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        detail: { reason: 'unreachable' },
      });
      expect((outcome as Error).message).toMatch(/lock was lost|lock.* lost/);
      expect(String((outcome as Error).message)).not.toContain('secret');
      const row = await store.get(KEY);
      expect(row).toMatchObject({ version: 1, tokens: { accessToken: 'at-secret-0001' } });
    } finally {
      await admin.close();
      await fleet.close();
    }
  });

  it('close() lets running locked work finish (its put lands) before it ends the lock connections', async () => {
    const fleet = await stores(1);
    const [store] = fleet.stores as [PostgresTokenStore];
    const order: string[] = [];
    try {
      let closing: Promise<void> | undefined;
      const stored = await store.withLock(KEY, async () => {
        closing = store.close().then(() => void order.push('closed'));
        const login = await store.put(KEY, LOGIN);
        order.push('work');
        return login;
      });
      await closing;
      expect(stored.version).toBe(1);
      expect(order).toEqual(['work', 'closed']);
    } finally {
      await fleet.close();
    }
  });

  it('reports an altered row as STORE_UNAVAILABLE (reason corrupt) without quoting it', async () => {
    const fleet = await stores(1);
    const [store] = fleet.stores as [PostgresTokenStore];
    const admin = new PgHandle({
      url: server!.url,
      schema: store.location.match(/schema (\w+)/)![1]!,
    });
    try {
      await store.put(KEY, LOGIN);
      await admin.query('UPDATE auth_logins SET tokens = left(tokens, 30)');
      const error = await store.get(KEY).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', detail: { reason: 'corrupt' } });
      expect(JSON.stringify(error) + String((error as Error).message)).not.toContain('secret');
    } finally {
      await admin.close();
      await fleet.close();
    }
  });

  it("is the FleetStore's tokenStore(), the same one each time, closed with it", async () => {
    const fleet = await attachFleet({ url: server!.url, schema: server!.schema('tokens') });
    try {
      expect(fleet.tokenStore()).toBe(fleet.tokenStore());
      await fleet.tokenStore().put(KEY, LOGIN);
      expect((await fleet.tokenStore().get(KEY))?.version).toBe(1);
    } finally {
      await fleet.close();
    }
    await expect(fleet.tokenStore().withLock(KEY, async () => 1)).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      detail: { reason: 'closed' },
    });
  });
});

describe.skipIf(server === undefined)(
  'single-flight refresh across processes on one PostgreSQL store',
  () => {
    it('every process stays logged in and the endpoint sees exactly one refresh per expiry, never a reused refresh token', async () => {
      const schema = server!.schema('refresh');
      const admin = new PgHandle({ url: server!.url, schema });
      await migrateFleetStore(admin);
      const endpoint = await startTokenEndpoint();
      const workers = await startRefreshWorkers(MAX_WORKERS, {
        kind: 'pg',
        url: server!.url,
        schema,
      });
      try {
        await checkSingleFlightRefresh({
          name: 'refresh.process.pg',
          workers,
          endpoint,
          store: new PostgresTokenStore(admin),
          numRuns: 8,
        });
      } finally {
        await Promise.all(workers.map((w) => w.stop()));
        await endpoint.close();
        await admin.close();
      }
    }, 120_000);
  },
);

describe('PostgresTokenStore options', () => {
  it.each([
    ['an unknown option', { lockTimeout: 5 }, 'lockTimeout'],
    ['a fractional lockTimeoutMs', { lockTimeoutMs: 2.5 }, 'lockTimeoutMs'],
    ['a zero lockTimeoutMs', { lockTimeoutMs: 0 }, 'lockTimeoutMs'],
  ])(
    'refuses %s with INVALID_OPTIONS naming it, before touching the database',
    (_n, options, option) => {
      let error: unknown;
      try {
        // The options are checked first: no handle is needed to refuse them.
        new PostgresTokenStore(undefined as never, options as never);
      } catch (e) {
        error = e;
      }
      expect(error).toMatchObject({ code: 'INVALID_OPTIONS', detail: { option } });
    },
  );
});
