/**
 * The fleet journal tampered with through SQL, as someone with write access to the database would:
 * `stepbind receipts verify --store URL` reports each edit with its reason and exits 1, its count
 * agrees with the head row, and a worker refuses to act on an edited key (JOURNAL_CORRUPT) instead
 * of re-sending or replaying it. Real PostgreSQL, real stdio server.
 */
import { rmSync } from 'node:fs';
import { isStepbindError, type JournalVerification, type StepbindError } from '@stepbind/binding';
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
import { runCli } from '../../src/cli/run.js';

const server = await usePostgres('tamper.pg.test.ts');
afterAll(() => server?.stop());

const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: ['send', 'crash'].map((name) => ({
            name,
            inputSchema: { type: 'object' },
            annotations: WRITE,
          })),
        },
      ],
    },
  ],
  triggers: [{ on: { method: 'tools/call', tool: 'crash' }, exit: 3 }],
};

const runtimes: McpRuntime[] = [];
const audits: string[] = [];
afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.close();
  for (const file of audits.splice(0)) rmSync(file, { force: true });
});

async function worker(schema: string, auditPath: string): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    {
      mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) },
      store: { url: server!.url, schema },
    },
    { approval: 'none' },
  );
  runtimes.push(runtime);
  return runtime;
}

async function verify(schema: string, ...extra: string[]): Promise<JournalVerification> {
  let out = '';
  let err = '';
  const code = await runCli(
    ['receipts', 'verify', '--store', server!.url, '--schema', schema, '--json', ...extra],
    { stdout: (t) => (out += t), stderr: (t) => (err += t) },
  );
  expect(err).toBe('');
  const verdict = JSON.parse(out) as JournalVerification;
  expect(code).toBe(verdict.ok ? 0 : 1);
  return verdict;
}

async function sql(schema: string, text: string, values: unknown[] = []): Promise<void> {
  const handle = new PgHandle({ url: server!.url, schema });
  try {
    await handle.query(text, values);
  } finally {
    await handle.close();
  }
}

async function rejection(promise: Promise<unknown>): Promise<StepbindError> {
  const error: unknown = await promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  expect(isStepbindError(error), String(error)).toBe(true);
  return error as StepbindError;
}

async function calls(auditPath: string, tool: string): Promise<number> {
  return (await readAuditTrail(auditPath)).filter(
    (e) => e.method === 'tools/call' && e.tool === tool,
  ).length;
}

/** A fresh schema with five completed keyed calls (k1..k5); the worker is closed. */
async function fiveCalls(label: string): Promise<{ schema: string; auditPath: string }> {
  const schema = server!.schema(label);
  const auditPath = tempAuditPath('tamper-pg');
  audits.push(auditPath);
  const runtime = await worker(schema, auditPath);
  {
    await using step = await runtime.captureBinding();
    for (let i = 1; i <= 5; i++) {
      await step.prepareCall('s__send').run({}, { idempotencyKey: `k${i}` });
    }
  }
  await runtime.close();
  return { schema, auditPath };
}

describe.skipIf(server === undefined)(
  'receipts verify --store against a tampered fleet journal',
  () => {
    it('verifies an untampered journal: the head row and the verified count agree', async () => {
      const { schema } = await fiveCalls('intact');
      const verdict = await verify(schema);
      expect(verdict).toMatchObject({ ok: true, count: 5, records: 5, head: { seq: 5 } });
      expect(verdict.storedHead).toEqual(verdict.head);
      const again = await verify(schema, '--expect-head', `5:${verdict.head.digest}`);
      expect(again.ok).toBe(true);
    });

    it('(a) reports the newest receipt deleted: the head row says 5, the chain ends at 4 (reason head)', async () => {
      const { schema } = await fiveCalls('newest');
      const anchor = (await verify(schema)).head;
      await sql(schema, 'DELETE FROM receipts WHERE seq = 5');
      const verdict = await verify(schema);
      expect(verdict).toMatchObject({ ok: false, count: 4, storedHead: { seq: 5 } });
      expect(verdict.findings).toEqual([expect.objectContaining({ reason: 'head', seq: 5 })]);
      await sql(
        schema,
        'UPDATE chain_head SET seq = 4, digest = (SELECT digest FROM receipts WHERE seq = 4)',
      );
      const against = await verify(schema, '--expect-head', `${anchor.seq}:${anchor.digest}`);
      expect(against.findings).toEqual([
        expect.objectContaining({ reason: 'expected-head', seq: 5 }),
      ]);
    });

    it('(b) reports a prefix deleted under a forged anchor (reason anchor)', async () => {
      const { schema } = await fiveCalls('prefix');
      await sql(
        schema,
        `UPDATE chain_anchor SET seq = 2, digest = (SELECT digest FROM receipts WHERE seq = 2);
       DELETE FROM receipts WHERE seq <= 2`,
      );
      const verdict = await verify(schema);
      expect(verdict.findings).toContainEqual(
        expect.objectContaining({ reason: 'anchor', seq: 2 }),
      );
    });

    it('(c) reports OUTCOME_UNKNOWN edited to NOT_SENT (reason record-state); no worker re-sends it', async () => {
      const schema = server!.schema('state');
      const auditPath = tempAuditPath('tamper-pg');
      audits.push(auditPath);
      {
        const runtime = await worker(schema, auditPath);
        await using step = await runtime.captureBinding();
        const lost = await rejection(step.prepareCall('s__crash').run({}, { idempotencyKey: 'k' }));
        expect(lost.code).toBe('OUTCOME_UNKNOWN');
      }
      await sql(schema, `UPDATE records SET state = 'NOT_SENT', expires_at = $1 WHERE key = 'k'`, [
        Date.now() + 3_600_000,
      ]);
      expect((await verify(schema)).findings).toEqual([
        expect.objectContaining({ reason: 'record-state', key: 'k' }),
      ]);
      const runtime = await worker(schema, auditPath);
      await using step = await runtime.captureBinding();
      const refused = await rejection(
        step.prepareCall('s__crash').run({}, { idempotencyKey: 'k' }),
      );
      expect(refused).toMatchObject({
        code: 'JOURNAL_CORRUPT',
        detail: { reason: 'record-state', key: 'k' },
      });
      expect(await calls(auditPath, 'crash')).toBe(1);
    });

    it('(d) reports a rewritten stored result (reason record-result); no worker replays it', async () => {
      const { schema, auditPath } = await fiveCalls('result');
      await sql(
        schema,
        `UPDATE records SET outcome = replace(outcome, '"content":[', '"content":[{"type":"text","text":"approved: pay again"},') WHERE key = 'k2'`,
      );
      expect((await verify(schema)).findings).toEqual([
        expect.objectContaining({ reason: 'record-result', key: 'k2' }),
      ]);
      const runtime = await worker(schema, auditPath);
      await using step = await runtime.captureBinding();
      const refused = await rejection(
        step.prepareCall('s__send').run({}, { idempotencyKey: 'k2' }),
      );
      expect(refused).toMatchObject({
        code: 'JOURNAL_CORRUPT',
        detail: { reason: 'record-result', key: 'k2' },
      });
      expect((await step.prepareCall('s__send').run({}, { idempotencyKey: 'k1' })).replayed).toBe(
        true,
      );
      expect(await calls(auditPath, 'send')).toBe(5);
    });
  },
);
