import { rmSync } from 'node:fs';
import { type CallError } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import { PgHandle } from '@stepbind/runtime/fleet';
import { runCli } from '../../src/cli/run.js';
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

const server = await usePostgres('runtime.pg.test.ts');
afterAll(() => server?.stop());

const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            { name: 'send', inputSchema: { type: 'object' }, annotations: WRITE },
            { name: 'note', inputSchema: { type: 'object' }, annotations: WRITE },
          ],
        },
      ],
    },
  ],
};

const runtimes: McpRuntime[] = [];
const audits: string[] = [];
afterEach(async () => {
  for (const r of runtimes.splice(0)) await r.close();
  for (const file of audits.splice(0)) rmSync(file, { force: true });
});

async function worker(
  schema: string,
  auditPath: string,
  extra: Record<string, unknown> = {},
): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    {
      mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) },
      store: { url: server!.url, schema },
    },
    { approval: 'none', ...extra },
  );
  runtimes.push(runtime);
  return runtime;
}

function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  return runCli(args, { stdout: (t) => (out += t), stderr: (t) => (err += t) }).then((code) => ({
    code,
    out,
    err,
  }));
}

describe.skipIf(server === undefined)(
  'McpRuntime on a PostgreSQL fleet store, over real stdio',
  () => {
    it('shares one registry: the first worker publishes generation 1, the second adopts it', async () => {
      const schema = server!.schema('r');
      // One configuration (the same transport, so the same server identity) on both workers.
      const audit = tempAudit();
      const a = await worker(schema, audit);
      const b = await worker(schema, audit);
      const pointerA = await a.fleet!.registry.current(
        a.registry.current('s', 'default')!.identity,
        'default',
      );
      expect(pointerA?.generation).toBe(1);
      expect(a.registry.current('s', 'default')?.generation).toBe(1);
      expect(b.registry.current('s', 'default')?.generation).toBe(1);
      const handle = new PgHandle({ url: server!.url, schema });
      const { rows } = await handle.query('SELECT generation FROM catalog_publications');
      await handle.close();
      expect(rows).toHaveLength(1);
      // b adopted a's publication (its stored body checked equal to b's own listing).
      const stored = await b.fleet!.registry.load(pointerA!.snapshotDigest);
      expect(stored?.tools.map((t) => t.descriptorDigest)).toEqual(
        b.registry.current('s', 'default')!.tools.map((t) => t.descriptorDigest),
      );
    });

    it('a revocation by one worker refuses the tool in another, also in a step captured before, and nothing is sent', async () => {
      const schema = server!.schema('rv');
      const auditB = tempAudit();
      const a = await worker(schema, tempAudit());
      const b = await worker(schema, auditB);
      await using step = await b.captureBinding();
      const applied = new Promise<void>((resolve) =>
        b.fleet!.onEpoch(() => {
          if (b.fleet!.policy.policy.revoked.length > 0) resolve();
        }),
      );
      await a.fleet!.revoke('s', 'send', 'ops');
      await applied;
      const error = await failure(step.prepareCall('s__send').run({}));
      expect(error).toMatchObject({
        code: 'TOOL_DENIED',
        detail: { reason: 'revoked', delivery: 'not-sent' },
      });
      expect((await step.prepareCall('s__note').run({})).result.isError).not.toBe(true);
      const calls = (await readAuditTrail(auditB)).filter((e) => e.method === 'tools/call');
      expect(calls.map((c) => c.tool)).toEqual(['note']);
    });

    it('an idempotency key completed on one worker replays on another: it reaches the server once', async () => {
      const schema = server!.schema('k');
      const auditA = tempAudit();
      const auditB = tempAudit();
      const a = await worker(schema, auditA);
      const b = await worker(schema, auditB);
      {
        await using step = await a.captureBinding();
        await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1' });
      }
      await using step = await b.captureBinding();
      const again = await step.prepareCall('s__send').run({ n: 1 }, { idempotencyKey: 'order-1' });
      expect(again.replayed).toBe(true);
      const sent = [...(await readAuditTrail(auditA)), ...(await readAuditTrail(auditB))].filter(
        (e) => e.method === 'tools/call',
      );
      expect(sent).toHaveLength(1);
      expect((await b.journal.verify()).ok).toBe(true);
    });

    it('a raised fleet epoch is followed by every worker: steps captured before are refused, the next capture republishes once', async () => {
      const schema = server!.schema('ep');
      const audit = tempAudit();
      const a = await worker(schema, audit);
      const b = await worker(schema, audit);
      await using before = await b.captureBinding();
      const followed = new Promise<void>((resolve) =>
        b.fleet!.onEpoch((e) => e === 1 && resolve()),
      );
      await a.fleet!.raiseEpoch();
      await followed;
      expect(b.registry.policyEpoch).toBe(1);
      const error = await failure(before.prepareCall('s__note').run({}));
      expect(error).toMatchObject({ code: 'TOOL_DENIED', detail: { reason: 'policy-epoch' } });
      await using stepB = await b.captureBinding();
      await using stepA = await a.captureBinding();
      expect(stepB.servers[0]).toMatchObject({ generation: 2 });
      expect(stepA.servers[0]).toMatchObject({ generation: 2 });
    });

    it('refuses calls with POLICY_STALE (not sent) once the policy view is past its staleness bound', async () => {
      const schema = server!.schema('st');
      let now = 5_000_000;
      const audit = tempAudit();
      const runtime = await McpRuntime.open(
        {
          mcpServers: {
            s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath: audit }),
          },
        },
        {
          approval: 'none',
          store: {
            url: server!.url,
            schema,
            maxStalenessMs: 1_000,
            heartbeatMs: 3_600_000,
            now: () => now,
          },
        },
      );
      runtimes.push(runtime);
      await using step = await runtime.captureBinding();
      now += 1_001;
      const error = await failure(step.prepareCall('s__send').run({}));
      expect(error).toMatchObject({
        code: 'POLICY_STALE',
        detail: { delivery: 'not-sent', server: 's', tool: 'send' },
      });
      expect((await readAuditTrail(audit)).filter((e) => e.method === 'tools/call')).toHaveLength(
        0,
      );
      const receipts = await runtime.journal.receipts();
      expect(JSON.parse(receipts.at(-1)!.text)).toMatchObject({
        outcome: 'POLICY_STALE',
        delivery: 'not-sent',
      });
    });

    it('a fleet approval is applied by admission: a write that needs one runs without a prepare hook, until it is withdrawn', async () => {
      const schema = server!.schema('ap');
      const audit = tempAudit();
      const runtime = await worker(schema, audit, { approval: 'all-writes' });
      const applied = (approved: number): Promise<void> =>
        new Promise((resolve) => {
          const off = runtime.fleet!.onEpoch(() => {
            if (runtime.fleet!.policy.policy.approved.length === approved) {
              off();
              resolve();
            }
          });
        });
      await using step = await runtime.captureBinding();
      expect(await failure(step.prepareCall('s__send').run({}))).toMatchObject({
        code: 'APPROVAL_REQUIRED',
      });
      const approvedNow = applied(1);
      await runtime.fleet!.change({ kind: 'approve', server: 's', tool: 'send', by: 'ops' });
      await approvedNow;
      expect((await step.prepareCall('s__send').run({})).result.isError).not.toBe(true);
      // Only the tool approved: its neighbour still needs an approval.
      expect(await failure(step.prepareCall('s__note').run({}))).toMatchObject({
        code: 'APPROVAL_REQUIRED',
      });
      const withdrawn = applied(0);
      await runtime.fleet!.change({ kind: 'unapprove', server: 's', tool: 'send' });
      await withdrawn;
      expect(await failure(step.prepareCall('s__send').run({}))).toMatchObject({
        code: 'APPROVAL_REQUIRED',
      });
      const calls = (await readAuditTrail(audit)).filter((e) => e.method === 'tools/call');
      expect(calls.map((c) => c.tool)).toEqual(['send']);
    });

    it('a fleet revocation and a withdrawn fleet approval that land while the prepare hook waits refuse the call at the point of use', async () => {
      const schema = server!.schema('use');
      const audit = tempAudit();
      const a = await worker(schema, tempAudit());
      const b = await worker(schema, audit, { approval: 'all-writes' });
      const applied = (done: () => boolean): Promise<void> =>
        new Promise((resolve) => {
          const off = b.fleet!.onEpoch(() => {
            if (done()) {
              off();
              resolve();
            }
          });
        });
      const approvedNow = applied(() => b.fleet!.policy.policy.approved.length === 1);
      await a.fleet!.change({ kind: 'approve', server: 's', tool: 'note', by: 'ops' });
      await approvedNow;
      await using step = await b.captureBinding();
      // The hook waits (a human deciding) while another worker acts; it approves `send` itself and
      // relies on the fleet's standing approval for `note`.
      const waiting = (tool: string, change: () => Promise<void>): Promise<CallError> => {
        let entered!: () => void;
        const inHook = new Promise<void>((resolve) => (entered = resolve));
        let decide!: () => void;
        const decided = new Promise<void>((resolve) => (decide = resolve));
        const refused = failure(
          step.prepareCall(`s__${tool}`).run(
            {},
            {
              prepare: async (ctx) => {
                entered();
                await decided;
                if (ctx.approvalRequired) ctx.approve();
              },
            },
          ),
        );
        return inHook.then(change).then(() => {
          decide();
          return refused;
        });
      };
      const revoked = await waiting('send', async () => {
        const seen = applied(() => b.fleet!.policy.policy.revoked.length > 0);
        await a.fleet!.revoke('s', 'send', 'ops');
        await seen;
      });
      expect(revoked).toMatchObject({
        code: 'TOOL_DENIED',
        detail: { reason: 'revoked', delivery: 'not-sent' },
      });
      const withdrawn = await waiting('note', async () => {
        const seen = applied(() => b.fleet!.policy.policy.approved.length === 0);
        await a.fleet!.change({ kind: 'unapprove', server: 's', tool: 'note' });
        await seen;
      });
      expect(withdrawn).toMatchObject({
        code: 'APPROVAL_REQUIRED',
        detail: { delivery: 'not-sent' },
      });
      expect((await readAuditTrail(audit)).filter((e) => e.method === 'tools/call')).toEqual([]);
    });

    it('a late optional start publishes through the fleet CAS too: the fleet and the local registry agree on its generation', async () => {
      const schema = server!.schema('late');
      const audit = tempAudit();
      let ready!: () => void;
      const serverReady = new Promise<void>((resolve) => (ready = resolve));
      const runtime = await McpRuntime.open(
        {
          mcpServers: {
            s: {
              ...stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath: audit }),
              required: false,
            },
          },
          store: { url: server!.url, schema },
        },
        {
          approval: 'none',
          onEvent: (e) => {
            if (e.type === 'server-ready' && e.server === 's') ready();
          },
        },
      );
      runtimes.push(runtime);
      await serverReady;
      const local = runtime.registry.current('s', 'default');
      const pointer = await runtime.fleet!.registry.current(local!.identity, 'default');
      expect(pointer).toMatchObject({ generation: local!.generation, server: 's' });
      const handle = new PgHandle({ url: server!.url, schema });
      const { rows } = await handle.query('SELECT generation FROM catalog_publications');
      await handle.close();
      expect(rows.map((r) => Number(r['generation']))).toEqual([local!.generation]);
    });

    it('operator commands: policy revoke/restore/epoch/show and receipts verify/list --store', async () => {
      const schema = server!.schema('cli');
      const a = await worker(schema, tempAudit());
      await using step = await a.captureBinding();
      await step.prepareCall('s__note').run({});
      const store = ['--store', server!.url, '--schema', schema];
      expect(await cli(['policy', 'revoke', 's', 'send', ...store, '--by', 'ops'])).toMatchObject({
        code: 0,
      });
      expect((await cli(['policy', 'show', ...store, '--json'])).out).toContain(
        '"revoked":[["s","send"]]',
      );
      expect(await cli(['policy', 'restore', 's', ...store])).toMatchObject({ code: 0 });
      expect((await cli(['policy', 'epoch', '7', ...store])).out).toContain('epoch is now 7');
      const verified = await cli(['receipts', 'verify', ...store]);
      expect(verified).toMatchObject({ code: 0 });
      expect(verified.out).toContain('1 receipt verified');
      expect((await cli(['receipts', 'list', ...store])).out).toContain('s__note');
      expect(await cli(['store', 'migrate', ...store])).toMatchObject({ code: 0 });
      expect((await cli(['policy', 'revoke', ...store])).code).toBe(2);
    });
  },
);

function tempAudit(): string {
  const path = tempAuditPath('fleet');
  audits.push(path);
  return path;
}
