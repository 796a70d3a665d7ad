/**
 * PreparedCall.run phase by phase (DESIGN §7), with in-process fakes: options refused before
 * anything is journaled, the journal claim, the revision lock and stale check, admission before and
 * after the `prepare` hook, the durable `SENT` record before the send, delivery at every failure
 * point, output validation, the receipt, aborts, and the read lock held across the phases.
 */
import { digestOf, type CallOutcome, type RunOptions } from '@stepbind/binding';
import { RuntimeError } from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { bumpRevision, catalog, failure, gate, harness, ok, type Reply } from './support.js';

const never = new Promise<never>(() => undefined);
const approve: RunOptions['prepare'] = (ctx) => ctx.approve();

describe('PreparedCall.run: options', () => {
  it('refuses a bad option with INVALID_OPTIONS before the key is claimed, the lock taken or anything sent', async () => {
    const { binding, journal, log, slot } = harness();
    const hold = await slot.lock.acquireWrite();
    // A writer holds the lock: a run that got past the options would wait here, not fail.
    const error = await failure(
      binding.prepareCall('s__send').run({}, { idempotencyKey: 'k', timeoutMs: 0 }),
    );
    hold();
    expect([error.code, error.delivery, error.detail['option']]).toEqual([
      'INVALID_OPTIONS',
      'not-sent',
      'timeoutMs',
    ]);
    expect(log).toEqual([]);
    expect(await journal.get('k')).toBeUndefined();
  });
});

