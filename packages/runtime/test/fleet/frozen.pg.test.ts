/**
 * A PostgreSQL that stops answering (issue 25, finding 3): its processes are frozen with SIGSTOP
 * (this file's own throwaway cluster, by its postmaster.pid), or the journal table is locked by
 * another connection. A keyed run must come back with a typed error within its bound and send
 * nothing, and close() must resolve while the database is still frozen.
 */
import { rmSync } from 'node:fs';
import { McpRuntime } from '@stepbind/runtime';
import { PgHandle } from '@stepbind/runtime/fleet';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type ServerFixture,
} from '@stepbind/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { WRITE } from '../support/fixtures.js';
import { usePostgres } from '../support/postgres.js';
import { failure } from '../support/errors.js';

// Its own throwaway cluster: this file freezes the server.
const server = await usePostgres('frozen.pg.test.ts', { local: true });
afterAll(() => server?.stop());

const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [{ tools: [{ name: 'send', inputSchema: { type: 'object' }, annotations: WRITE }] }],
    },
  ],
};

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A worker whose store gives up on a silent database after `queryTimeoutMs`. */
async function worker(
  schema: string,
  audit: string,
  tuning: Record<string, unknown> = {},
): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    {
      mcpServers: {
        s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath: audit }),
      },
    },
    { approval: 'none', store: { url: server!.url, schema, closeGraceMs: 200, ...tuning } },
  );
  cleanups.push(() => runtime.close());
  return runtime;
}

function tempAudit(): string {
  const path = tempAuditPath('frozen');
  cleanups.push(() => rmSync(path, { force: true }));
  return path;
}

async function sentTools(audit: string): Promise<unknown[]> {
  return (await readAuditTrail(audit)).filter((e) => e.method === 'tools/call').map((e) => e.tool);
}

describe.skipIf(server === undefined)('a PostgreSQL that stops answering', () => {
  it('frozen (SIGSTOP): a keyed run with timeoutMs fails JOURNAL_UNAVAILABLE (reason timeout) and sends nothing; close() resolves while frozen; the key runs once after the thaw', async () => {
    const schema = server!.schema('frz');
    const audit = tempAudit();
    // The store's own timeout is far beyond the call's: the call's bound must be what ends it.
    const runtime = await worker(schema, audit, { queryTimeoutMs: 120_000 });
    const step = await runtime.captureBinding();
    await step.prepareCall('s__send').run({ n: 0 }, { idempotencyKey: 'warm' });
    const thaw = server!.freeze();
    cleanups.push(thaw);
    const error = await failure(
      step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1', timeoutMs: 400 }),
    );
    expect(error).toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
      detail: { reason: 'timeout', delivery: 'not-sent', server: 's', tool: 'send' },
    });
    expect(error.message).toMatch(/tool "send", idempotency key "order-1"\) was not sent/);
    expect(error.message).toMatch(/did not answer in time/);
    expect(error.message).not.toMatch(/lock/i);
    // Still frozen: close() abandons what is pending and destroys the connections.
    step.release();
    await runtime.close();
    thaw();
    expect(await sentTools(audit)).toEqual(['send']);
    // Nothing of order-1 was committed: a worker after the thaw runs it, once.
    const again = await worker(schema, audit);
    const next = await again.captureBinding();
    const outcome = await next.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1' });
    expect(outcome.replayed).toBe(false);
    next.release();
    expect(await sentTools(audit)).toEqual(['send', 'send']);
  });

  it('frozen (SIGSTOP): the caller aborting a keyed run ends it with ABORTED without waiting for the database, nothing sent', async () => {
    const schema = server!.schema('frza');
    const audit = tempAudit();
    const runtime = await worker(schema, audit, { queryTimeoutMs: 120_000 });
    const step = await runtime.captureBinding();
    cleanups.push(() => step.release());
    await step.prepareCall('s__send').run({ n: 0 }, { idempotencyKey: 'warm' });
    const thaw = server!.freeze();
    cleanups.push(thaw);
    const controller = new AbortController();
    // With a prepare hook the claim reads the key first (DESIGN §21.6): that read is pending in
    // the store, on the frozen database, when run() returns, so the abort below lands there.
    const running = step.prepareCall('s__send').run(
      { n: 1 },
      {
        idempotencyKey: 'order-2',
        signal: controller.signal,
        timeoutMs: 600_000,
        prepare: () => undefined,
      },
    );
    controller.abort(new Error('the user cancelled'));
    const error = await failure(running);
    expect(error).toMatchObject({ code: 'ABORTED', detail: { delivery: 'not-sent' } });
    expect(error.message).not.toMatch(/lock/i);
    thaw();
    expect(await sentTools(audit)).toEqual(['send']);
  });

  it('the journal table locked by another connection: a SENT write blocked past the deadline is abandoned, never followed by the send, and refused by the database when it runs after the deadline: the key ends NOT_SENT', async () => {
    const schema = server!.schema('lck');
    const audit = tempAudit();
    const runtime = await worker(schema, audit);
    const step = await runtime.captureBinding();
    cleanups.push(() => step.release());
    const locker = new PgHandle({ url: server!.url, schema });
    cleanups.push(() => locker.close());
    let unlock: () => void = () => undefined;
    const locked = new Promise<void>((resolveLocked) => {
      // Held from inside the prepare hook: the INTENT is written, the SENT write will block.
      void locker
        .tx('lock the journal', async (client) => {
          await client.query('LOCK TABLE records IN ACCESS EXCLUSIVE MODE');
          resolveLocked();
          await new Promise<void>((resolve) => (unlock = resolve));
        })
        .catch(() => undefined);
    });
    cleanups.push(() => unlock());
    const error = await failure(
      step.prepareCall('s__send').run(
        { n: 1 },
        {
          idempotencyKey: 'order-3',
          timeoutMs: 400,
          prepare: async () => {
            await locked;
            return undefined;
          },
        },
      ),
    );
    expect(error).toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
      detail: { reason: 'timeout', delivery: 'not-sent' },
    });
    unlock();
    expect(await sentTools(audit)).toEqual([]);
    // The abandoned writes were sent with their COMMIT (one round trip, DESIGN §21.6): once the
    // lock is gone the server runs them, and the SENT write, now past its deadline, fails there
    // (its deadline guard) instead of committing: the key ends NOT_SENT, free to run again.
    await untilNoLockOn(locker, 'records');
    await runtime.journal.recover();
    const ended = await runtime.journal.get('order-3');
    expect(ended?.state).toBe('NOT_SENT');
    expect((await runtime.journal.verify()).ok).toBe(true);
    expect(await sentTools(audit)).toEqual([]);
  });
});

/** Returns once no transaction holds or awaits a lock on `table` of `handle`'s schema (polled). */
async function untilNoLockOn(handle: PgHandle, table: string): Promise<void> {
  for (;;) {
    const { rows } = await handle.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE c.relname = $1 AND c.relnamespace = $2::regnamespace AND l.pid <> pg_backend_pid()`,
      [table, handle.schema],
    );
    if (rows[0]?.n === '0') return;
  }
}
