/**
 * Property: wherever a run of a prepared call fails (the options, a stale revision, admission, the
 * arguments, the `prepare` hook, admission at the point of use, a closed connection, the `SENT`
 * record, `tools/call`, the output), its error says `delivery: 'not-sent'` exactly when the send
 * phase was not reached, the key's `SENT` record precedes every send, and no key is left in
 * progress: a key that was not sent ends `NOT_SENT` (or unwritten), one that was never does.
 */
import fc from 'fast-check';
import { RuntimeError } from '@stepbind/binding/internal';
import type { RunOptions } from '@stepbind/binding';
import { describe, expect, it } from 'vitest';
import { bumpRevision, failure, harness, ok, type Reply } from './support.js';

const seed = Number(process.env['STEPBIND_SEED'] ?? Date.now() % 2_147_483_647);
const numRuns = Number(process.env['STEPBIND_RUNS'] ?? 200);
console.log(`prepared.prop: seed=${seed} numRuns=${numRuns} (replay: STEPBIND_SEED=${seed})`);

const POINTS = [
  'options',
  'stale',
  'revoked',
  'arguments',
  'hook-throws',
  'hook-revokes',
  'connection-closed',
  'sent-record',
  'send',
  'output',
] as const;
type Point = (typeof POINTS)[number];

/** How `tools/call` fails at the `send` point (none of them says the request was not written). */
const SEND_ERRORS = {
  plain: () => new Error('socket reset'),
  server: () => new RuntimeError('SERVER_ERROR', 'the server failed'),
  closed: () => new RuntimeError('CONNECTION_CLOSED', 'the pipe broke'),
  timeout: () => new RuntimeError('TIMEOUT', 'no answer'),
} as const;
type SendError = keyof typeof SEND_ERRORS;

interface Case {
  readonly point: Point;
  readonly keyed: boolean;
  readonly hook: boolean;
  readonly sendError: SendError;
}

const cases: fc.Arbitrary<Case> = fc
  .record({
    point: fc.constantFrom(...POINTS),
    keyed: fc.boolean(),
    hook: fc.boolean(),
    sendError: fc.constantFrom(...(Object.keys(SEND_ERRORS) as SendError[])),
  })
  .map((c) => ({
    ...c,
    // A hook fails only when there is one; the SENT record is written only for a key.
    hook: c.hook || c.point === 'hook-throws' || c.point === 'hook-revokes',
    keyed: c.keyed || c.point === 'sent-record',
  }));

async function runCase(c: Case): Promise<void> {
  const reply: Reply = () => {
    if (c.point === 'send') throw SEND_ERRORS[c.sendError]();
    return c.point === 'output' ? { ...ok(), structuredContent: { n: 'x' } } : ok();
  };
  const h = harness({
    reply,
    closed: c.point === 'connection-closed',
    ...(c.point === 'sent-record' ? { failWritesOf: 'SENT' } : {}),
  });
  if (c.point === 'stale') await bumpRevision(h.slot);
  if (c.point === 'revoked') h.policy.revoked = true;
  const prepare: RunOptions['prepare'] = () => {
    h.log.push('hook');
    if (c.point === 'hook-throws') throw new Error('vetoed');
    if (c.point === 'hook-revokes') h.policy.revoked = true;
  };
  const options: RunOptions = {
    ...(c.keyed ? { idempotencyKey: 'k' } : {}),
    ...(c.hook ? { prepare } : {}),
    ...(c.point === 'options' ? { timeoutMs: -1 } : {}),
  };
  const tool = c.point === 'output' ? 's__report' : 's__send';
  const args = c.point === 'arguments' ? { to: 5 } : {};
  const error = await failure(h.binding.prepareCall(tool).run(args, options));

  const sent = h.sends.length > 0;
  expect(error.delivery, `${c.point}: ${error.code}`).toBe(sent ? 'sent' : 'not-sent');
  expect(sent).toBe(c.point === 'send' || c.point === 'output');
  const sendAt = h.log.findIndex((entry) => entry.startsWith('send:'));
  if (c.keyed && sent) expect(h.log.indexOf('store:SENT')).toBeLessThan(sendAt);
  if (c.keyed) {
    const state = (await h.journal.get('k'))?.state;
    expect(['INTENT', 'SENT']).not.toContain(state);
    if (sent) expect(state).not.toBe('NOT_SENT');
    else expect([undefined, 'NOT_SENT']).toContain(state);
  }
}

describe('PreparedCall.run failure points (property)', () => {
  it('says not-sent exactly when the send phase was not reached, and leaves no key in progress', async () => {
    await fc.assert(fc.asyncProperty(cases, runCase), { seed, numRuns });
  });
});
