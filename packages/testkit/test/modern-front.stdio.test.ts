import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { parseConfig } from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';
import {
  readAuditTrail,
  scriptedTool,
  stdioServerParams,
  tempAudit,
  type ScriptedServerOptions,
  type ServerFixture,
  type TempAudit,
} from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';

// The 2026-07-28 front of the scripted server, spoken to in raw JSON-RPC over a real stdio child.

const V = 'io.modelcontextprotocol/protocolVersion';
const INFO = 'io.modelcontextprotocol/serverInfo';
const SUB = 'io.modelcontextprotocol/subscriptionId';
const ENVELOPE = {
  [V]: '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'front-test', version: '1.0.0' },
};

type Message = Record<string, unknown> & { id?: unknown; method?: string };

interface RawChild {
  readonly child: ChildProcessWithoutNullStreams;
  readonly trail: TempAudit;
  /** Every notification received so far, in order. */
  readonly notes: Message[];
  /** Resolves with notification number `index` (0-based), already received or still to come. */
  note(index: number): Promise<Message>;
  /** Sends a request (with the envelope unless `params._meta` is given) and awaits its answer. */
  request(method: string, params?: Record<string, unknown>): Promise<Message>;
  notify(method: string, params: Record<string, unknown>): void;
  /** The id the next `request` will use. */
  readonly nextId: number;
}

const children: RawChild[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.child.exitCode === null && c.child.signalCode === null) {
      const exited = once(c.child, 'exit');
      c.child.stdin.end();
      await exited;
    }
    await c.trail.dispose();
  }
});

function start(options: Omit<ScriptedServerOptions, 'auditPath'>): RawChild {
  const trail = tempAudit('front');
  const params = stdioServerParams({ era: 'modern', ...options, auditPath: trail.path });
  const child = spawn(params.command, params.args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const waiting = new Map<unknown, (m: Message) => void>();
  const notes: Message[] = [];
  const noteWaiters = new Map<number, (m: Message) => void>();
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = JSON.parse(line) as Message;
    if (m.method === undefined) waiting.get(m.id)?.(m);
    else {
      noteWaiters.get(notes.length)?.(m);
      noteWaiters.delete(notes.length);
      notes.push(m);
    }
  });
  let id = 1;
  const raw: RawChild = {
    child,
    trail,
    notes,
    note: (index) => {
      const seen = notes[index];
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve) => noteWaiters.set(index, resolve));
    },
    get nextId() {
      return id;
    },
    request(method, p = {}) {
      const mine = id++;
      const body = { ...p, _meta: p['_meta'] ?? ENVELOPE };
      if (p['_meta'] === null) delete (body as Record<string, unknown>)['_meta'];
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: mine, method, params: body })}\n`);
      return new Promise((resolve) => waiting.set(mine, resolve));
    },
    notify(method, p) {
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method, params: p })}\n`);
    },
  };
  children.push(raw);
  return raw;
}

const FIXTURE: ServerFixture = {
  generations: [
    { pages: [{ tools: [scriptedTool('plan')] }, { tools: [scriptedTool('slow')] }] },
    { pages: [{ tools: [scriptedTool('plan'), scriptedTool('added')] }] },
  ],
  triggers: [
    { on: { method: 'tools/call', tool: 'plan' }, setGeneration: 1, notify: 'after' },
    { on: { method: 'tools/call', tool: 'slow' }, delayMs: 60_000 },
    { on: { method: 'tools/call', tool: 'added' }, exit: 5 },
  ],
};

