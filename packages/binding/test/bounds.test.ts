import { describe, expect, it } from 'vitest';
import {
  CatalogSlot,
  DEFAULT_CALL_LIMITS,
  createBinding,
  createCatalogSnapshot,
  isStepbindError,
  type BoundServer,
  type BoundTool,
  type CallLimits,
  type McpBinding,
  type StepbindError,
  type ToolCallResult,
  type ToolCaller,
} from '@stepbind/binding/internal';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { checkJsonValue } from '../src/bounds.js';

/** A caller that records what it was asked to send and answers with `result`. */
function recordingCaller(result: () => ToolCallResult): ToolCaller & { sent: unknown[] } {
  const sent: unknown[] = [];
  return {
    closed: false,
    sent,
    callTool(_tool, args) {
      // What a transport does next: serialise the arguments.
      sent.push(JSON.parse(JSON.stringify(args)));
      return Promise.resolve(result());
    },
  };
}

function bindingOf(
  tools: readonly Record<string, unknown>[],
  caller: ToolCaller,
  callLimits?: Partial<CallLimits>,
): McpBinding {
  const snapshot = createCatalogSnapshot({
    identity: { name: 's', transportDigest: 'sha256:test' },
    audience: 'default',
    policyEpoch: 0,
    pages: [tools],
    revisionProof: 'proven',
    sourceRevision: 'r1',
    discoveryStartedAt: 0,
  });
  const slot = new CatalogSlot('s', snapshot);
  const server: BoundServer = {
    name: 's',
    slot,
    catalog: snapshot,
    revision: slot.revision,
    caller,
    callTimeoutMs: 1000,
    approval: 'none',
    ...(callLimits === undefined ? {} : { callLimits }),
  };
  const byModelName = new Map<string, BoundTool>();
  for (const descriptor of snapshot.tools) {
    byModelName.set(descriptor.modelName, { modelName: descriptor.modelName, server, descriptor });
  }
  return createBinding(
    { tools: [], byModelName, servers: [server], leftOut: [] },
    {
      stepId: 'step-1',
      policy: { policyEpoch: 0, isRevoked: () => false },
    },
  );
}

async function failure(promise: Promise<unknown>): Promise<StepbindError> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isStepbindError(error)) throw new Error(`expected a stepbind error, got ${String(error)}`);
  return error;
}

function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

const anyTool = { name: 'any', inputSchema: { type: 'object' } };

describe('checkJsonValue', () => {
  it('counts the value itself as level 1 and passes a value exactly at the limit', () => {
    expect(checkJsonValue(nested(64), 64, 1e6)).toBeUndefined();
    expect(checkJsonValue(nested(65), 64, 1e6)).toEqual({ kind: 'depth', limit: 64 });
    expect(checkJsonValue([[[1]]], 3, 1e6)).toBeUndefined();
    expect(checkJsonValue([[[[1]]]], 3, 1e6)).toEqual({ kind: 'depth', limit: 3 });
  });

  it('measures the JSON text: exact for unescaped values, strings in UTF-8', () => {
    const values: unknown[] = [
      { a: 1, b: [true, false, null], c: 'x', d: { e: 'é€😀' } },
      [],
      {},
      [1.5, -2, 1e21, 'a b'],
      { nested: [{}, [], [[]]] },
    ];
    for (const v of values) {
      const bytes = Buffer.byteLength(JSON.stringify(v), 'utf8');
      expect(checkJsonValue(v, 64, bytes)).toBeUndefined();
      expect(checkJsonValue(v, 64, bytes - 1)).toEqual({ kind: 'bytes', limit: bytes - 1 });
    }
  });

  it('skips undefined members as JSON does, and counts undefined array items as null', () => {
    expect(checkJsonValue({ a: undefined, b: 1 }, 8, '{"b":1}'.length)).toBeUndefined();
    expect(checkJsonValue([undefined], 8, '[null]'.length)).toBeUndefined();
  });

  it('refuses values JSON would change silently, naming where they are', () => {
    expect(checkJsonValue({ a: [1, 2n] }, 8, 1e6)).toEqual({
      kind: 'not-json',
      path: '/a/1',
      type: 'bigint',
    });
    expect(checkJsonValue({ 'x/y': () => 1 }, 8, 1e6)).toMatchObject({
      path: '/x~1y',
      type: 'function',
    });
    expect(checkJsonValue({ when: new Date(0) }, 8, 1e6)).toMatchObject({
      path: '/when',
      type: 'object with toJSON',
    });
  });

  it('stops on a cycle or an exponentially shared structure at a limit instead of looping', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(checkJsonValue(cycle, 64, 1e9)).toEqual({ kind: 'depth', limit: 64 });
    let shared: unknown[] = [];
    for (let i = 0; i < 60; i++) shared = [shared, shared];
    expect(checkJsonValue(shared, 64, 1e6)).toEqual({ kind: 'bytes', limit: 1e6 });
  });
});

