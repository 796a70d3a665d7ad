import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectInMemory, scriptedTool } from '@stepbind/testkit';
import type { InMemoryConnection } from '@stepbind/testkit';
import { errorCode, listAll, listPage, names } from './support/stdio.js';

const open: InMemoryConnection[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((connection) => connection.close()));
});

async function connect(...args: Parameters<typeof connectInMemory>): Promise<InMemoryConnection> {
  const connection = await connectInMemory(...args);
  open.push(connection);
  return connection;
}

describe('in-memory scripted server', () => {
  it('pages like the stdio server and keeps a live audit trail in this process', async () => {
    const { client, scripted } = await connect({ scenario: 'normal' });
    const pages = await listAll(client);
    expect(pages.map(names)).toEqual([['alpha'], [], ['beta', 'gamma']]);
    expect(scripted.audit.map((entry) => [entry.method, entry.cursor])).toEqual([
      ['initialize', undefined],
      ['notifications/initialized', undefined],
      ['tools/list', null],
      ['tools/list', pages[0]?.nextCursor],
      ['tools/list', pages[1]?.nextCursor],
    ]);
    expect(scripted.audit.every((entry) => entry.pid === process.pid)).toBe(true);
  });

  it('replaceCatalog makes old cursors stale and notifyListChanged reaches the client', async () => {
    const { client, scripted } = await connect({ scenario: 'normal' });
    const changed = new Promise<void>((resolve) => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve());
    });
    const first = await listPage(client);
    const generation = scripted.replaceCatalog([[scriptedTool('omega')]], { revision: 'r9' });
    await scripted.notifyListChanged();
    await changed;
    expect(generation).toBe(1);
    expect(scripted.generation).toBe(1);
    expect(await errorCode(listPage(client, first.nextCursor))).toBe(ErrorCode.InvalidParams);
    const fresh = await listPage(client);
    expect(names(fresh)).toEqual(['omega']);
    expect(fresh._meta).toEqual({ 'io.stepbind/catalogRevision': 'r9' });
    scripted.setGeneration(0);
    expect(names(await listPage(client))).toEqual(['alpha']);
    expect(() => scripted.setGeneration(5)).toThrow(RangeError);
  });

  it('an exit trigger closes the connection instead of ending this process', async () => {
    const { client } = await connect({
      scenario: 'fixture',
      fixture: {
        generations: [{ pages: [{ tools: [scriptedTool('a')] }] }],
        triggers: [{ on: { method: 'tools/call' }, exit: 1 }],
      },
    });
    await expect(client.callTool({ name: 'a', arguments: {} })).rejects.toThrow(
      /Connection closed/,
    );
  });

  it('a cancelled slow call is audited as notifications/cancelled', async () => {
    const { client, scripted } = await connect({ scenario: 'single', callDelayMs: 60_000 });
    const controller = new AbortController();
    const call = client.callTool({ name: 'beta', arguments: {} }, undefined, {
      signal: controller.signal,
    });
    controller.abort(new Error('stop'));
    await expect(call).rejects.toThrow(/stop/);
    await client.ping();
    expect(scripted.audit.map((entry) => entry.method).slice(-3)).toEqual([
      'tools/call',
      'notifications/cancelled',
      'ping',
    ]);
  });
});
