/**
 * What the unkeyed call path skips per call (DESIGN §21.2) and must still get right: the receipt
 * built as one literal keeps its members and their order, with and without the optional ones, and
 * a lock taken at once reads no clock for its wait unless a journal claim came before it.
 */
import { createBinding, createCatalogSnapshot, type ToolCaller } from '@stepbind/binding/internal';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { harness, ok, serverOver } from './support.js';

const COMMON = [
  'stepId',
  'server',
  'tool',
  'modelName',
  'descriptorDigest',
  'inputSchemaDigest',
  'outputSchemaDigest',
  'generation',
  'revision',
  'policyEpoch',
  'audience',
  'catalogState',
];
const TAIL = ['outcome', 'idempotencyKey', 'argsDigest', 'startedAt', 'timings'];

afterEach(() => {
  vi.restoreAllMocks();
});

describe('PreparedCall.run: the receipt of the hot path', () => {
  it('keeps the members of the receipt in order, with a protocol version and with MRTR rounds', async () => {
    const plain = await harness().binding.prepareCall('s__send').run({});
    expect(Object.keys(plain.receipt)).toEqual([
      ...COMMON,
      'protocolVersion',
      'effectClass',
      ...TAIL,
    ]);
    const round = { requests: [{ key: 'q', kind: 'elicitation', outcome: 'answered' }] } as const;
    const { binding } = harness({
      reply: ({ onInputRound }) => {
        onInputRound?.(round);
        return ok();
      },
    });
    const rounds = await binding.prepareCall('s__send').run({});
    expect(Object.keys(rounds.receipt)).toEqual([
      ...COMMON,
      'protocolVersion',
      'inputRounds',
      'effectClass',
      ...TAIL,
    ]);
    expect(Object.isFrozen(rounds.receipt) && Object.isFrozen(rounds.receipt.timings)).toBe(true);
  });

  it('has no protocolVersion member when the server named no protocol version', async () => {
    const snapshot = createCatalogSnapshot({
      identity: { name: 's', transportDigest: 'sha256:t' },
      audience: 'default',
      policyEpoch: 0,
      pages: [[{ name: 'send', inputSchema: { type: 'object' } }]],
      revisionProof: 'unversioned',
      discoveryStartedAt: 0,
    });
    const caller: ToolCaller = { closed: false, callTool: () => Promise.resolve(ok()) };
    const { server, byModelName } = serverOver(snapshot, caller);
    const binding = createBinding(
      { tools: [], byModelName, servers: [server], leftOut: [] },
      { stepId: 'step-1', policy: { policyEpoch: 0, isRevoked: () => false } },
    );
    const { receipt } = await binding.prepareCall('s__send').run({});
    expect(receipt).not.toHaveProperty('protocolVersion');
    expect(Object.keys(receipt)).toEqual([...COMMON, 'effectClass', ...TAIL]);
  });
});

describe('PreparedCall.run: the lock wait of the hot path', () => {
  it("counts a keyed call's journal claim as lock wait, and 0 for a lock taken at once", async () => {
    let clock = 1_000;
    vi.spyOn(performance, 'now').mockImplementation(() => clock);
    const { binding, journal } = harness();
    const begin = journal.begin.bind(journal);
    journal.begin = async (...args) => {
      clock += 50; // the claim's store round trip
      return await begin(...args);
    };
    const keyed = await binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' });
    expect(keyed.receipt.timings.lockWaitMs).toBe(50);
    const plain = await binding.prepareCall('s__send').run({});
    expect(plain.receipt.timings.lockWaitMs).toBe(0);
  });
});
