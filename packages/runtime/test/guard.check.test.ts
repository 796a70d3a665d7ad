import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkMessage } from '../src/transports/guard.js';

const seed = Number(process.env['STEPBIND_SEED'] ?? Date.now() % 2_147_483_647);
console.log(`guard.check: seed ${seed} (STEPBIND_SEED=${seed} to replay)`);

/** Values a server could send where the guard looks: well formed, nearly so, or wrong. */
const anyJson = fc.jsonValue({ maxDepth: 3 });
const requestId = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.integer(),
  fc.constantFrom(1.5, 2 ** 53, -(2 ** 60), null, true),
);
/** `_meta` as the schema types it (progress token, related task), right and wrong. */
const meta = fc.oneof(
  fc.constant(undefined),
  fc.record(
    {
      progressToken: fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.constant(1.5), anyJson),
      'io.modelcontextprotocol/related-task': fc.oneof(
        fc.record({ taskId: fc.string({ maxLength: 3 }) }),
        anyJson,
      ),
      other: anyJson,
    },
    { requiredKeys: [] },
  ),
  anyJson,
);
const result = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(fc.dictionary(fc.string({ maxLength: 4 }), anyJson), meta) },
  { weight: 1, arbitrary: fc.tuple(anyJson, fc.constant(undefined)) },
);
const response = fc
  .record(
    {
      jsonrpc: fc.constantFrom('2.0', '2.0', '2.0', '1.0', 2),
      id: requestId,
      result,
      error: fc.oneof(
        fc.record({ code: fc.integer(), message: fc.string({ maxLength: 3 }) }),
        anyJson,
      ),
      extra: anyJson,
    },
    { requiredKeys: [] },
  )
  .map(({ result: r, ...rest }) => {
    if (r === undefined) return rest;
    const [body, m] = r;
    const withMeta =
      m === undefined || typeof body !== 'object' || body === null || Array.isArray(body)
        ? body
        : { ...body, _meta: m };
    // Through JSON, as the transports hand values over.
    return JSON.parse(JSON.stringify({ ...rest, result: withMeta })) as unknown;
  });

describe('checkMessage', () => {
  it('accepts a response only when the SDK schema does, and delivers what that schema would (property, against zod)', () => {
    let fast = 0;
    fc.assert(
      fc.property(response, (raw) => {
        const verdict = checkMessage(raw);
        if (!verdict.ok) return;
        const parsed = JSONRPCMessageSchema.safeParse(raw);
        expect(parsed.success).toBe(true);
        expect(verdict.message).toEqual(parsed.data);
        if (verdict.message === raw) fast++;
      }),
      { seed, numRuns: 5000 },
    );
    // The property saw the skipped parse, not only the schema's.
    expect(fast).toBeGreaterThan(0);
  });

  it('still refuses a result response whose _meta the schema refuses, with nothing else wrong', () => {
    for (const bad of [
      { progressToken: true },
      { progressToken: 1.5 },
      { 'io.modelcontextprotocol/related-task': { taskId: 7 } },
      { 'io.modelcontextprotocol/related-task': 'task' },
      'meta',
      [1],
    ]) {
      const verdict = checkMessage({ jsonrpc: '2.0', id: 3, result: { content: [], _meta: bad } });
      expect(verdict.ok, JSON.stringify(bad)).toBe(false);
      if (!verdict.ok) expect(verdict.id).toBe(3);
    }
    const good = checkMessage({
      jsonrpc: '2.0',
      id: 3,
      result: { content: [], _meta: { progressToken: 'p', note: 1 } },
    });
    expect(good.ok).toBe(true);
  });

  it('delivers a plain result response as it came, without a copy', () => {
    const raw = { jsonrpc: '2.0', id: 'a', result: { content: [{ type: 'text', text: 'ok' }] } };
    const verdict = checkMessage(raw);
    expect(verdict.ok && verdict.message).toBe(raw);
    // The 2026-07-28 era's results carry the server's identity in `_meta`.
    const modern = {
      jsonrpc: '2.0',
      id: 4,
      result: { content: [], _meta: { 'io.modelcontextprotocol/serverInfo': { name: 's' } } },
    };
    const verdict2 = checkMessage(modern);
    expect(verdict2.ok && verdict2.message).toBe(modern);
  });
});
