import { once } from 'node:events';
import {
  commitPolicyChange,
  migrateFleetStore,
  PgHandle,
  PolicyView,
  type PolicySnapshot,
  type PolicyViewOptions,
} from '@stepbind/runtime/fleet';
import { afterAll, describe, expect, it } from 'vitest';
import { usePostgres } from '../support/postgres.js';
import { EventEmitter } from 'node:events';

const server = await usePostgres('policy.pg.test.ts');
afterAll(() => server?.stop());

interface Worker extends AsyncDisposable {
  readonly handle: PgHandle;
  readonly view: PolicyView;
  /** Emits `applied` (policy, cause) and `connection` ({ connected }). */
  readonly events: EventEmitter;
}

async function worker(schema: string, options: PolicyViewOptions = {}): Promise<Worker> {
  const handle = new PgHandle({ url: server!.url, schema });
  await migrateFleetStore(handle);
  const events = new EventEmitter();
  const view = new PolicyView(handle, {
    ...options,
    onApplied: (policy, cause) => events.emit('applied', policy, cause),
    onConnection: (event) => events.emit('connection', event),
  });
  await view.open();
  return {
    handle,
    view,
    events,
    [Symbol.asyncDispose]: async () => {
      await view.close();
      await handle.close();
    },
  };
}

/** Resolves with the first applied policy whose version is at least `version`. */
function appliedAtLeast(w: Worker, version: number): Promise<[PolicySnapshot, string]> {
  if (w.view.policy.version >= version) return Promise.resolve([w.view.policy, 'already']);
  return new Promise((resolve) => {
    const on = (policy: PolicySnapshot, cause: string): void => {
      if (policy.version < version) return;
      w.events.off('applied', on);
      resolve([policy, cause]);
    };
    w.events.on('applied', on);
  });
}

async function terminateListeners(schema: string): Promise<number> {
  const admin = new PgHandle({ url: server!.url, schema });
  try {
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(pg_terminate_backend(pid, 5000))::text AS n FROM pg_stat_activity WHERE application_name = $1`,
      [`stepbind-listen:${schema}`],
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await admin.close();
  }
}

describe.skipIf(server === undefined)('fleet policy (LISTEN/NOTIFY)', () => {
  it('a revocation committed by one worker is applied by every other worker from its notification', async () => {
    const schema = server!.schema('p');
    await using a = await worker(schema);
    await using b = await worker(schema);
    await using c = await worker(schema);
    expect(b.view.isRevoked('files', 'write')).toBe(false);
    // Listening before the commit: the notification may arrive before commitPolicyChange returns.
    const next = a.view.policy.version + 1;
    const seen = Promise.all([appliedAtLeast(b, next), appliedAtLeast(c, next)]);
    const committed = await commitPolicyChange(a.handle, {
      kind: 'revoke',
      server: 'files',
      tool: 'write',
    });
    const [[pb, causeB], [pc, causeC]] = await seen;
    expect([pb.version, pc.version]).toEqual([committed.version, committed.version]);
    expect([causeB, causeC]).toEqual(['notify', 'notify']);
    expect(b.view.isRevoked('files', 'write')).toBe(true);
    expect(c.view.isRevoked('files', 'read')).toBe(false);
    // A whole-server revocation covers every tool; a restore of the server lifts all of them.
    const whole = await commitPolicyChange(a.handle, { kind: 'revoke', server: 'files' });
    await appliedAtLeast(b, whole.version);
    expect(b.view.isRevoked('files', 'read')).toBe(true);
    const restored = await commitPolicyChange(a.handle, { kind: 'restore', server: 'files' });
    await appliedAtLeast(b, restored.version);
    expect([b.view.isRevoked('files', 'read'), b.view.isRevoked('files', 'write')]).toEqual([
      false,
      false,
    ]);
    const epoch = await commitPolicyChange(a.handle, { kind: 'epoch' });
    await appliedAtLeast(c, epoch.version);
    expect(c.view.epoch).toBe(1);
  });

  it('refuses an epoch that does not increase, and changes nothing', async () => {
    const schema = server!.schema('e');
    await using a = await worker(schema);
    await commitPolicyChange(a.handle, { kind: 'epoch', epoch: 5 });
    const error = await commitPolicyChange(a.handle, { kind: 'epoch', epoch: 5 }).catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'INVALID_OPTIONS', detail: { current: 5 } });
    await a.view.refresh();
    expect(a.view.epoch).toBe(5);
  });

  it('re-reads the policy on reconnect after its notification connection was dropped, so a change made meanwhile is not missed', async () => {
    const schema = server!.schema('drop');
    await using w = await worker(schema, { reconnect: { initialMs: 1000 } });
    await using admin = await worker(schema);
    const lost = once(w.events, 'connection');
    // Kill the listener and commit while it is gone: its NOTIFY is never delivered to it.
    const before = w.view.policy.version;
    expect(await terminateListeners(schema)).toBeGreaterThanOrEqual(1);
    expect((await lost)[0]).toMatchObject({ connected: false });
    const committed = await commitPolicyChange(admin.handle, {
      kind: 'revoke',
      server: 's',
      tool: 't',
    });
    expect(w.view.policy.version).toBe(before);
    const [policy, cause] = await appliedAtLeast(w, committed.version);
    expect(policy.version).toBe(committed.version);
    expect(cause).toBe('reconnect');
    expect(w.view.isRevoked('s', 't')).toBe(true);
    expect(w.view.connected).toBe(true);
  });

  it('refuses calls with POLICY_STALE once the view is older than its bound, and admits again once proven current', async () => {
    const schema = server!.schema('stale');
    let now = 1_000_000;
    await using w = await worker(schema, {
      maxStalenessMs: 5_000,
      heartbeatMs: 3_600_000,
      reconnect: { initialMs: 3_600_000 },
      now: () => now,
    });
    now += 5_000;
    expect(w.view.isRevoked('s', 't')).toBe(false);
    now += 1;
    let error: unknown;
    try {
      w.view.isRevoked('s', 't');
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({
      code: 'POLICY_STALE',
      detail: { server: 's', tool: 't', ageMs: 5_001, maxStalenessMs: 5_000 },
    });
    await w.view.refresh();
    expect(w.view.isRevoked('s', 't')).toBe(false);
    // With the connection lost (and no reconnect yet), nothing can prove it current: it stays refused.
    const lost = once(w.events, 'connection');
    await terminateListeners(schema);
    await lost;
    now += 5_001;
    await w.view.refresh();
    expect(() => w.view.isRevoked('s', 't')).toThrow(/POLICY_STALE|last confirmed/);
  });
});
