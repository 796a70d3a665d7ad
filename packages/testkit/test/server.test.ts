import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ErrorCode,
  ResultSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  CATALOG_REVISION_META_KEY,
  isProcessAlive,
  readAuditTrail,
  scriptedTool,
  tempAuditPath,
  tempDir,
} from '@stepbind/testkit';
import type { ServerFixture } from '@stepbind/testkit';
import { closeAll, errorCode, listAll, listPage, names, spawnScripted } from './support/stdio.js';

afterEach(closeAll);

const revisionOf = (page: { _meta?: Record<string, unknown> }): unknown =>
  page._meta?.[CATALOG_REVISION_META_KEY];

/** Resolves on the next `notifications/tools/list_changed` the client receives. */
const nextListChanged = (child: Awaited<ReturnType<typeof spawnScripted>>): Promise<void> =>
  new Promise((resolve) => {
    child.client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve());
  });

describe('scenario page sequences over stdio', () => {
  it('normal serves pages of sizes 1, 0, 2 and ends without a cursor', async () => {
    const { client } = await spawnScripted({ scenario: 'normal' });
    const pages = await listAll(client);
    expect(pages.map(names)).toEqual([['alpha'], [], ['beta', 'gamma']]);
    expect(pages[2]).not.toHaveProperty('nextCursor');
    const cursors = pages.slice(0, 2).map((page) => page.nextCursor);
    expect(new Set(cursors).size).toBe(2);
    for (const cursor of cursors) expect(cursor).toMatch(/^[A-Za-z0-9_-]{16}$/);
  });

  it('single serves one page with two tools', async () => {
    const { client } = await spawnScripted({ scenario: 'single' });
    const pages = await listAll(client);
    expect(pages.map(names)).toEqual([['alpha', 'beta']]);
  });

  it('empty serves one empty page without nextCursor', async () => {
    const { client } = await spawnScripted({ scenario: 'empty' });
    const page = await listPage(client);
    expect(page.tools).toEqual([]);
    expect(page).not.toHaveProperty('nextCursor');
  });

  it('empty-token issues "" as a cursor and maps it to page 2, audited apart from no cursor', async () => {
    const child = await spawnScripted({ scenario: 'empty-token' });
    const first = await listPage(child.client);
    expect(first.nextCursor).toBe('');
    const second = await listPage(child.client, '');
    expect(names(second)).toEqual(['beta']);
    expect(second).not.toHaveProperty('nextCursor');
    await child.close();
    const lists = (await readAuditTrail(child.auditPath)).filter((e) => e.method === 'tools/list');
    expect(lists.map((entry) => entry.cursor)).toEqual([null, '']);
  });

  it('repeat answers every later request with an empty page and the cursor it sent', async () => {
    const { client } = await spawnScripted({ scenario: 'repeat' });
    const first = await listPage(client);
    expect(names(first)).toEqual(['alpha']);
    const cursor = first.nextCursor;
    expect(cursor).toBeTypeOf('string');
    for (let i = 0; i < 3; i += 1) {
      const page = await listPage(client, cursor);
      expect(page.tools).toEqual([]);
      expect(page.nextCursor).toBe(cursor);
    }
  });

  it('cycle leads A -> B -> A', async () => {
    const { client } = await spawnScripted({ scenario: 'cycle' });
    const a = (await listPage(client)).nextCursor;
    const b = (await listPage(client, a)).nextCursor;
    const again = (await listPage(client, b)).nextCursor;
    expect(a).toBeTypeOf('string');
    expect(b).toBeTypeOf('string');
    expect(b).not.toBe(a);
    expect(again).toBe(a);
  });

  it('endless serves empty pages, each with a brand-new cursor', async () => {
    const { client } = await spawnScripted({ scenario: 'endless' });
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let i = 0; i < 12; i += 1) {
      const page = await listPage(client, cursor);
      expect(page.tools).toEqual([]);
      expect(page.nextCursor).toBeTypeOf('string');
      cursor = page.nextCursor;
      seen.add(cursor as string);
    }
    expect(seen.size).toBe(12);
  });

  it('duplicate lists alpha on page 1 and again on page 3', async () => {
    const { client } = await spawnScripted({ scenario: 'duplicate' });
    expect((await listAll(client)).map(names)).toEqual([['alpha'], ['beta'], ['alpha']]);
  });
});

