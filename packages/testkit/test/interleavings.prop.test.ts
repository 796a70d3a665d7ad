import fc from 'fast-check';
import { isStepbindError, type McpBinding } from '@stepbind/binding';
import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import { createInMemoryFleet, propertyRun, scriptedTool } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

const POOL = ['alpha', 'beta', 'gamma', 'delta'] as const;
const INITIAL: readonly string[] = ['alpha', 'beta'];

interface CallRecord {
  readonly id: number;
  readonly server: string;
  readonly capturedRevision: number;
  outcome?: string;
}

/**
 * Concurrency under a fast-check scheduler: every JSON-RPC message between the runtime and its
 * servers is delivered when the scheduler decides (FIFO per direction and connection, as a pipe), so
 * each run explores another interleaving of calls, list_changed hard refreshes, explicit hard
 * refreshes, dirty refreshes and captures. The checks are stated from the outside (server-side
 * facts and the published bindings), not from runtime internals.
 */
describe('interleavings (fc.scheduler over every message)', () => {
  it('never publishes a mixture, never lets a stale call reach a server, never lets an older refresh win', async () => {
    const { seed, numRuns } = propertyRun('interleavings', 300);
    let scheduledRuns = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(fc.subarray([...POOL], { minLength: 1 }), { minLength: 1, maxLength: 3 }),
        fc.array(fc.constantFrom(...INITIAL), { minLength: 1, maxLength: 6 }),
        fc.boolean(),
        fc.boolean(),
        async (s, mutations, callTools, explicitHard, dirtyRefresh) => {
          scheduledRuns++;
          let scheduling = false;
          const queues = new Map<string, (() => void)[]>();
          const ref: { runtime?: McpRuntime } = {};
          const calls: CallRecord[] = [];
          const violations: string[] = [];
          const fleet = createInMemoryFleet(
            {
              a: {
                scenario: 'fixture',
                fixture: {
                  generations: [{ pages: [{ tools: INITIAL.map((t) => scriptedTool(t)) }] }],
                },
              },
            },
            {
              deliver: (info, deliver) => {
                // Checked when the message reaches the server, not when it is sent: a tools/call
                // must arrive while its step's revision is still current (the read lock holds it).
                const arrive = (): void => {
                  const msg = info.message as {
                    method?: string;
                    params?: { arguments?: { input?: string } };
                  };
                  if (
                    info.direction === 'to-server' &&
                    msg.method === 'tools/call' &&
                    ref.runtime !== undefined
                  ) {
                    const id = Number(msg.params?.arguments?.input?.replace('call-', '') ?? -1);
                    const call = calls[id];
                    const current = ref.runtime
                      .status()
                      .servers.find((x) => x.name === info.server)?.revision;
                    if (call !== undefined && current !== call.capturedRevision) {
                      violations.push(
                        `call-${id} reached ${info.server} at revision ${current}, captured ${call.capturedRevision}`,
                      );
                    }
                  }
                  deliver();
                };
                if (!scheduling) {
                  arrive();
                  return;
                }
                const key = `${info.server}:${info.direction}`;
                const queue = queues.get(key) ?? [];
                queues.set(key, queue);
                queue.push(arrive);
                void s.schedule(Promise.resolve(), key).then(() => queue.shift()?.());
              },
            },
          );
          const events: RuntimeEvent[] = [];
          const runtime = await McpRuntime.open(fleet.config(), {
            connect: fleet.connect,
            approval: 'none',
            listChangedDebounceMs: 0,
            onEvent: (e) => events.push(e),
          });
          ref.runtime = runtime;
          const served: string[][] = [[...INITIAL]];
          const bindings: McpBinding[] = [];
          try {
            const step0 = await runtime.captureBinding();
            bindings.push(step0);
            scheduling = true;
            const server = fleet.server('a');
            const work: Promise<unknown>[] = [];
            const runCall = (binding: McpBinding, tool: string): Promise<void> => {
              const call = binding.prepareCall(`a__${tool}`);
              const record: CallRecord = {
                id: calls.length,
                server: 'a',
                capturedRevision: call.revision,
              };
              calls.push(record);
              return call.run({ input: `call-${record.id}` }).then(
                () => {
                  record.outcome = 'OK';
                },
                (error: unknown) => {
                  record.outcome = isStepbindError(error) ? error.code : 'THROW';
                },
              );
            };
            // Each call of the old step starts when the scheduler says: before, during or after the
            // catalog swaps, so late calls from an old planner step are explored too.
            for (const tool of callTools) {
              work.push(
                s.schedule(Promise.resolve(), `call ${tool}`).then(() => runCall(step0, tool)),
              );
            }
            for (const names of mutations) {
              work.push(
                s.schedule(Promise.resolve(), 'mutate').then(async () => {
                  server.replaceCatalog([names.map((n) => scriptedTool(n))]);
                  served.push([...names]);
                  await server.notifyListChanged();
                }),
              );
            }
            if (explicitHard) work.push(runtime.hardRefresh('a').catch((e: unknown) => e));
            if (dirtyRefresh) {
              runtime.markDirty('interleaving');
              work.push(runtime.refreshIfDirty().catch((e: unknown) => e));
            }
            work.push(
              s.schedule(Promise.resolve(), 'capture-mid').then(async () => {
                const mid = await runtime.captureBinding();
                bindings.push(mid);
                const tools = mid.tools.map((t) => t.name.replace(/^a__/, ''));
                if (tools[0] !== undefined) await runCall(mid, tools[0]);
              }),
            );
            await s.waitFor(Promise.allSettled(work));
            await s.waitFor(runtime.whenIdle());
            // Quiesce: deliver whatever is still in flight (a late list_changed, say) and let the
            // runtime act on it, until nothing moves any more.
            scheduling = false;
            for (let round = 0; round < 100; round++) {
              let moved = false;
              for (const queue of queues.values()) {
                while (queue.length > 0) {
                  queue.shift()?.();
                  moved = true;
                }
              }
              await new Promise((resolve) => setImmediate(resolve));
              await runtime.whenIdle();
              if (!moved && [...queues.values()].every((q) => q.length === 0)) break;
            }

            // 1. Every step saw a complete catalog the server actually served, never a mixture.
            for (const binding of bindings) {
              const names = binding.tools.map((t) => t.name.replace(/^a__/, ''));
              expect(served.map((c) => c.join())).toContain(names.join());
            }
            // 2. A stale call never reached the server; refused calls never appear in its audit.
            expect(violations).toEqual([]);
            const reached = fleet.audit('a').filter((e) => e.method === 'tools/call').length;
            const ran = calls.filter(
              (c) => c.outcome === 'OK' || c.outcome === 'SERVER_ERROR',
            ).length;
            expect(reached).toBe(ran);
            for (const c of calls)
              expect(['OK', 'STALE_CATALOG', 'SERVER_ERROR']).toContain(c.outcome);
            // 3. Generations and revisions only grow.
            const swaps = events.filter((e) => e.type === 'catalog-swapped');
            for (let i = 1; i < swaps.length; i++) {
              const [p, q] = [swaps[i - 1], swaps[i]];
              if (p?.type === 'catalog-swapped' && q?.type === 'catalog-swapped') {
                expect(q.generation).toBeGreaterThan(p.generation);
                expect(q.revision).toBeGreaterThan(p.revision);
              }
            }
            // 4. No older refresh won: once quiet, the next step sees the last catalog served.
            await using last = await runtime.captureBinding();
            expect(last.tools.map((t) => t.name.replace(/^a__/, '')).join()).toBe(
              served.at(-1)?.join(),
            );
          } finally {
            for (const b of bindings) b.release();
            scheduling = false;
            for (const queue of queues.values()) while (queue.length > 0) queue.shift()?.();
            await runtime.close();
            await fleet.close();
          }
          expect(runtime.status().liveConnections).toBe(0);
        },
      ),
      { seed, numRuns },
    );
    expect(scheduledRuns).toBeGreaterThanOrEqual(numRuns);
  }, 180_000);
});
