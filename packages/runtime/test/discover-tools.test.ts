import { ListToolsResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { CatalogError, type ToolDiscovery } from '@stepbind/binding/internal';
import { enumerateTools, type EnumerateToolsOptions } from '@stepbind/runtime';
import { isProcessAlive, type ServerFixture } from '@stepbind/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { listCursors, livePids, startStdio, type StdioHarness } from './support/stdio.js';
import { auditEntry } from './support/audit.js';

const open: StdioHarness[] = [];

async function server(
  scenario: Parameters<typeof startStdio>[0]['scenario'],
  extra: Omit<Parameters<typeof startStdio>[0], 'scenario'> = {},
): Promise<StdioHarness> {
  const harness = await startStdio({ scenario, ...extra });
  open.push(harness);
  return harness;
}

afterEach(async () => {
  const closing = open.splice(0);
  await Promise.all(closing.map((h) => h.dispose()));
  expect(closing.filter((h) => isProcessAlive(h.pid))).toEqual([]);
});

afterAll(() => {
  expect(livePids()).toEqual([]);
});

async function rejection(promise: Promise<ToolDiscovery>): Promise<CatalogError> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CatalogError);
  return error as CatalogError;
}

function names(result: ToolDiscovery): string[] {
  return result.tools.map((t) => t.name);
}

async function rawPage(h: StdioHarness, cursor?: string) {
  return h.client.request(
    { method: 'tools/list', params: cursor === undefined ? {} : { cursor } },
    ListToolsResultSchema,
  );
}