describe('cursors', () => {
  it('replaying a cursor returns the same page and the same next cursor', async () => {
    const { client } = await spawnScripted({ scenario: 'normal' });
    const first = await listPage(client);
    const second = await listPage(client, first.nextCursor);
    const replay = await listPage(client, first.nextCursor);
    expect(replay).toEqual(second);
    expect(await listPage(client)).toEqual(first);
  });

  it('a cursor the server never issued gets JSON-RPC error -32602', async () => {
    const { client } = await spawnScripted({ scenario: 'normal' });
    expect(await errorCode(listPage(client, 'bm90LWlzc3VlZA'))).toBe(ErrorCode.InvalidParams);
    expect(await errorCode(listPage(client, ''))).toBe(ErrorCode.InvalidParams);
  });

  it('change: pre-change cursors get -32602, a fresh traversal succeeds and stays stable', async () => {
    const child = await spawnScripted({ scenario: 'change' });
    const first = await listPage(child.client);
    expect(names(first)).toEqual(['alpha']);
    expect(await errorCode(listPage(child.client, first.nextCursor))).toBe(ErrorCode.InvalidParams);
    const fresh = await listAll(child.client);
    expect(fresh.map(names)).toEqual([['alpha', 'delta'], ['gamma']]);
    expect((await listAll(child.client)).map(names)).toEqual(fresh.map(names));
    await child.close();
    const lists = (await readAuditTrail(child.auditPath)).filter((e) => e.method === 'tools/list');
    expect(lists.map((entry) => entry.generation)).toEqual([0, 1, 1, 1, 1, 1]);
  });
});

describe('catalog revision meta', () => {
  it('revision-consistent carries the same token on every page and on re-reads', async () => {
    const { client } = await spawnScripted({ scenario: 'revision-consistent' });
    const pages = await listAll(client);
    expect(pages).toHaveLength(3);
    expect(pages.map(revisionOf)).toEqual(['rev-1', 'rev-1', 'rev-1']);
    expect(revisionOf(await listPage(client))).toBe('rev-1');
  });

  it('revision-changing changes the token mid-enumeration; a restarted traversal is consistent', async () => {
    const { client } = await spawnScripted({ scenario: 'revision-changing' });
    const first = await listPage(client);
    const second = await listPage(client, first.nextCursor);
    expect([revisionOf(first), revisionOf(second)]).toEqual(['rev-1', 'rev-2']);
    expect(revisionOf(await listPage(client))).toBe('rev-2');
    const restarted = await listAll(client);
    expect(restarted.map(revisionOf)).toEqual(['rev-2', 'rev-2', 'rev-2']);
  });

  it('revision-missing-page omits the token on page 2 only', async () => {
    const { client } = await spawnScripted({ scenario: 'revision-missing-page' });
    const pages = await listAll(client);
    expect(pages.map(revisionOf)).toEqual(['rev-1', undefined, 'rev-1']);
    expect(pages[1]).not.toHaveProperty('_meta');
  });
});

describe('tools/call', () => {
  it('every listed tool answers fixed text; an unlisted tool gets -32602', async () => {
    const { client } = await spawnScripted({ scenario: 'normal' });
    expect(await client.callTool({ name: 'gamma', arguments: {} })).toEqual({
      content: [{ type: 'text', text: 'gamma ok' }],
    });
    expect(await errorCode(client.callTool({ name: 'nope', arguments: {} }))).toBe(
      ErrorCode.InvalidParams,
    );
  });

  it('serverInfo override and the listChanged capability reach the client', async () => {
    const { client } = await spawnScripted({
      scenario: 'single',
      serverInfo: { name: 'custom', version: '9.9.9' },
    });
    expect(client.getServerVersion()).toMatchObject({ name: 'custom', version: '9.9.9' });
    expect(client.getServerCapabilities()?.tools).toEqual({ listChanged: true });
  });
});

