/**
 * What the runtime must let go of (DESIGN §21.3): a released binding and the snapshot a hard refresh
 * replaced, and the results of unkeyed calls. Each is watched through a `WeakRef` and must be
 * collected after a forced GC once nothing of the caller's holds it; the same objects still held
 * prove the probe sees what is kept. `gc` comes from `--expose-gc` set at run time (as
 * `bench/search.ts` does), so the suite needs no special vitest configuration.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { McpRuntime, type McpBinding, type PreparedCall } from '@stepbind/runtime';
import { createInMemoryFleet, scriptedTool, type AuditEntry } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Lets pending jobs run, then collects until every one of `refs` is gone (at most 10 rounds);
 * returns the indices of those still reachable.
 */
async function reachable(refs: readonly WeakRef<object>[]): Promise<number[]> {
  let left: number[] = [];
  for (let i = 0; i < 10; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    left = refs.flatMap((ref, index) => (ref.deref() === undefined ? [] : [index]));
    if (left.length === 0) break;
  }
  return left;
}

/** Whether `ref` is collected (see {@link reachable}). */
const collected = async (ref: WeakRef<object>): Promise<boolean> =>
  (await reachable([ref])).length === 0;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function open(): Promise<{
  runtime: McpRuntime;
  fleet: ReturnType<typeof createInMemoryFleet>;
}> {
  const fleet = createInMemoryFleet({
    a: {
      scenario: 'fixture',
      fixture: {
        generations: [
          { pages: [{ tools: [scriptedTool('alpha'), scriptedTool('beta')] }] },
          {
            pages: [
              {
                tools: [
                  scriptedTool('alpha'),
                  { ...scriptedTool('beta'), description: 'Reworded in generation 1.' },
                ],
              },
            ],
          },
        ],
      },
    },
  });
  cleanups.push(() => fleet.close());
  const runtime = await McpRuntime.open(fleet.config(), {
    connect: fleet.connect,
    approval: 'none',
  });
  cleanups.push(() => runtime.close());
  return { runtime, fleet };
}

/** A weak reference to the published snapshot of server `a` (no strong one left in the caller). */
function currentRef(runtime: McpRuntime): WeakRef<object> {
  const snapshot = runtime.registry.current('a', 'default');
  if (snapshot === undefined) throw new Error('server a has no published catalog');
  return new WeakRef(snapshot);
}

/** Makes `n` unkeyed calls and returns weak references to each one's arguments and result. */
async function weakCalls(call: PreparedCall, n: number): Promise<WeakRef<object>[]> {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < n; i++) {
    const args = { input: `call ${i}` };
    refs.push(new WeakRef(args), new WeakRef(await call.run(args)));
  }
  return refs;
}

/** Captures a step, makes one call on it and returns a weak reference to it (still held). */
async function usedStep(runtime: McpRuntime): Promise<WeakRef<McpBinding>> {
  const binding = await runtime.captureBinding();
  const alpha = binding.tools.find((t) => t.name.endsWith('__alpha'));
  if (alpha === undefined) throw new Error('no alpha tool in the step');
  await binding.prepareCall(alpha.name).run({ input: 'x' });
  return new WeakRef(binding);
}

describe('memory retention', () => {
  it('collects a released binding and the snapshot a hard refresh replaced, and keeps them while the binding is held', async () => {
    const { runtime, fleet } = await open();
    const server = fleet.server('a');
    const snapshotRef = currentRef(runtime);

    const bindingRef = await usedStep(runtime);
    // The caller's hold on the step: a property, dropped at release.
    const held: { binding?: McpBinding } = { binding: bindingRef.deref() };

    // First refresh: the catalog changes, the held binding still pins the old snapshot.
    server.setGeneration(1);
    expect(await runtime.hardRefresh('a')).toBe(true);
    expect(runtime.registry.current('a', 'default')).not.toBe(snapshotRef.deref());
    expect(await collected(snapshotRef)).toBe(false);
    expect(bindingRef.deref()).toBe(held.binding);
    expect(runtime.registry.lifecycleOf(snapshotRef.deref() as never)).toBe('SUPERSEDED');

    held.binding?.release();
    held.binding = undefined;
    expect(await collected(bindingRef), 'released binding still reachable').toBe(true);
    expect(await collected(snapshotRef), 'superseded snapshot still reachable').toBe(true);

    // A refresh of an unchanged catalog swaps nothing and keeps nothing of a released step.
    const secondRef = currentRef(runtime);
    const againRef = await usedStep(runtime);
    againRef.deref()?.release();
    expect(await runtime.hardRefresh('a')).toBe(false);
    expect(await collected(againRef), 'released binding still reachable').toBe(true);
    expect(secondRef.deref()).toBe(runtime.registry.current('a', 'default'));
  });

  it('keeps no result or argument object of an unkeyed call once the caller drops it', async () => {
    const { runtime, fleet } = await open();
    const binding = await runtime.captureBinding();
    cleanups.push(() => Promise.resolve(binding.release()));
    const alpha = binding.tools.find((t) => t.name.endsWith('__alpha'));
    const call = binding.prepareCall(alpha?.name ?? '');
    // In a function of its own: a suspended async frame keeps its last locals alive.
    const refs = await weakCalls(call, 20);
    const held = await call.run({ input: 'held' });
    const heldRef = new WeakRef(held);
    // The in-memory server shares this process and keeps every request it got in its audit trail
    // (the arguments included, passed by reference over the in-memory link): not the runtime's.
    (fleet.server('a').audit as AuditEntry[]).length = 0;
    expect(await reachable(refs)).toEqual([]);
    expect(await collected(heldRef)).toBe(false);
    expect(heldRef.deref()).toBe(held);
  });
});