describe('enumerateTools over a real stdio child', () => {
  it('reads a single page', async () => {
    const h = await server('single');
    const result = await enumerateTools(h.client, { maxPages: 1 });
    expect(names(result)).toEqual(['alpha', 'beta']);
    expect(result.pageSizes).toEqual([2]);
    expect(Object.isFrozen(result)).toBe(true);
  });

  it('reads an empty catalog as one empty page', async () => {
    const h = await server('empty');
    const result = await enumerateTools(h.client);
    expect(result.tools).toEqual([]);
    expect(result.pageSizes).toEqual([0]);
  });

  it('keeps an empty middle page and gives sizes [1, 0, 2]', async () => {
    const h = await server('normal');
    const result = await enumerateTools(h.client);
    expect(names(result)).toEqual(['alpha', 'beta', 'gamma']);
    expect(result.pageSizes).toEqual([1, 0, 2]);
    expect(listCursors(await h.audit())).toHaveLength(3);
  });

  it('sends the empty-string cursor and follows it', async () => {
    const h = await server('empty-token');
    const first = await rawPage(h);
    expect(first.nextCursor).toBe('');
    const result = await enumerateTools(h.client);
    expect(names(result)).toEqual(['alpha', 'beta']);
    expect(listCursors(await h.audit())).toEqual([null, null, '']);
  });

  it('gives the same page and next cursor when a cursor is replayed in the same generation', async () => {
    const h = await server('normal');
    const a = await rawPage(h);
    const b = await rawPage(h);
    expect(b).toEqual(a);
    expect(a.nextCursor).toEqual(expect.any(String));
    const c = await rawPage(h, a.nextCursor);
    const d = await rawPage(h, a.nextCursor);
    expect(d).toEqual(c);
    expect(c.tools).toEqual([]);
    expect(c.nextCursor).toEqual(expect.any(String));
  });

  it('rejects a cursor that repeats itself (A → A) with CURSOR_REPEATED', async () => {
    const h = await server('repeat');
    const error = await rejection(enumerateTools(h.client));
    expect(error.code).toBe('CURSOR_REPEATED');
    expect(listCursors(await h.audit())).toHaveLength(2);
  });

  it('rejects an A → B → A cursor cycle with CURSOR_REPEATED', async () => {
    const h = await server('cycle');
    const error = await rejection(enumerateTools(h.client));
    expect(error.code).toBe('CURSOR_REPEATED');
    expect(error.message).toContain('loops');
    expect(listCursors(await h.audit())).toHaveLength(3);
  });

  it('stops endless unique cursors at maxPages with PAGE_LIMIT', async () => {
    const h = await server('endless');
    const error = await rejection(enumerateTools(h.client, { maxPages: 4 }));
    expect(error.code).toBe('PAGE_LIMIT');
    expect(listCursors(await h.audit())).toHaveLength(4);
  });

  it('fails with a page limit one short and succeeds with the exact page limit', async () => {
    const h = await server('normal');
    expect((await rejection(enumerateTools(h.client, { maxPages: 2 }))).code).toBe('PAGE_LIMIT');
    const result = await enumerateTools(h.client, { maxPages: 3 });
    expect(result.pageSizes).toEqual([1, 0, 2]);
  });

  it('fails over the tool limit and accepts exactly the limit', async () => {
    const h = await server('normal');
    const error = await rejection(enumerateTools(h.client, { maxTools: 2 }));
    expect(error.code).toBe('TOOL_LIMIT');
    expect(error.detail).toMatchObject({ limit: 2 });
    expect(names(await enumerateTools(h.client, { maxTools: 3 }))).toHaveLength(3);
  });

  it('rejects a tool name repeated on a later page with DUPLICATE_TOOL_NAME', async () => {
    const h = await server('duplicate');
    const error = await rejection(enumerateTools(h.client));
    expect(error.code).toBe('DUPLICATE_TOOL_NAME');
    expect(error.tool).toBe('alpha');
    expect(error.detail['page']).toBe(2);
  });

  it('answers a cursor the server never issued with JSON-RPC -32602', async () => {
    const h = await server('normal');
    const error: unknown = await rawPage(h, 'not-issued').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(-32602);
  });

  it('rejects the old cursor after a generation change, and a new traversal then succeeds', async () => {
    const h = await server('change');
    const error = await rejection(enumerateTools(h.client));
    expect(error.code).toBe('SERVER_ERROR');
    expect(error.detail.rpcCode).toBe(-32602);
    const again = await enumerateTools(h.client);
    expect(names(again)).toEqual(['alpha', 'delta', 'gamma']);
  });

  it('rejects a cursor issued by another server process', async () => {
    const one = await server('normal');
    const cursor = (await rawPage(one)).nextCursor;
    expect(cursor).toEqual(expect.any(String));
    const two = await server('normal');
    const error: unknown = await rawPage(two, cursor).catch((e: unknown) => e);
    expect((error as McpError).code).toBe(-32602);
  });

  it('can call gamma, which was listed on the last page', async () => {
    const h = await server('normal');
    const result = await enumerateTools(h.client);
    expect(result.tools.at(-1)?.name).toBe('gamma');
    const call = await h.client.callTool({ name: 'gamma', arguments: {} });
    expect(call.isError).not.toBe(true);
    expect(call.content).toEqual([{ type: 'text', text: expect.stringContaining('gamma') }]);
    expect((await h.audit()).filter((e) => e.method === 'tools/call').map((e) => e.tool)).toEqual([
      'gamma',
    ]);
  });

  it('rejects a cursor over the byte budget with CURSOR_TOO_LARGE', async () => {
    const h = await server('normal');
    const error = await rejection(enumerateTools(h.client, { maxCursorBytes: 4 }));
    expect(error.code).toBe('CURSOR_TOO_LARGE');
    expect(listCursors(await h.audit())).toHaveLength(1);
  });

  it('misses the total deadline with slow pages that each beat the request timeout', async () => {
    const h = await server('normal', { pageDelayMs: 200 });
    const error = await rejection(
      enumerateTools(h.client, { requestTimeoutMs: 5_000, totalTimeoutMs: 450 }),
    );
    expect(error.code).toBe('TIMEOUT');
    expect(error.detail['scope']).toBe('total');
  });

  it('times out a single slow request and sends notifications/cancelled', async () => {
    const h = await server('normal', { pageDelayMs: 2_000 });
    const error = await rejection(enumerateTools(h.client, { requestTimeoutMs: 100 }));
    expect(error.code).toBe('TIMEOUT');
    expect(error.detail['scope']).toBe('request');
    await auditEntry(h.auditPath, (e) => e.method === 'notifications/cancelled');
  });

  it('rejects with ABORTED when the caller aborts', async () => {
    const h = await server('normal', { pageDelayMs: 2_000 });
    const controller = new AbortController();
    const pending = enumerateTools(h.client, { signal: controller.signal });
    controller.abort();
    expect((await rejection(pending)).code).toBe('ABORTED');
  });

  it('gives a typed error, not a hang, when the server exits mid-enumeration', async () => {
    const fixture: ServerFixture = {
      generations: [
        { pages: [{ tools: [{ name: 'alpha', inputSchema: { type: 'object' } }] }, { tools: [] }] },
      ],
      triggers: [{ on: { method: 'tools/list', nth: 2 }, exit: 3 }],
    };
    const h = await server('fixture', { fixture });
    const error = await rejection(enumerateTools(h.client, { requestTimeoutMs: 10_000 }));
    expect(error.code).toBe('CONNECTION_CLOSED');
  });

  it('restarts from the first page when list_changed arrives mid-enumeration', async () => {
    const tool = (name: string) => ({ name, inputSchema: { type: 'object' } });
    const fixture: ServerFixture = {
      generations: [
        { pages: [{ tools: [tool('alpha')] }, { tools: [tool('beta')] }] },
        { pages: [{ tools: [tool('alpha')] }, { tools: [tool('omega')] }] },
      ],
      triggers: [
        {
          on: { method: 'tools/list', nth: 2 },
          setGeneration: 1,
          stateChange: 'after',
          notify: 'before',
        },
      ],
    };
    const h = await server('fixture', { fixture });
    let version = 0;
    h.client.setNotificationHandler(
      (await import('@modelcontextprotocol/sdk/types.js')).ToolListChangedNotificationSchema,
      () => {
        version++;
      },
    );
    const changes = {
      get version() {
        return version;
      },
    };
    const result = await enumerateTools(h.client, { changes });
    expect(result.restarts).toBe(1);
    expect(names(result)).toEqual(['alpha', 'omega']);
    expect(listCursors(await h.audit())).toHaveLength(4);
  });
});