describe('PreparedCall bounds', () => {
  it('refuses 20,000-level nested arguments with INVALID_ARGUMENTS and sends nothing', async () => {
    const caller = recordingCaller(() => ({ content: [] }));
    const binding = bindingOf([anyTool], caller);
    const error = await failure(binding.prepareCall('s__any').run(nested(20_000)));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.detail).toMatchObject({ limit: 'maxArgumentDepth', max: 64, tool: 'any' });
    expect(error.message).toContain('nested deeper than 64 levels');
    expect(caller.sent).toEqual([]);
  });

  it('bounds the arguments a prepare hook returns, before they are sent', async () => {
    const caller = recordingCaller(() => ({ content: [] }));
    const binding = bindingOf([anyTool], caller, { maxArgumentBytes: 100 });
    const error = await failure(
      binding.prepareCall('s__any').run({}, { prepare: () => ({ blob: 'x'.repeat(200) }) }),
    );
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.detail).toMatchObject({ limit: 'maxArgumentBytes', max: 100 });
    expect(caller.sent).toEqual([]);
  });

  it('refuses arguments that are not plain JSON, since they would not be sent as validated', async () => {
    const caller = recordingCaller(() => ({ content: [] }));
    const binding = bindingOf([anyTool], caller);
    const error = await failure(binding.prepareCall('s__any').run({ n: 1n }));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.detail).toMatchObject({ path: '/n' });
    expect(caller.sent).toEqual([]);
  });

  it('refuses a 100,000-level result of a tool without an output schema with INVALID_TOOL_OUTPUT', async () => {
    const deep = JSON.parse('{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000)) as Record<
      string,
      unknown
    >;
    const caller = recordingCaller(() => ({ content: [], structuredContent: deep }));
    const binding = bindingOf([anyTool], caller);
    const error = await failure(binding.prepareCall('s__any').run({}));
    expect(error.code).toBe('INVALID_TOOL_OUTPUT');
    expect(error.detail).toMatchObject({ limit: 'maxOutputDepth', max: 128 });
    expect(caller.sent).toEqual([{}]);
  });

  it('bounds error results and content too, not only structuredContent', async () => {
    const caller = recordingCaller(() => ({
      isError: true,
      content: [{ type: 'text', text: 'x'.repeat(1000) }],
    }));
    const binding = bindingOf([anyTool], caller, { maxOutputBytes: 500 });
    const error = await failure(binding.prepareCall('s__any').run({}));
    expect(error.code).toBe('INVALID_TOOL_OUTPUT');
    expect(error.detail).toMatchObject({ limit: 'maxOutputBytes', max: 500 });
  });

  it('passes values within the defaults untouched', async () => {
    const structured = nested(DEFAULT_CALL_LIMITS.maxOutputDepth - 1);
    const caller = recordingCaller(() => ({ content: [], structuredContent: structured }));
    const binding = bindingOf([anyTool], caller);
    const args = nested(DEFAULT_CALL_LIMITS.maxArgumentDepth);
    const { result } = await binding.prepareCall('s__any').run(args);
    expect(result.structuredContent).toBe(structured);
    expect(caller.sent).toEqual([args]);
  });
});

describe('own properties at the call boundary', () => {
  it('does not count inherited names as present: required constructor/toString with { amount: 5 } is refused, nothing sent', async () => {
    const caller = recordingCaller(() => ({ content: [] }));
    const binding = bindingOf(
      [
        {
          name: 'pay',
          inputSchema: { type: 'object', required: ['constructor', 'toString', 'amount'] },
        },
      ],
      caller,
    );
    const error = await failure(binding.prepareCall('s__pay').run({ amount: 5 }));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.message).toContain("(root) must have required property 'constructor'");
    expect(caller.sent).toEqual([]);
  });

  it('accepts an own __proto__ property a schema declares under additionalProperties: false, and checks its type', async () => {
    const inputSchema = JSON.parse(
      '{"type":"object","properties":{"__proto__":{"type":"string"}},"additionalProperties":false}',
    ) as Record<string, unknown>;
    const caller = recordingCaller(() => ({ content: [] }));
    const binding = bindingOf([{ name: 'p', inputSchema }], caller);
    const call = binding.prepareCall('s__p');
    await call.run(JSON.parse('{"__proto__":"x"}') as Record<string, unknown>);
    const error = await failure(call.run(JSON.parse('{"__proto__":5}') as Record<string, unknown>));
    expect(error.message).toContain('/__proto__ must be string');
    expect(caller.sent).toHaveLength(1);
  });

  it('judges outputs by own properties too', async () => {
    const caller = recordingCaller(() => ({ content: [], structuredContent: { amount: 5 } }));
    const binding = bindingOf(
      [
        {
          name: 'q',
          inputSchema: { type: 'object' },
          outputSchema: { type: 'object', required: ['amount', 'valueOf'] },
        },
      ],
      caller,
    );
    const error = await failure(binding.prepareCall('s__q').run({}));
    expect(error.code).toBe('INVALID_TOOL_OUTPUT');
    expect(error.message).toContain("(root) must have required property 'valueOf'");
  });
});

describe('checkJsonValue: the walk stacks kept for the next walk', () => {
  it('gives a walk started from inside another (a getter of the value) stacks of its own', () => {
    // The getter's walk runs while the outer one still has the deep item pending on its stack.
    const deep = { a: { b: { c: {} } } };
    const inner = {
      get member() {
        expect(checkJsonValue({ x: [1, 2, 3] }, 8, 1_000)).toBeUndefined();
        return 'x';
      },
    };
    expect(checkJsonValue([inner, deep], 3, 1_000)).toEqual({ kind: 'depth', limit: 3 });
  });

  it('keeps no reference to a walked value once the walk is over', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const ref = ((): WeakRef<object> => {
      // An empty object is the last value its stack slot holds: nothing written over it.
      const payload = {};
      expect(checkJsonValue({ content: [{ text: 'a' }, payload] }, 8, 1_000)).toBeUndefined();
      return new WeakRef(payload);
    })();
    // A WeakRef holds its target until the end of the current job.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(ref.deref()).toBeUndefined();
  });
});
