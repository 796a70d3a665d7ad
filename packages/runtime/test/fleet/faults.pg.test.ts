import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { isStepbindError, verifyChain } from '@stepbind/binding';
import {
  commitPolicyChange,
  FLEET_SCHEMA_VERSION,
  migrateFleetStore,
  PgHandle,
  PolicyView,
  PostgresJournalStore,
} from '@stepbind/runtime/fleet';
import { afterAll, describe, expect, it } from 'vitest';
import { receipt, record } from '../support/journal.js';
import { usePostgres } from '../support/postgres.js';
import { within } from '../support/wait.js';

// Its own throwaway cluster: this file restarts the server.
const server = await usePostgres('faults.pg.test.ts', { local: true });
afterAll(() => server?.stop());

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

function migrateInChild(
  url: string,
  schema: string,
): Promise<{ code: number | null; out: string }> {
  const child = spawn(
    process.execPath,
    [CLI, 'store', 'migrate', '--store', url, '--schema', schema, '--json'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, out }));
}

describe.skipIf(server === undefined)('fleet store faults', () => {
  it('two processes migrating the same schema at once: both succeed, each migration is applied once', async () => {
    const schema = server!.schema('mig');
    const results = await Promise.all([
      migrateInChild(server!.url, schema),
      migrateInChild(server!.url, schema),
    ]);
    expect(results.map((r) => r.code)).toEqual([0, 0]);
    const reports = results.map((r) => JSON.parse(r.out) as { applied: number[] });
    expect(reports.flatMap((r) => r.applied).sort()).toEqual(
      Array.from({ length: FLEET_SCHEMA_VERSION }, (_, i) => i + 1),
    );
    const handle = new PgHandle({ url: server!.url, schema });
    const { rows } = await handle.query('SELECT version FROM schema_migrations ORDER BY version');
    await handle.close();
    expect(rows.map((r) => Number(r['version']))).toEqual(
      Array.from({ length: FLEET_SCHEMA_VERSION }, (_, i) => i + 1),
    );
  });

  it('the database restarts mid-run: writes in flight fail typed or succeed, writes after it succeed, the policy view re-reads, the chain verifies', async () => {
    const schema = server!.schema('restart');
    const handle = new PgHandle(
      { url: server!.url, schema },
      { maxAttempts: 10, retryDelayMs: 50 },
    );
    await migrateFleetStore(handle);
    const store = new PostgresJournalStore(handle);
    const admin = new PgHandle({ url: server!.url, schema }, { maxAttempts: 10, retryDelayMs: 50 });
    const connections: boolean[] = [];
    // The listener re-reads, then reports itself connected: both are awaited, never polled.
    let onReconnected!: () => void;
    const reconnected = new Promise<void>((resolve) => (onReconnected = resolve));
    const appliedWaiters = new Set<{ readonly version: number; readonly resolve: () => void }>();
    const view = new PolicyView(handle, {
      reconnect: { initialMs: 50, maxMs: 200 },
      onConnection: (e) => {
        connections.push(e.connected);
        if (e.connected && connections.includes(false)) onReconnected();
      },
      onApplied: (policy) => {
        for (const waiter of [...appliedWaiters])
          if (policy.version >= waiter.version) {
            appliedWaiters.delete(waiter);
            waiter.resolve();
          }
      },
    });
    const applied = (version: number): Promise<void> =>
      view.policy.version >= version
        ? Promise.resolve()
        : within(
            new Promise<void>((resolve) => appliedWaiters.add({ version, resolve })),
            `policy version ${version} in the view`,
          );
    await view.open();
    try {
      let stop = false;
      const outcomes = { ok: 0, typed: 0, untyped: 0 };
      const writer = (async () => {
        for (let i = 0; !stop; i++) {
          try {
            await store.insert(record(`k${i}`));
            await store.appendReceipt(receipt(i, `k${i}`));
            outcomes.ok++;
          } catch (error) {
            if (isStepbindError(error) && error.code === 'JOURNAL_UNAVAILABLE') outcomes.typed++;
            else outcomes.untyped++;
          }
        }
      })();
      await store.insert(record('before'));
      await server!.restart();
      // Missed while the server was down: the view must learn it on reconnect.
      const committed = await commitPolicyChange(admin, { kind: 'revoke', server: 's', tool: 't' });
      await store.insert(record('after'));
      stop = true;
      await writer;
      expect(outcomes.untyped).toBe(0);
      expect(outcomes.ok).toBeGreaterThan(0);
      expect((await store.get('after'))?.key).toBe('after');
      await applied(committed.version);
      expect(view.isRevoked('s', 't')).toBe(true);
      await within(reconnected, 'reconnection of the policy listener');
      // It lost its connection with the restart and listened again (then re-read) after it.
      expect(connections.slice(0, 2)).toEqual([true, false]);
      expect(connections.at(-1)).toBe(true);
      expect(verifyChain(await store.anchor(), await store.readReceipts())).toMatchObject({
        ok: true,
      });
    } finally {
      await view.close();
      await admin.close();
      await handle.close();
    }
  });
});