describe('the modern-era front of the scripted stdio server', () => {
  it('answers server/discover with the modern version, listChanged, serverInfo and the cache hints', async () => {
    const c = start({ scenario: 'single', cache: { ttlMs: 5_000, cacheScope: 'private' } });
    const info = { name: 'stepbind-testkit-single', version: '0.1.0' };
    expect((await c.request('server/discover')).result).toEqual({
      resultType: 'complete',
      supportedVersions: ['2026-07-28'],
      capabilities: { tools: { listChanged: true } },
      serverInfo: info,
      ttlMs: 5_000,
      cacheScope: 'private',
      _meta: { [INFO]: info },
    });
    expect((await c.request('tools/list')).result).toMatchObject({
      tools: [{ name: 'alpha' }, { name: 'beta' }],
      resultType: 'complete',
      ttlMs: 5_000,
      cacheScope: 'private',
      _meta: { [INFO]: info },
    });
  });

  it('refuses a request without the envelope (-32602), lacking clientInfo (-32602), with another version (-32022) and initialize (-32022)', async () => {
    const c = start({ scenario: 'single' });
    const bare = await c.request('tools/list', { _meta: null });
    expect(bare.error).toMatchObject({ code: -32602 });
    const { 'io.modelcontextprotocol/clientInfo': _info, ...noInfo } = ENVELOPE;
    void _info;
    const partial = await c.request('tools/list', { _meta: noInfo });
    expect(partial.error).toMatchObject({ code: -32602 });
    expect(String((partial.error as Message)['message'])).toContain('clientInfo');
    const other = await c.request('tools/list', { _meta: { ...ENVELOPE, [V]: '2099-01-01' } });
    expect(other.error).toEqual({
      code: -32022,
      message: expect.stringContaining('2099-01-01') as unknown,
      data: { supported: ['2026-07-28'], requested: '2099-01-01' },
    });
    const init = await c.request('initialize', {
      _meta: null,
      protocolVersion: '2025-11-25',
      capabilities: {},
      clientInfo: { name: 'x', version: '1' },
    });
    expect(init.error).toMatchObject({ code: -32022, data: { supported: ['2026-07-28'] } });
    // Nothing reached the catalog: the trail shows the refused requests and no initialize.
    expect((await readAuditTrail(c.trail.path)).map((e) => e.method)).toEqual([
      'tools/list',
      'tools/list',
      'tools/list',
      'initialize',
    ]);
  });

  it('strips the envelope, keeping the caller _meta, and leaves its own initialize out of the trail', async () => {
    const c = start({ scenario: 'single' });
    await c.request('server/discover');
    await c.request('tools/list');
    const call = await c.request('tools/call', {
      name: 'alpha',
      arguments: { q: 1 },
      _meta: { ...ENVELOPE, progressToken: 'p-1' },
    });
    expect(call.result).toMatchObject({ content: [{ type: 'text', text: 'alpha ok' }] });
    const audit = await readAuditTrail(c.trail.path);
    expect(audit.map((e) => e.method)).toEqual(['server/discover', 'tools/list', 'tools/call']);
    expect(audit[2]).toMatchObject({
      tool: 'alpha',
      arguments: { q: 1 },
      meta: { progressToken: 'p-1' },
    });
    expect(Object.keys(audit[2]?.meta ?? {})).toEqual(['progressToken']);
  });

  it('passes the SDK server errors through: a cursor it never issued gets -32602', async () => {
    const c = start({ scenario: 'normal' });
    const answer = await c.request('tools/list', { cursor: 'forged' });
    expect(answer.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('unknown cursor') as unknown,
    });
  });

  it('delivers list_changed on an open listen stream only, stamped with its subscription id, until it is cancelled', async () => {
    const c = start({ scenario: 'fixture', fixture: FIXTURE });
    // No stream yet: the change of this call is dropped (2026-07-28 has no other channel).
    await c.request('tools/call', { name: 'plan', arguments: {} });
    const listenId = c.nextId;
    void c.request('subscriptions/listen', { notifications: { toolsListChanged: true } });
    expect(await c.note(0)).toMatchObject({
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { toolsListChanged: true }, _meta: { [SUB]: listenId } },
    });
    await c.request('tools/call', { name: 'plan', arguments: {} });
    expect(await c.note(1)).toEqual({
      jsonrpc: '2.0',
      method: 'notifications/tools/list_changed',
      params: { _meta: { [SUB]: listenId } },
    });
    c.notify('notifications/cancelled', { requestId: listenId });
    await c.request('tools/call', { name: 'plan', arguments: {} });
    // The answer to a later request is written after any notification of the call before it.
    await c.request('tools/list');
    expect(c.notes).toHaveLength(2);
    expect((await readAuditTrail(c.trail.path)).map((e) => e.method)).toEqual([
      'tools/call',
      'subscriptions/listen',
      'tools/call',
      'notifications/cancelled',
      'tools/call',
      'tools/list',
    ]);
  });

  it('keeps the triggers: a delayed call is cancelled through the front, an exit trigger ends the process', async () => {
    const c = start({ scenario: 'fixture', fixture: FIXTURE });
    const slowId = c.nextId;
    void c.request('tools/call', { name: 'slow', arguments: {} });
    c.notify('notifications/cancelled', { requestId: slowId, reason: 'test' });
    // The slow call's answer never comes; the next one does at once.
    expect((await c.request('tools/list')).result).toMatchObject({ tools: [{ name: 'plan' }] });
    await c.request('tools/call', { name: 'plan', arguments: {} });
    const exited = once(c.child, 'exit');
    void c.request('tools/call', { name: 'added', arguments: {} });
    expect((await exited)[0]).toBe(5);
    const methods = (await readAuditTrail(c.trail.path)).map((e) => `${e.method}:${e.tool ?? ''}`);
    expect(methods).toEqual([
      'tools/call:slow',
      'notifications/cancelled:',
      'tools/list:',
      'tools/call:plan',
      'tools/call:added',
    ]);
  });

  it('passes a malformed page through unchanged, only stamped', async () => {
    const c = start({
      scenario: 'fixture',
      fixture: { generations: [{ pages: [{ tools: [{ name: 7 }, { nope: true }] }] }] },
    });
    expect((await c.request('tools/list')).result).toMatchObject({
      tools: [{ name: 7 }, { nope: true }],
      resultType: 'complete',
    });
  });
});

