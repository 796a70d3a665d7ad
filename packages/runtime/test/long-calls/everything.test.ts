import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { isStepbindError, type CallProgress, type StepbindError } from '@stepbind/binding';
import { isProcessAlive } from '@stepbind/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { McpRuntime } from '../../src/index.js';

/** `server-everything` 2026.8.31: its `trigger-long-running-operation` reports progress per step. */
const ENTRY = fileURLToPath(
  new URL(
    '../../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
    import.meta.url,
  ),
);
const TOOL = 'everything__trigger-long-running-operation';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const children: ChildProcessWithoutNullStreams[] = [];

beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  trace.disable();
  await provider.shutdown();
});
afterEach(async () => {
  exporter.reset();
  const pids = children.map((c) => c.pid);
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child.once('close', resolve));
      child.kill('SIGKILL');
      await gone;
    }
  }
  expect(pids.filter((pid) => pid !== undefined && isProcessAlive(pid))).toEqual([]);
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** server-everything in streamableHttp mode; resolves with its URL once it listens. */
async function everythingHttp(): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [ENTRY, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    const onLine = (line: string): void => {
      if (line.includes(`listening on port ${port}`)) resolve();
    };
    createInterface({ input: child.stdout }).on('line', onLine);
    createInterface({ input: child.stderr }).on('line', onLine);
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}`)));
  });
  return `http://127.0.0.1:${port}/mcp`;
}

const transports = {
  stdio: () => Promise.resolve({ command: process.execPath, args: [ENTRY, 'stdio'] }),
  'Streamable HTTP': async () => ({ url: await everythingHttp() }),
};

async function open(transport: keyof typeof transports): Promise<McpRuntime> {
  const server = await transports[transport]();
  return McpRuntime.open({ mcpServers: { everything: server } }, { approval: 'none' });
}

async function failure(promise: Promise<unknown>): Promise<StepbindError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isStepbindError(error)) throw new Error(`expected a StepbindError, got ${String(error)}`);
  return error;
}

describe.each(Object.keys(transports) as (keyof typeof transports)[])(
  'long calls against server-everything over %s',
  (transport) => {
    it('delivers its progress in order with the total, each one an mcp.progress span event', async () => {
      await using runtime = await open(transport);
      await using step = await runtime.captureBinding();
      const seen: CallProgress[] = [];
      const { result } = await step
        .prepareCall(TOOL)
        .run({ duration: 0.4, steps: 4 }, { onProgress: (p) => seen.push(p) });
      expect(JSON.stringify(result.content)).toContain('Long running operation completed');
      expect(seen).toEqual([1, 2, 3, 4].map((progress) => ({ progress, total: 4 })));
      const span = exporter
        .getFinishedSpans()
        .find((s) => s.name === 'tools/call trigger-long-running-operation');
      expect(span?.events.map((e) => [e.name, e.attributes])).toEqual(
        [1, 2, 3, 4].map((value) => [
          'mcp.progress',
          { 'mcp.progress.value': value, 'mcp.progress.total': 4 },
        ]),
      );
    });

    it('outlives a timeout shorter than the operation with resetTimeoutOnProgress, and times out without it', async () => {
      await using runtime = await open(transport);
      await using step = await runtime.captureBinding();
      const call = step.prepareCall(TOOL);
      const args = { duration: 1.6, steps: 8 };
      const { result } = await call.run(args, { timeoutMs: 1000, resetTimeoutOnProgress: true });
      expect(result.isError).not.toBe(true);
      const error = await failure(call.run(args, { timeoutMs: 1000, onProgress: () => undefined }));
      expect(error.code).toBe('TIMEOUT');
      expect(error.detail).toMatchObject({ delivery: 'sent', timeoutMs: 1000 });
    });

    it('is ended by maxTotalTimeoutMs although progress keeps coming', async () => {
      await using runtime = await open(transport);
      await using step = await runtime.captureBinding();
      const error = await failure(
        step
          .prepareCall(TOOL)
          .run(
            { duration: 4, steps: 16 },
            { timeoutMs: 800, resetTimeoutOnProgress: true, maxTotalTimeoutMs: 1200 },
          ),
      );
      expect(error.code).toBe('TIMEOUT');
      expect(error.detail).toMatchObject({ delivery: 'sent', maxTotalTimeoutMs: 1200 });
    });

    it('an abort during the operation is ABORTED with delivery sent, and the connection stays usable', async () => {
      await using runtime = await open(transport);
      await using step = await runtime.captureBinding();
      const controller = new AbortController();
      const error = await failure(
        step.prepareCall(TOOL).run(
          { duration: 10, steps: 50 },
          {
            signal: controller.signal,
            onProgress: (p) => {
              if (p.progress === 2) controller.abort();
            },
          },
        ),
      );
      expect(error.code).toBe('ABORTED');
      expect(error.detail['delivery']).toBe('sent');
      const { result } = await step.prepareCall('everything__echo').run({ message: 'still here' });
      expect(JSON.stringify(result.content)).toContain('still here');
    });
  },
);
