import { rmSync } from 'node:fs';
import { McpRuntime } from '@stepbind/runtime';
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
import { within } from '../support/wait.js';

// `revokeTool`, `restoreTool` and `setPolicyEpoch` act where the policy lives (DESIGN §17.6): the
// fleet with a store, this runtime without one; the `…Locally` forms always act here only.

const server = await usePostgres('revoke.pg.test.ts');
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

function tempAudit(): string {
  const path = tempAuditPath('revoke');
  audits.push(path);
  return path;
}

async function worker(auditPath: string, schema?: string): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    {
      mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) },
      ...(schema === undefined ? {} : { store: { url: server!.url, schema } }),
    },
    { approval: 'none' },
  );
  runtimes.push(runtime);
  return runtime;
}

/** Resolves once `runtime`'s fleet view satisfies `done` (checked after every applied change). */
function applied(runtime: McpRuntime, done: () => boolean): Promise<void> {
  const seen = new Promise<void>((resolve) => {
    if (done()) return resolve();
    const off = runtime.fleet!.onEpoch(() => {
      if (!done()) return;
      off();
      resolve();
    });
  });
  return within(seen, 'applied fleet policy change in the other worker');
}

const revoked = (runtime: McpRuntime): boolean =>
  runtime.fleet!.policy.policy.revoked.some(([s, t]) => s === 's' && t === 'send');

async function toolCalls(audit: string): Promise<(string | undefined)[]> {
  return (await readAuditTrail(audit)).filter((e) => e.method === 'tools/call').map((e) => e.tool);
}

describe.skipIf(server === undefined)('runtime policy methods with a fleet store', () => {
  it('runtime.revokeTool() in one worker refuses the tool in another, and restoreTool() brings it back', async () => {
    const schema = server!.schema('rt');
    const auditB = tempAudit();
    const a = await worker(tempAudit(), schema);
    const b = await worker(auditB, schema);
    await using before = await b.captureBinding();
    const seen = applied(b, () => revoked(b));

    await a.revokeTool('s', 'send');
    await seen;

    await using later = await b.captureBinding();
    for (const step of [before, later]) {
      expect(await failure(step.prepareCall('s__send').run({}))).toMatchObject({
        code: 'TOOL_DENIED',
        detail: { reason: 'revoked', delivery: 'not-sent' },
      });
    }
    expect(await toolCalls(auditB)).toEqual([]);

    const lifted = applied(b, () => !revoked(b));
    await a.restoreTool('s', 'send');
    await lifted;
    expect((await later.prepareCall('s__send').run({})).result.isError).not.toBe(true);
    expect(await toolCalls(auditB)).toEqual(['send']);
  });

  it('is in force in the revoking runtime itself when revokeTool() resolves, and restoreTool() lifts it there', async () => {
    const schema = server!.schema('self');
    const audit = tempAudit();
    const a = await worker(audit, schema);
    await using step = await a.captureBinding();

    await a.revokeTool('s', 'send');

    expect(await failure(step.prepareCall('s__send').run({}))).toMatchObject({
      code: 'TOOL_DENIED',
      detail: { reason: 'revoked' },
    });
    await a.restoreTool('s', 'send');
    expect((await step.prepareCall('s__send').run({})).result.isError).not.toBe(true);
    expect(await toolCalls(audit)).toEqual(['send']);
  });

  it('runtime.setPolicyEpoch() raises the fleet epoch: this runtime follows when it resolves, the others when notified', async () => {
    const schema = server!.schema('ep');
    const audit = tempAudit();
    const a = await worker(audit, schema);
    const b = await worker(audit, schema);
    await using before = await b.captureBinding();
    const followed = applied(b, () => b.registry.policyEpoch === 3);

    await a.setPolicyEpoch(3);

    expect(a.registry.policyEpoch).toBe(3);
    expect(a.fleet!.epoch).toBe(3);
    await followed;
    expect(await failure(before.prepareCall('s__note').run({}))).toMatchObject({
      code: 'TOOL_DENIED',
      detail: { reason: 'policy-epoch' },
    });
    // The fleet's epoch only rises: the same epoch again is refused, naming both.
    expect(await failure(a.setPolicyEpoch(3))).toMatchObject({
      code: 'INVALID_OPTIONS',
      detail: { current: 3, requested: 3 },
    });
  });

  it('the …Locally forms act in this runtime only, and a local epoch may not pass the fleet epoch', async () => {
    const schema = server!.schema('loc');
    const auditB = tempAudit();
    const a = await worker(tempAudit(), schema);
    const b = await worker(auditB, schema);

    a.revokeToolLocally('s', 'send');
    // A local epoch past the fleet's would be refused by the fleet registry at every publication.
    expect(() => a.setPolicyEpochLocally(2)).toThrow(
      expect.objectContaining({
        code: 'INVALID_OPTIONS',
        detail: { option: 'epoch', value: 2, current: 0 },
      }),
    );

    await using stepA = await a.captureBinding();
    expect(await failure(stepA.prepareCall('s__send').run({}))).toMatchObject({
      code: 'TOOL_DENIED',
      detail: { reason: 'revoked' },
    });
    await b.fleet!.policy.refresh();
    expect(b.fleet!.policy.policy).toMatchObject({ epoch: 0, revoked: [] });
    expect(b.registry.policyEpoch).toBe(0);
    await using stepB = await b.captureBinding();
    expect((await stepB.prepareCall('s__send').run({})).result.isError).not.toBe(true);
    expect(await toolCalls(auditB)).toEqual(['send']);
    // A local revocation is not lifted by the fleet-wide restore, only by its local counterpart.
    await a.restoreTool('s', 'send');
    expect(await failure(stepA.prepareCall('s__send').run({}))).toMatchObject({
      code: 'TOOL_DENIED',
    });
    a.restoreToolLocally('s', 'send');
    expect((await stepA.prepareCall('s__send').run({})).result.isError).not.toBe(true);
  });
});

describe('runtime policy methods without a fleet store', () => {
  it('revokeTool() and restoreTool() act in this runtime only: another runtime of the same server still calls the tool', async () => {
    const auditA = tempAudit();
    const auditB = tempAudit();
    const a = await worker(auditA);
    const b = await worker(auditB);
    await using stepA = await a.captureBinding();
    await using stepB = await b.captureBinding();

    await a.revokeTool('s', 'send');

    expect(await failure(stepA.prepareCall('s__send').run({}))).toMatchObject({
      code: 'TOOL_DENIED',
      detail: { reason: 'revoked', delivery: 'not-sent' },
    });
    expect((await stepB.prepareCall('s__send').run({})).result.isError).not.toBe(true);
    await a.restoreTool('s', 'send');
    expect((await stepA.prepareCall('s__send').run({})).result.isError).not.toBe(true);
    expect(await toolCalls(auditA)).toEqual(['send']);
    expect(await toolCalls(auditB)).toEqual(['send']);
  });
});