describe('the dual-era front', () => {
  it('offers both versions, and a client opening with initialize gets a 2025 session (SDK 1.32.2 client)', async () => {
    const c = start({ scenario: 'single', era: 'dual' });
    expect((await c.request('server/discover')).result).toMatchObject({
      supportedVersions: ['2026-07-28', '2025-11-25'],
    });
    await using trail = tempAudit('dual');
    const transport = new StdioClientTransport({
      ...stdioServerParams({ scenario: 'single', era: 'dual', auditPath: trail.path }),
      stderr: 'pipe',
    });
    const client = new Client({ name: 'dual-test', version: '0.0.0' });
    await client.connect(transport);
    try {
      expect(client.getServerVersion()).toEqual({
        name: 'stepbind-testkit-single',
        version: '0.1.0',
      });
      const listed = await client.listTools();
      expect(listed.tools.map((t) => t.name)).toEqual(['alpha', 'beta']);
      expect(listed).not.toHaveProperty('resultType');
    } finally {
      await client.close();
    }
    expect((await readAuditTrail(trail.path)).map((e) => e.method)).toEqual([
      'initialize',
      'notifications/initialized',
      'tools/list',
    ]);
  });

  it('is modern to stepbind (which probes first) and 2025 to stepbind without the probe', async () => {
    const config = parseConfig({
      mcpServers: { d: stdioServerParams({ scenario: 'single', era: 'dual' }) },
    }).servers.get('d');
    if (config === undefined) throw new Error('no config');
    const modern = await connectServer('d', config);
    try {
      expect([modern.era, modern.hello.protocolVersion]).toEqual(['modern', '2026-07-28']);
    } finally {
      await modern.close();
    }
    const legacy = await connectServer('d', config, { probeTimeoutMs: 0 });
    try {
      expect([legacy.era, legacy.hello.protocolVersion]).toEqual(['legacy', '2025-11-25']);
    } finally {
      await legacy.close();
    }
  });
});
