/**
 * bench/journal-memory: heap bytes the default in-memory journal keeps per keyed call. Drives
 * `CallJournal` over `MemoryJournalStore` as `PreparedCall.run` does (claim written as SENT, then
 * COMPLETED with a result and receipt; receipts only for keyed runs, the runtime's default), with a
 * fresh key per call, and reports the retained heap after a forced GC divided by the calls.
 *
 * Standalone, report only: `node --expose-gc --import tsx bench/journal-memory.ts [calls...]`.
 */
import {
  CallJournal,
  MemoryJournalStore,
  type CallContext,
  type CallReceipt,
  type ToolCallResult,
} from '@stepbind/binding';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');

const context: CallContext = {
  stepId: 'turn-0001',
  server: 'billing',
  tool: 'send_invoice',
  modelName: 'billing__send_invoice',
  descriptorDigest: `sha256:${'d'.repeat(64)}`,
  effectClass: 'write',
  generation: 3,
  revision: 3,
  policyEpoch: 1,
  audience: 'default',
  catalogState: 'UNVERSIONED_OBSERVATION',
  protocolVersion: '2025-11-25',
};
const result: ToolCallResult = {
  content: [
    { type: 'text', text: 'Invoice INV-2026-0001 sent to billing@example.com (EUR 120.00).' },
  ],
};

function receiptOf(key: string): CallReceipt {
  return {
    ...context,
    inputSchemaDigest: `sha256:${'i'.repeat(64)}`,
    outputSchemaDigest: undefined,
    outcome: 'ok',
    idempotencyKey: key,
    argsDigest: `sha256:${'a'.repeat(64)}`,
    startedAt: Date.now(),
    timings: { lockWaitMs: 0.01, prepareMs: 0.02, callMs: 1.5, totalMs: 1.6 },
  };
}

async function retainedPerCall(calls: number): Promise<{ perCall: number; records: number }> {
  gc?.();
  const before = process.memoryUsage().heapUsed;
  const store = new MemoryJournalStore();
  const journal = new CallJournal(store, { receipts: 'keyed', owner: 'bench' });
  for (let i = 0; i < calls; i++) {
    const key = `turn-${i}:call_${i.toString(36).padStart(8, '0')}`;
    journal.start();
    const begun = await journal.begin(
      { key, context, argsDigest: `sha256:${i}`, retryReads: false },
      { deferWrite: true },
    );
    if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
    await journal.markSent(begun.claim, 60_000);
    await journal.complete(begun.claim, { result, receipt: receiptOf(key) });
  }
  gc?.();
  const after = process.memoryUsage().heapUsed;
  const records = (await store.listRecords()).length;
  // Keep the store reachable until measured.
  void store.location;
  return { perCall: (after - before) / calls, records };
}

const sizes = process.argv.slice(2).map(Number);
for (const calls of sizes.length > 0 ? sizes : [10_000, 50_000]) {
  const { perCall, records } = await retainedPerCall(calls);
  console.log(
    `journal-memory: ${calls} keyed calls → ${Math.round(perCall)} B retained per call, ${records} records kept`,
  );
}
