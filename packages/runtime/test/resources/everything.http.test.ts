import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { McpRuntime } from '@stepbind/runtime';
import { isProcessAlive } from '@stepbind/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { within } from '../support/wait.js';

const entry = fileURLToPath(
  new URL(
    '../../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
    import.meta.url,
  ),
);

let child: ChildProcessWithoutNullStreams;
let runtime: McpRuntime;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

beforeAll(async () => {
  const port = await freePort();
  child = spawn(process.execPath, [entry, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const listening = new Promise<void>((resolve) => {
    const onLine = (line: string): void => {
      if (line.includes(`listening on port ${port}`)) resolve();
    };
    createInterface({ input: child.stdout }).on('line', onLine);
    createInterface({ input: child.stderr }).on('line', onLine);
  });
  await within(listening, 'server-everything listening');
  runtime = await McpRuntime.open(
    { mcpServers: { everything: { url: `http://127.0.0.1:${port}/mcp` } } },
    { approval: 'none' },
  );
}, 60_000);

afterAll(async () => {
  await runtime.close();
  const pid = child.pid;
  if (child.exitCode === null && child.signalCode === null) {
    const gone = new Promise((resolve) => child.once('close', resolve));
    child.kill('SIGKILL');
    await gone;
  }
  expect(pid !== undefined && isProcessAlive(pid)).toBe(false);
});

describe('server-everything over Streamable HTTP: resources and prompts', () => {
  it('captures the lists, reads a returned resource_link and gets a prompt on the same session', async () => {
    await using step = await runtime.captureBinding();
    expect(step.resources.length).toBe(7);
    expect(step.prompts.map((p) => p.modelName)).toContain('everything__simple-prompt');
    const { result } = await step.prepareCall('everything__get-resource-links').run({ count: 1 });
    const link = result.content?.find((b) => b.type === 'resource_link');
    const uri = link?.type === 'resource_link' ? link.uri : '';
    const read = await step.readResource(uri);
    expect(read).toMatchObject({ server: 'everything', uri });
    const prompt = await step.getPrompt('everything__simple-prompt');
    expect(prompt.messages.length).toBeGreaterThan(0);
    const done = await step.complete(
      { type: 'ref/prompt', name: 'everything__completable-prompt' },
      { name: 'department', value: 'Mar' },
    );
    expect(done.values).toContain('Marketing');
  });

  it('delivers notifications/resources/updated of a subscription over the session', async () => {
    await using step = await runtime.captureBinding();
    const uri = 'demo://resource/static/document/architecture.md';
    let heard: (uri: string) => void = () => undefined;
    const updated = new Promise<string>((resolve) => {
      heard = resolve;
    });
    const unsubscribe = await step.subscribeResource(uri, (u) => heard(u));
    await step.prepareCall('everything__toggle-subscriber-updates').run({});
    expect(await within(updated, 'a resources/updated notification')).toBe(uri);
    await unsubscribe();
    await step.prepareCall('everything__toggle-subscriber-updates').run({});
  });
});
