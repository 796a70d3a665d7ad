import { rmSync } from 'node:fs';
import { parseConfig, type Connection } from '@stepbind/runtime';
import { connectServer } from '@stepbind/runtime/internal';
import { stdioServerParams, tempAuditPath, type ServerFixture } from '@stepbind/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { waitUntilGone } from './support/processes.js';
import { TEST_ERA, TEST_PROTOCOL_VERSION } from './support/era.js';
import { failure } from './support/errors.js';

const fixture: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: ['work', 'crash', 'slow'].map((name) => ({
            name,
            inputSchema: { type: 'object' },
          })),
        },
      ],
    },
  ],
  triggers: [
    { on: { method: 'tools/call', tool: 'crash' }, exit: 9 },
    { on: { method: 'tools/call', tool: 'slow' }, delayMs: 5_000 },
  ],
};

const open: Connection[] = [];
const files: string[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) {
    await c.close();
    if (c.pid !== undefined) await waitUntilGone(c.pid);
  }
  for (const f of files.splice(0)) rmSync(f, { force: true });
});

async function connect(): Promise<Connection> {
  const auditPath = tempAuditPath('delivery');
  files.push(auditPath);
  const config = parseConfig({
    mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture, auditPath }) },
  }).servers.get('s');
  if (config === undefined) throw new Error('no config');
  const connection = await connectServer('s', config);
  open.push(connection);
  expect([connection.era, connection.hello.protocolVersion]).toEqual([
    TEST_ERA,
    TEST_PROTOCOL_VERSION,
  ]);
  return connection;
}

describe('SdkConnection.callTool delivery (real stdio server)', () => {
  it('reports a connection lost after the request was written as OUTCOME_UNKNOWN, delivery sent', async () => {
    const connection = await connect();
    const error = await failure(connection.callTool('crash', {}, { timeoutMs: 10_000 }));
    expect(error.code).toBe('OUTCOME_UNKNOWN');
    expect(error.detail).toMatchObject({ server: 's', tool: 'crash', delivery: 'sent' });
    expect(error.message).toContain('may or may not have run');
  });

  it('reports a call on a closed connection as CONNECTION_CLOSED, delivery not-sent', async () => {
    const connection = await connect();
    await connection.close();
    const error = await failure(connection.callTool('work', {}, { timeoutMs: 10_000 }));
    expect(error.code).toBe('CONNECTION_CLOSED');
    expect(error.detail['delivery']).toBe('not-sent');
  });

  it('reports a timeout after sending as TIMEOUT, delivery sent, and an answered call as a result', async () => {
    const connection = await connect();
    const error = await failure(connection.callTool('slow', {}, { timeoutMs: 50 }));
    expect(error.code).toBe('TIMEOUT');
    expect(error.detail['delivery']).toBe('sent');
    await expect(connection.callTool('work', {}, { timeoutMs: 10_000 })).resolves.toMatchObject({
      content: [{ type: 'text', text: 'work ok' }],
    });
  });

  it('reports an abort after sending as ABORTED, delivery sent', async () => {
    const connection = await connect();
    const controller = new AbortController();
    const running = connection.callTool(
      'slow',
      {},
      { timeoutMs: 10_000, signal: controller.signal },
    );
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    const error = await failure(running);
    expect(error.code).toBe('ABORTED');
    expect(error.detail['delivery']).toBe('sent');
  });
});