describe('enumerateTools option validation', () => {
  const bad: [keyof EnumerateToolsOptions, unknown][] = [];
  for (const key of [
    'maxPages',
    'maxTools',
    'maxCursorBytes',
    'requestTimeoutMs',
    'totalTimeoutMs',
    'maxRestarts',
  ] as const) {
    for (const value of [-1, 1.5, true, Number.NaN, '3', Number.POSITIVE_INFINITY, null]) {
      bad.push([key, value]);
    }
    if (key !== 'maxTools' && key !== 'maxRestarts') bad.push([key, 0]);
  }
  let shared: StdioHarness;

  it('starts one server whose audit trail will prove nothing was sent', async () => {
    shared = await startStdio({ scenario: 'normal' });
    expect(shared.pid).toBeGreaterThan(0);
  });

  it.each(bad)('rejects %s=%s with INVALID_OPTIONS', async (key, value) => {
    const error = await rejection(enumerateTools(shared.client, { [key]: value }));
    expect(error.code).toBe('INVALID_OPTIONS');
    expect(error.detail['option']).toBe(key);
  });

  it('sent zero tools/list requests for all those invalid options', async () => {
    await shared.close();
    const methods = (await shared.audit()).map((e) => e.method);
    await shared.dispose();
    expect(methods.filter((m) => m !== 'notifications/initialized')).toEqual(['initialize']);
  });
});