describe('fixtures over stdio', () => {
  const tool = scriptedTool;

  it('serves explicit cursors and raw invalid tools as-is from a fixture file', async () => {
    const fixture: ServerFixture = {
      generations: [
        {
          pages: [
            { tools: [{ name: 'bad name!', inputSchema: { type: 'string' } }], nextCursor: 'next' },
            { tools: [tool('ok')] },
          ],
        },
      ],
    };
    await using dir = tempDir('fixture-file');
    const fixturePath = dir.file('fixture.json');
    writeFileSync(fixturePath, JSON.stringify(fixture));
    const { client } = await spawnScripted({ scenario: 'fixture', fixturePath });
    const raw = await client.request({ method: 'tools/list', params: {} }, ResultSchema);
    expect(raw).toEqual({
      tools: [{ name: 'bad name!', inputSchema: { type: 'string' } }],
      nextCursor: 'next',
    });
    expect(names(await listPage(client, 'next'))).toEqual(['ok']);
  });

  it('returns scripted call results with structuredContent and isError', async () => {
    const { client } = await spawnScripted({
      scenario: 'fixture',
      fixture: {
        generations: [{ pages: [{ tools: [tool('a'), tool('b')] }] }],
        calls: { a: { structuredContent: { n: 1 } }, b: { text: 'boom', isError: true } },
      },
    });
    expect(await client.callTool({ name: 'a', arguments: {} })).toEqual({
      content: [{ type: 'text', text: '{"n":1}' }],
      structuredContent: { n: 1 },
    });
    expect(await client.callTool({ name: 'b', arguments: {} })).toEqual({
      content: [{ type: 'text', text: 'boom' }],
      isError: true,
    });
  });

  it('a tools/call trigger sends list_changed after responding and switches generation', async () => {
    const child = await spawnScripted({
      scenario: 'fixture',
      fixture: {
        generations: [{ pages: [{ tools: [tool('a')] }] }, { pages: [{ tools: [tool('b')] }] }],
        triggers: [{ on: { method: 'tools/call', tool: 'a' }, setGeneration: 1, notify: 'after' }],
      },
    });
    const changed = nextListChanged(child);
    expect(await child.client.callTool({ name: 'a', arguments: {} })).toEqual({
      content: [{ type: 'text', text: 'a ok' }],
    });
    await changed;
    expect(names(await listPage(child.client))).toEqual(['b']);
  });

  it('a tools/list trigger can notify before responding and fires only on its nth match', async () => {
    const child = await spawnScripted({
      scenario: 'fixture',
      fixture: {
        generations: [{ pages: [{ tools: [tool('a')] }] }],
        triggers: [{ on: { method: 'tools/list', nth: 2, cursor: null }, notify: 'before' }],
      },
    });
    let notifications = 0;
    child.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      notifications += 1;
    });
    await listPage(child.client);
    // The notification precedes the response on the pipe, so it has been handled when this resolves.
    expect(notifications).toBe(0);
    await listPage(child.client);
    expect(notifications).toBe(1);
    await listPage(child.client);
    expect(notifications).toBe(1);
  });

  it('exit mid-call fails the call instead of hanging, and the audit trail survives', async () => {
    const child = await spawnScripted({
      scenario: 'fixture',
      fixture: {
        generations: [{ pages: [{ tools: [tool('a')] }] }],
        triggers: [{ on: { method: 'tools/call', tool: 'a' }, notify: 'before', exit: 7 }],
      },
    });
    const changed = nextListChanged(child);
    await expect(child.client.callTool({ name: 'a', arguments: {} })).rejects.toThrow(
      /Connection closed/,
    );
    await changed;
    expect(isProcessAlive(child.pid)).toBe(false);
    const trail = await readAuditTrail(child.auditPath);
    expect(trail.at(-1)).toMatchObject({ method: 'tools/call', tool: 'a', pid: child.pid });
  });
});

