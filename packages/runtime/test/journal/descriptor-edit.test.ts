/**
 * Issue 25, finding 1, over real processes: a server upgrade edits a tool's description after a
 * keyed call ran (or crashed the server). The retry with the same key meets the new descriptor
 * digest; the key's state decides (DESIGN §13): a completed key replays, a key of unknown outcome
 * stays `OUTCOME_UNKNOWN` with delivery `sent`, and the advice a model gets never leads to a
 * second send. Real stdio scripted servers, a real SQLite journal file, the server's audit trail.
 */

import { join } from 'node:path';
import { toToolResult, type CallError, type McpBinding, type ReceiptBody } from '@stepbind/binding';
import { McpRuntime } from '@stepbind/runtime';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type AuditEntry,
  type ServerFixture,
  tempDir,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { failure } from '../support/errors.js';
import { trackRuntimes } from '../support/runtimes.js';

const { runtimes, auditFiles } = trackRuntimes();

const pay = (description: string): Record<string, unknown> => ({
  name: 'pay',
  description,
  inputSchema: { type: 'object', properties: { amount: { type: 'number' } } },
  annotations: { readOnlyHint: false, destructiveHint: true },
});

/** Version 1 of the server; `crash` makes its first `pay` kill the server after receiving it. */
const v1 = (crash: boolean): ServerFixture => ({
  generations: [{ pages: [{ tools: [pay('Pays an invoice.')] }] }],
  ...(crash ? { triggers: [{ on: { method: 'tools/call', tool: 'pay' }, exit: 3 }] } : {}),
});
/** Version 2, after the upgrade: the same tool, its description edited. */
const V2: ServerFixture = {
  generations: [{ pages: [{ tools: [pay('Pays an invoice (EUR and USD).')] }] }],
};

async function open(
  journal: string,
  fixture: ServerFixture,
  auditPath: string,
): Promise<McpRuntime> {
  const runtime = await McpRuntime.open(
    { mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture, auditPath }) } },
    { approval: 'none', journal: { path: journal } },
  );
  runtimes.push(runtime);
  return runtime;
}

const paysOf = async (auditPath: string): Promise<AuditEntry[]> =>
  (await readAuditTrail(auditPath)).filter((e) => e.method === 'tools/call' && e.tool === 'pay');

/**
 * What a model does with a refusal: told the call was not run and to make it again as a new tool
 * call, it does (a new tool-call id, so a new key). Told to check first, it does not.
 */
async function followAdvice(step: McpBinding, error: CallError, retryKey: string): Promise<void> {
  const text = toToolResult(error).content[0].text;
  if (/make it again as a new tool call/i.test(text) && !/do not make it again/i.test(text)) {
    await step
      .prepareCall('s__pay')
      .run({ amount: 10 }, { idempotencyKey: retryKey })
      .catch(() => undefined);
  }
}

describe('a keyed call retried after an upgrade edited the tool description', () => {
  it('keeps a key of unknown outcome OUTCOME_UNKNOWN (delivery sent) after the upgrade, and its advice never sends it twice', async () => {
    using dir = tempDir('descriptor-edit');
    const journal = join(dir.path, 'journal.db');
    const auditPath = tempAuditPath('descriptor-edit');
    auditFiles.push(auditPath);
    const before = await open(journal, v1(true), auditPath);
    {
      await using step = await before.captureBinding();
      const lost = await failure(
        step.prepareCall('s__pay').run({ amount: 10 }, { idempotencyKey: 'pay-1' }),
      );
      expect([lost.code, lost.delivery]).toEqual(['OUTCOME_UNKNOWN', 'sent']);
    }
    await before.close();

    const after = await open(journal, V2, auditPath);
    const record = await after.journal.get('pay-1');
    expect(record?.state).toBe('OUTCOME_UNKNOWN');
    await using step = await after.captureBinding();
    const call = step.prepareCall('s__pay');
    expect(call.descriptor.descriptorDigest).not.toBe(record?.context.descriptorDigest);

    const retried = await failure(call.run({ amount: 10 }, { idempotencyKey: 'pay-1' }));
    expect([retried.code, retried.delivery]).toEqual(['OUTCOME_UNKNOWN', 'sent']);
    expect(retried.detail).toMatchObject({ keyState: 'OUTCOME_UNKNOWN', descriptorChanged: true });
    expect(retried.message).toMatch(/may have run.*resolve\("pay-1"/);
    expect(retried.message).not.toMatch(/use a new key/i);
    await followAdvice(step, retried, 'pay-1-retry');
    expect(await paysOf(auditPath)).toHaveLength(1);

    // Other arguments under the same key: a conflict that says the key may have run.
    const other = await failure(
      step.prepareCall('s__pay').run({ amount: 20 }, { idempotencyKey: 'pay-1' }),
    );
    expect([other.code, other.delivery, other.detail['keyState']]).toEqual([
      'IDEMPOTENCY_CONFLICT',
      'sent',
      'OUTCOME_UNKNOWN',
    ]);
    await followAdvice(step, other, 'pay-1-other');
    expect(await paysOf(auditPath)).toHaveLength(1);

    // The advice: check (the server's log shows it arrived), then record it; a retry replays.
    await after.resolve('pay-1', { outcome: 'ran', by: 'operator' });
    const replay = await step
      .prepareCall('s__pay')
      .run({ amount: 10 }, { idempotencyKey: 'pay-1' });
    expect(replay.replayed).toBe(true);
    expect(await paysOf(auditPath)).toHaveLength(1);
    expect((await after.journal.verify()).ok).toBe(true);
  });

  it('replays a completed key after the upgrade, the chain receipt naming the descriptor it ran under', async () => {
    using dir = tempDir('descriptor-edit');
    const journal = join(dir.path, 'journal.db');
    const auditPath = tempAuditPath('descriptor-edit');
    auditFiles.push(auditPath);
    const before = await open(journal, v1(false), auditPath);
    let original;
    {
      await using step = await before.captureBinding();
      original = await step.prepareCall('s__pay').run({ amount: 10 }, { idempotencyKey: 'pay-2' });
    }
    await before.close();

    const after = await open(journal, V2, auditPath);
    await using step = await after.captureBinding();
    const call = step.prepareCall('s__pay');
    expect(call.descriptor.descriptorDigest).not.toBe(original.receipt.descriptorDigest);
    const again = await call.run({ amount: 10 }, { idempotencyKey: 'pay-2' });
    expect(again.replayed).toBe(true);
    expect(again.result).toEqual(original.result);
    // The receipt returned is the original one: it names the descriptor the call ran under.
    expect(again.receipt).toEqual(original.receipt);
    expect(await paysOf(auditPath)).toHaveLength(1);
    const receipts = (await after.journal.receipts()).map((r) => JSON.parse(r.text) as ReceiptBody);
    expect(receipts.at(-1)).toMatchObject({
      key: 'pay-2',
      replayed: true,
      delivery: 'not-sent',
      descriptorDigest: call.descriptor.descriptorDigest,
      recordedDescriptorDigest: original.receipt.descriptorDigest,
    });
    expect((await after.journal.verify()).ok).toBe(true);
  });
});