describe('PreparedCall.run: journal claim', () => {
  it('refuses a key used for other arguments with IDEMPOTENCY_CONFLICT before the hook or the send', async () => {
    const { binding, log } = harness();
    await binding.prepareCall('s__send').run({ to: 'a' }, { idempotencyKey: 'k' });
    log.length = 0;
    let hookRan = false;
    const error = await failure(
      binding.prepareCall('s__send').run(
        { to: 'b' },
        {
          idempotencyKey: 'k',
          prepare: () => {
            hookRan = true;
          },
        },
      ),
    );
    expect(error.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(hookRan).toBe(false);
    expect(log.filter((entry) => entry.startsWith('send'))).toEqual([]);
  });

  it('refuses a key whose run is still in flight with IDEMPOTENCY_IN_PROGRESS; the first run sends once', async () => {
    const entered = gate();
    const answer = gate<void>();
    const { binding, sends } = harness({
      reply: async () => {
        entered.open();
        await answer.promise;
        return ok();
      },
    });
    const first = binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' });
    await entered.promise;
    const second = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect([second.code, second.delivery]).toEqual(['IDEMPOTENCY_IN_PROGRESS', 'sent']);
    answer.open();
    await first;
    expect(sends).toHaveLength(1);
  });

  it('replays a completed key without the lock, the hook or a send', async () => {
    const { binding, slot, sends } = harness();
    const first = await binding.prepareCall('s__send').run({ to: 'a' }, { idempotencyKey: 'k' });
    const hold = await slot.lock.acquireWrite();
    let hookRan = false;
    const again = await binding.prepareCall('s__send').run(
      { to: 'a' },
      {
        idempotencyKey: 'k',
        prepare: () => {
          hookRan = true;
        },
      },
    );
    hold();
    expect(again).toEqual({ ...first, replayed: true });
    expect([hookRan, sends.length]).toEqual([false, 1]);
  });

  it('writes the claim as INTENT before a prepare hook, and as SENT before the send', async () => {
    const { binding, log, journal } = harness();
    await binding
      .prepareCall('s__send')
      .run({}, { idempotencyKey: 'k', prepare: () => void log.push('hook') });
    expect(log).toEqual(['store:INTENT', 'hook', 'store:SENT', 'send:send', 'store:COMPLETED']);
    expect((await journal.get('k'))?.state).toBe('COMPLETED');
  });

  it('without a hook writes the claim once, as SENT, just before the send', async () => {
    const { binding, log } = harness();
    await binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' });
    expect(log).toEqual(['store:SENT', 'send:send', 'store:COMPLETED']);
  });

  it('sends nothing when the SENT record cannot be written (not-sent)', async () => {
    const { binding, sends } = harness({ failWritesOf: 'SENT' });
    const error = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect(error.delivery).toBe('not-sent');
    expect(sends).toEqual([]);
  });
});

describe('PreparedCall.run: revision lock', () => {
  it('refuses a stale revision with STALE_CATALOG before the hook and the send; the key ends NOT_SENT', async () => {
    const { binding, slot, log, journal } = harness();
    const call = binding.prepareCall('s__send');
    await bumpRevision(slot);
    const error = await failure(
      call.run({}, { idempotencyKey: 'k', prepare: () => void log.push('hook') }),
    );
    expect([error.code, error.delivery]).toEqual(['STALE_CATALOG', 'not-sent']);
    expect(error.detail).toMatchObject({ capturedRevision: 1, currentRevision: 2 });
    expect(error.message).toContain('revision 1 → 2');
    expect(log).toEqual(['store:INTENT', 'store:NOT_SENT']);
    expect((await journal.get('k'))?.state).toBe('NOT_SENT');
  });

  it('holds the read lock from admission through the hook, the send and output validation: a writer waits', async () => {
    const { binding, slot } = harness({
      reply: async () => {
        // A server answers on a later turn; a writer let in early would hold the lock by now.
        await new Promise((resolve) => setImmediate(resolve));
        seen.push(`send:${String(slot.lock.writing)}`);
        return ok();
      },
    });
    const seen: string[] = [];
    let writer: Promise<() => void> | undefined;
    const outcome = await binding.prepareCall('s__send').run(
      {},
      {
        prepare: async () => {
          writer = slot.lock.acquireWrite();
          await new Promise((resolve) => setImmediate(resolve));
          seen.push(`hook:${String(slot.lock.writing)}`);
        },
      },
    );
    expect(slot.lock.readers).toBe(0);
    const release = await writer!;
    release();
    expect(seen).toEqual(['hook:false', 'send:false']);
    expect(outcome.result).toEqual(ok());
  });

  it('waits behind a queued writer and then runs at the new revision as STALE_CATALOG', async () => {
    const { binding, slot, sends } = harness();
    const call = binding.prepareCall('s__send');
    const hold = await slot.lock.acquireWrite();
    const run = call.run({});
    slot.installLocked(slot.catalog);
    hold();
    const error = await failure(run);
    expect(error.code).toBe('STALE_CATALOG');
    expect(sends).toEqual([]);
  });
});

describe('PreparedCall.run: admission and the prepare hook', () => {
  it('refuses a revoked tool with TOOL_DENIED (revoked) before the hook', async () => {
    const { binding, policy, log } = harness();
    policy.revoked = true;
    const error = await failure(
      binding.prepareCall('s__send').run({}, { prepare: () => void log.push('hook') }),
    );
    expect([error.code, error.detail['reason'], error.delivery]).toEqual([
      'TOOL_DENIED',
      'revoked',
      'not-sent',
    ]);
    expect(log.filter((entry) => !entry.startsWith('store'))).toEqual([]);
  });

  it('refuses a revocation that lands while the hook runs, at the point of use; the key ends NOT_SENT', async () => {
    const { binding, policy, sends, journal } = harness();
    const error = await failure(
      binding.prepareCall('s__send').run(
        {},
        {
          idempotencyKey: 'k',
          prepare: () => {
            policy.revoked = true;
          },
        },
      ),
    );
    expect([error.code, error.detail['reason'], error.delivery]).toEqual([
      'TOOL_DENIED',
      'revoked',
      'not-sent',
    ]);
    expect(sends).toEqual([]);
    expect((await journal.get('k'))?.state).toBe('NOT_SENT');
  });

  it('refuses a new policy epoch that lands while the hook runs (TOOL_DENIED, policy-epoch)', async () => {
    const { binding, policy, sends } = harness();
    const error = await failure(
      binding.prepareCall('s__send').run({}, { prepare: () => void (policy.policyEpoch = 1) }),
    );
    expect(error.detail).toMatchObject({
      reason: 'policy-epoch',
      capturedEpoch: 0,
      currentEpoch: 1,
    });
    expect(sends).toEqual([]);
  });

  it('blames a policy failure at the point of use on admission, not on the hook that returned', async () => {
    const { binding, policy, sends } = harness();
    const error = await failure(
      binding.prepareCall('s__send').run(
        {},
        {
          prepare: () => {
            policy.failure = new Error('fleet view unavailable');
          },
        },
      ),
    );
    expect([error.code, error.detail['reason'], error.delivery]).toEqual([
      'TOOL_DENIED',
      'admission',
      'not-sent',
    ]);
    expect(error.message).toContain('could not be admitted: fleet view unavailable');
    expect(sends).toEqual([]);
  });

  it('turns a hook that throws into TOOL_DENIED (prepare), nothing sent', async () => {
    const { binding, sends } = harness();
    const error = await failure(
      binding.prepareCall('s__send').run(
        {},
        {
          prepare: () => {
            throw new Error('the user said no');
          },
        },
      ),
    );
    expect([error.code, error.detail['reason'], error.delivery]).toEqual([
      'TOOL_DENIED',
      'prepare',
      'not-sent',
    ]);
    expect(error.message).toContain('the user said no');
    expect(sends).toEqual([]);
  });

  it('validates arguments the hook returns and sends them in place of the caller’s', async () => {
    const { binding, sends } = harness();
    await binding.prepareCall('s__send').run({ to: 'a' }, { prepare: () => ({ to: 'b' }) });
    const bad = await failure(
      binding.prepareCall('s__send').run({ to: 'a' }, { prepare: () => ({ to: 5 }) }),
    );
    expect([bad.code, bad.delivery]).toEqual(['INVALID_ARGUMENTS', 'not-sent']);
    expect(sends).toEqual([{ tool: 'send', args: { to: 'b' } }]);
  });

  it('refuses arguments its input schema rejects before the hook', async () => {
    const { binding, log } = harness();
    const error = await failure(
      binding.prepareCall('s__send').run({ to: 5 }, { prepare: () => void log.push('hook') }),
    );
    expect([error.code, error.delivery]).toEqual(['INVALID_ARGUMENTS', 'not-sent']);
    expect(log.filter((entry) => !entry.startsWith('store'))).toEqual([]);
  });
});

describe('PreparedCall.run: approval', () => {
  it('refuses a write that needs approval without a hook (APPROVAL_REQUIRED, no hook given)', async () => {
    const { binding, sends } = harness({ approval: 'all-writes' });
    const error = await failure(binding.prepareCall('s__send').run({}));
    expect([error.code, error.detail['reason'], error.delivery]).toEqual([
      'APPROVAL_REQUIRED',
      'approval-required',
      'not-sent',
    ]);
    expect(error.message).toContain('No prepare hook was given.');
    expect(sends).toEqual([]);
  });

  it('refuses a hook that returns without approving (APPROVAL_REQUIRED), and runs one that approves', async () => {
    const { binding, sends } = harness({ approval: 'all-writes' });
    const seen: boolean[] = [];
    const error = await failure(
      binding
        .prepareCall('s__send')
        .run({}, { prepare: (ctx) => void seen.push(ctx.approvalRequired) }),
    );
    expect(error.code).toBe('APPROVAL_REQUIRED');
    expect(error.message).toContain('The prepare hook returned without calling ctx.approve().');
    expect(sends).toEqual([]);
    await binding.prepareCall('s__send').run({}, { prepare: approve });
    expect([seen, sends.length]).toEqual([[true], 1]);
  });

  it('lets a standing approval stand in for the hook, and refuses the call when it is withdrawn during the hook', async () => {
    const { binding, policy, sends } = harness({ approval: 'all-writes' });
    policy.approved = true;
    await binding.prepareCall('s__send').run({});
    const error = await failure(
      binding.prepareCall('s__send').run({}, { prepare: () => void (policy.approved = false) }),
    );
    expect([error.code, error.delivery]).toEqual(['APPROVAL_REQUIRED', 'not-sent']);
    expect(sends).toHaveLength(1);
  });
});

describe('PreparedCall.run: send and delivery', () => {
  const failing =
    (error: Error): Reply =>
    () =>
      Promise.reject(error);

  it('reports a plain failure of tools/call as SERVER_ERROR, sent', async () => {
    const { binding, journal } = harness({ reply: failing(new Error('socket reset')) });
    const error = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect([error.code, error.delivery]).toEqual(['SERVER_ERROR', 'sent']);
    expect(error.message).toContain('socket reset');
    expect((await journal.get('k'))?.state).toBe('OUTCOME_UNKNOWN');
  });

  it("keeps the caller's word that nothing was written (not-sent), and frees the key", async () => {
    const lost = new RuntimeError('TIMEOUT', 'queued, never written', {
      detail: { delivery: 'not-sent' },
    });
    const { binding, journal } = harness({ reply: failing(lost) });
    const error = await failure(binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect([error.code, error.delivery]).toEqual(['TIMEOUT', 'not-sent']);
    expect((await journal.get('k'))?.state).toBe('NOT_SENT');
  });

  it('corrects CONNECTION_CLOSED after the send to OUTCOME_UNKNOWN (sent)', async () => {
    const lost = new RuntimeError('CONNECTION_CLOSED', 'the pipe broke');
    const { binding } = harness({ reply: failing(lost) });
    const error = await failure(binding.prepareCall('s__send').run({}));
    expect([error.code, error.delivery]).toEqual(['OUTCOME_UNKNOWN', 'sent']);
  });

  it('refuses a closed captured connection with CONNECTION_CLOSED, or its fault, before the SENT record', async () => {
    const closed = harness({ closed: true });
    const error = await failure(
      closed.binding.prepareCall('s__send').run({}, { idempotencyKey: 'k' }),
    );
    expect([error.code, error.delivery]).toEqual(['CONNECTION_CLOSED', 'not-sent']);
    expect(closed.log).toEqual([]);
    const fault = new RuntimeError('MESSAGE_TOO_LARGE', 'a frame over the limit');
    const faulted = harness({ closed: true, fault });
    const faultError = await failure(faulted.binding.prepareCall('s__send').run({}));
    expect([faultError.code, faultError.delivery]).toEqual(['MESSAGE_TOO_LARGE', 'not-sent']);
  });
});

describe('PreparedCall.run: output', () => {
  it('refuses structuredContent its output schema rejects with INVALID_TOOL_OUTPUT (sent); the call ran', async () => {
    const { binding, sends } = harness({
      reply: () => ({ content: [], structuredContent: { n: 'x' } }),
    });
    const error = await failure(binding.prepareCall('s__report').run({}));
    expect([error.code, error.delivery]).toEqual(['INVALID_TOOL_OUTPUT', 'sent']);
    expect(error.detail['errors']).toContain('/n must be number');
    expect(sends).toHaveLength(1);
  });

  it('refuses a result without structuredContent when the tool declares an output schema', async () => {
    const { binding } = harness({ reply: () => ok() });
    const error = await failure(binding.prepareCall('s__report').run({}));
    expect(error.detail['errors']).toBe(
      'no structuredContent although the tool declares an outputSchema',
    );
  });

  it('bounds every result, also of a tool without an output schema', async () => {
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 200; i++) deep = { deep };
    const { binding } = harness({ reply: () => ({ content: [], _meta: deep }) });
    const error = await failure(binding.prepareCall('s__send').run({}));
    expect([error.code, error.delivery, error.detail['limit']]).toEqual([
      'INVALID_TOOL_OUTPUT',
      'sent',
      'maxOutputDepth',
    ]);
  });

  it('returns a tool error as it is, without checking its structuredContent', async () => {
    const { binding } = harness({
      reply: () => ({ content: [], isError: true, structuredContent: { n: 'x' } }),
    });
    const { receipt } = await binding.prepareCall('s__report').run({});
    expect(receipt.outcome).toBe('tool-error');
  });
});

describe('PreparedCall.run: receipt', () => {
  it('binds the call to the step, catalog, revision, policy epoch, key and arguments', async () => {
    const { binding } = harness();
    const before = Date.now();
    const outcome: CallOutcome = await binding
      .prepareCall('s__send')
      .run({ to: 'a' }, { idempotencyKey: 'k' });
    const call = binding.prepareCall('s__send');
    const { receipt } = outcome;
    expect(outcome.replayed).toBe(false);
    expect(receipt).toMatchObject({
      stepId: 'step-1',
      server: 's',
      tool: 'send',
      modelName: 's__send',
      descriptorDigest: call.descriptor.descriptorDigest,
      inputSchemaDigest: call.descriptor.inputSchemaDigest,
      outputSchemaDigest: undefined,
      generation: catalog.generation,
      revision: 1,
      policyEpoch: 0,
      audience: 'default',
      catalogState: 'UNVERSIONED_OBSERVATION',
      protocolVersion: '2025-06-18',
      effectClass: 'write',
      outcome: 'ok',
      idempotencyKey: 'k',
      argsDigest: digestOf({ to: 'a' }),
    });
    expect(receipt).not.toHaveProperty('inputRounds');
    expect(receipt.startedAt).toBeGreaterThanOrEqual(before);
    const { lockWaitMs, prepareMs, callMs, totalMs } = receipt.timings;
    expect(Math.min(lockWaitMs, prepareMs, callMs)).toBeGreaterThanOrEqual(0);
    expect(totalMs).toBeGreaterThanOrEqual(lockWaitMs + prepareMs + callMs);
    expect(Object.isFrozen(receipt) && Object.isFrozen(receipt.timings)).toBe(true);
  });

  it('records the MRTR rounds on the receipt, and on the error of a call that fails after them', async () => {
    const round = { requests: [{ key: 'q', kind: 'elicitation', outcome: 'answered' }] } as const;
    const { binding } = harness({
      reply: ({ onInputRound }) => {
        onInputRound?.(round);
        return ok();
      },
    });
    const { receipt } = await binding.prepareCall('s__send').run({});
    expect(receipt.inputRounds).toEqual({ count: 1, rounds: [round] });
    const failed = harness({
      reply: ({ onInputRound }) => {
        onInputRound?.(round);
        throw new Error('lost after round 1');
      },
    });
    const error = await failure(failed.binding.prepareCall('s__send').run({}));
    expect([error.code, error.delivery]).toEqual(['SERVER_ERROR', 'sent']);
    expect(error.detail['inputRounds']).toEqual({ count: 1, rounds: [round] });
  });
});

describe('PreparedCall.run: abort', () => {
  it('is ABORTED, not sent, when the signal fired before the run', async () => {
    const { binding, sends } = harness();
    const error = await failure(
      binding.prepareCall('s__send').run({}, { signal: AbortSignal.abort('stop') }),
    );
    expect([error.code, error.delivery]).toEqual(['ABORTED', 'not-sent']);
    expect(sends).toEqual([]);
  });

  it('is ABORTED, not sent, when the signal fires while waiting for the lock', async () => {
    const { binding, slot, sends } = harness();
    const hold = await slot.lock.acquireWrite();
    const controller = new AbortController();
    const run = binding.prepareCall('s__send').run({}, { signal: controller.signal });
    controller.abort('stop');
    const error = await failure(run);
    hold();
    expect([error.code, error.delivery]).toEqual(['ABORTED', 'not-sent']);
    expect(sends).toEqual([]);
  });

  it('is ABORTED, not sent, when the signal fires while the hook runs (a hook that never returns)', async () => {
    const { binding, sends, journal } = harness();
    const controller = new AbortController();
    const run = binding.prepareCall('s__send').run(
      {},
      {
        idempotencyKey: 'k',
        signal: controller.signal,
        prepare: () => {
          controller.abort('stop');
          return never;
        },
      },
    );
    const error = await failure(run);
    expect([error.code, error.delivery]).toEqual(['ABORTED', 'not-sent']);
    expect(error.message).toContain('was cancelled before it was sent');
    expect(sends).toEqual([]);
    expect((await journal.get('k'))?.state).toBe('NOT_SENT');
  });

  it('is ABORTED, not sent, when the caller aborts inside a hook that then returns', async () => {
    const { binding, sends } = harness();
    const controller = new AbortController();
    const error = await failure(
      binding.prepareCall('s__send').run(
        {},
        {
          signal: controller.signal,
          prepare: () => {
            controller.abort('stop');
          },
        },
      ),
    );
    expect([error.code, error.delivery]).toEqual(['ABORTED', 'not-sent']);
    expect(sends).toEqual([]);
  });

  it('is ABORTED, not sent, when the caller aborts just after the hook returned', async () => {
    // The abort lands after the hook's promise settled, before the point of use: only the
    // check at the point of use sees it.
    const { binding, sends } = harness();
    const controller = new AbortController();
    const error = await failure(
      binding.prepareCall('s__send').run(
        {},
        {
          signal: controller.signal,
          prepare: () => {
            queueMicrotask(() => controller.abort('stop'));
          },
        },
      ),
    );
    expect([error.code, error.delivery]).toEqual(['ABORTED', 'not-sent']);
    expect(sends).toEqual([]);
  });

  it('is ABORTED (closed), not sent, when the runtime closes while the hook runs', async () => {
    const { binding, close, sends } = harness();
    const error = await failure(
      binding.prepareCall('s__send').run(
        {},
        {
          prepare: () => {
            close.abort();
            return never;
          },
        },
      ),
    );
    expect([error.code, error.delivery, error.detail['reason']]).toEqual([
      'ABORTED',
      'not-sent',
      'closed',
    ]);
    expect(sends).toEqual([]);
  });

  it('is ABORTED, sent, when the signal fires during tools/call', async () => {
    const controller = new AbortController();
    const { binding } = harness({
      reply: ({ signal }) => {
        controller.abort('stop');
        throw new RuntimeError('ABORTED', 'cancelled', { cause: signal?.reason });
      },
    });
    const error = await failure(
      binding.prepareCall('s__send').run({}, { signal: controller.signal }),
    );
    expect([error.code, error.delivery]).toEqual(['ABORTED', 'sent']);
  });
});
