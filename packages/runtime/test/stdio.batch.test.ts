import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { StdioProcessTransport } from '../src/transports/stdio.js';

// A real child that answers every chunk it reads from stdin with the ids of the lines in it, so
// the test sees how the transport's writes reach the pipe.
const ECHO_CHUNKS = `
process.stdin.on('data', (chunk) => {
  const ids = chunk.toString().split('\\n').filter((l) => l !== '').map((l) => JSON.parse(l).id);
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: ids } }) + '\\n');
});`;

const open = new Set<StdioProcessTransport>();
afterEach(async () => {
  await Promise.all([...open].map((t) => t.close()));
  open.clear();
});

async function start(): Promise<{
  transport: StdioProcessTransport;
  nextChunk: () => Promise<number[]>;
}> {
  const transport = new StdioProcessTransport({
    server: 'chunks',
    command: process.execPath,
    args: ['-e', ECHO_CHUNKS],
    env: {},
    stderr: 'inherit',
    maxMessageBytes: 1 << 20,
    closeGraceMs: 200,
  });
  open.add(transport);
  const chunks: number[][] = [];
  const waiting: ((ids: number[]) => void)[] = [];
  transport.onmessage = (message: JSONRPCMessage) => {
    const ids = ('params' in message ? message.params?.['data'] : undefined) as number[];
    const wake = waiting.shift();
    if (wake === undefined) chunks.push(ids);
    else wake(ids);
  };
  await transport.start();
  const nextChunk = (): Promise<number[]> => {
    const ids = chunks.shift();
    return ids === undefined
      ? new Promise((resolve) => waiting.push(resolve))
      : Promise.resolve(ids);
  };
  return { transport, nextChunk };
}

const call = (id: number): JSONRPCMessage => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 't' },
});

describe('stdio writes', () => {
  it('sends the messages of one turn in one write while requests are in flight, and a lone request at once', async () => {
    const { transport, nextChunk } = await start();
    // Nothing in flight: written at once, alone.
    await transport.send(call(1));
    expect(await nextChunk()).toEqual([1]);
    // Request 1 stays unanswered. Each batch is under PIPE_BUF bytes, so one write of it reaches
    // the child whole; one write per message would let the child read between them.
    let id = 2;
    for (let round = 0; round < 20; round++) {
      const ids = Array.from({ length: 30 }, () => id++);
      const sends = ids.map((i) => transport.send(call(i)));
      await Promise.all(sends);
      expect(await nextChunk()).toEqual(ids);
    }
  });
});