describe('audit trail and process lifetime', () => {
  it('records every request and notification with cursor, tool, generation and pid', async () => {
    const child = await spawnScripted({ scenario: 'normal' });
    const pages = await listAll(child.client);
    await child.client.callTool({ name: 'alpha', arguments: {} });
    await child.close();
    const trail = await readAuditTrail(child.auditPath);
    expect(trail).toEqual([
      { seq: 1, method: 'initialize', generation: 0, pid: child.pid },
      { seq: 2, method: 'notifications/initialized', generation: 0, pid: child.pid },
      { seq: 3, method: 'tools/list', cursor: null, generation: 0, pid: child.pid },
      { seq: 4, method: 'tools/list', cursor: pages[0]?.nextCursor, generation: 0, pid: child.pid },
      { seq: 5, method: 'tools/list', cursor: pages[1]?.nextCursor, generation: 0, pid: child.pid },
      { seq: 6, method: 'tools/call', tool: 'alpha', arguments: {}, generation: 0, pid: child.pid },
    ]);
  });

  it('a cancelled slow call is audited and close() still ends the child promptly', async () => {
    const child = await spawnScripted({ scenario: 'single', callDelayMs: 60_000 });
    const controller = new AbortController();
    const call = child.client.callTool({ name: 'alpha', arguments: {} }, undefined, {
      signal: controller.signal,
    });
    controller.abort(new Error('test cancels'));
    await expect(call).rejects.toThrow(/test cancels/);
    await child.close();
    // Exited on its own at end of stdin: the SDK's SIGTERM fallback (after 2 s) was not needed.
    expect(await child.exited).toEqual({ code: 0, signal: null });
    const methods = (await readAuditTrail(child.auditPath)).map((entry) => entry.method);
    expect(methods.slice(-2)).toEqual(['tools/call', 'notifications/cancelled']);
  });

  it('close() ends the child promptly while a slow call is still in flight', async () => {
    const child = await spawnScripted({ scenario: 'single', callDelayMs: 60_000 });
    const call = child.client.callTool({ name: 'alpha', arguments: {} });
    const outcome = call.then(
      () => 'resolved',
      () => 'rejected',
    );
    await child.client.ping(); // the call was sent before the ping, so the server has it
    await child.close();
    expect(await child.exited).toEqual({ code: 0, signal: null });
    expect(await outcome).toBe('rejected');
    expect(isProcessAlive(child.pid)).toBe(false);
  });

  it('the child process is gone after client.close()', async () => {
    const child = await spawnScripted({ scenario: 'normal' });
    expect(isProcessAlive(child.pid)).toBe(true);
    await child.close();
    expect(isProcessAlive(child.pid)).toBe(false);
  });

  it('pageDelayMs holds each tools/list response while other requests are answered', async () => {
    const child = await spawnScripted({ scenario: 'single', pageDelayMs: 60_000 });
    const order: string[] = [];
    const lists = [listPage(child.client), listPage(child.client)].map((list) =>
      list.then(
        () => order.push('list answered'),
        () => order.push('list failed'),
      ),
    );
    await child.client.ping(); // sent after both lists, answered while they are held
    order.push('ping answered');
    const methods = (await readAuditTrail(child.auditPath)).map((entry) => entry.method);
    expect(methods.filter((m) => m === 'tools/list')).toHaveLength(2);
    await child.close();
    await Promise.all(lists);
    expect(order).toEqual(['ping answered', 'list failed', 'list failed']);
    expect(await child.exited).toEqual({ code: 0, signal: null });
  });

  it('readAuditTrail returns [] for a missing file', async () => {
    expect(await readAuditTrail(tempAuditPath('missing'))).toEqual([]);
  });
});
