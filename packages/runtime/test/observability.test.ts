import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { metrics, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { McpRuntime, type RuntimeEvent } from '@stepbind/runtime';
import { runCli } from '../src/cli/run.js';
import { createInMemoryFleet, scriptedTool, stdioServerParams } from '@stepbind/testkit';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { debugEnabled, setDebugSink } from '../src/log.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let dir: string;
beforeAll(async () => {
  trace.setGlobalTracerProvider(provider);
  dir = await mkdtemp(join(tmpdir(), 'stepbind-observability-'));
});
afterAll(async () => {
  trace.disable();
  await provider.shutdown();
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => exporter.reset());

const pagesOf = (n: number): { tools: ReturnType<typeof scriptedTool>[] }[] =>
  Array.from({ length: n }, (_, i) => ({ tools: [scriptedTool(`t${i}`)] }));

describe('observability', () => {
  it('emits one discovery-page event per page and a discovery span with the page count', async () => {
    const fleet = createInMemoryFleet({
      big: { scenario: 'fixture', fixture: { generations: [{ pages: pagesOf(40) }] } },
    });
    const events: RuntimeEvent[] = [];
    await using runtime = await McpRuntime.open(fleet.config(), {
      connect: fleet.connect,
      onEvent: (e) => events.push(e),
    });
    const pages = events.filter((e) => e.type === 'discovery-page');
    expect(pages).toHaveLength(40);
    expect(pages.at(-1)).toMatchObject({ server: 'big', page: 40, totalTools: 40 });
    const span = exporter.getFinishedSpans().find((s) => s.name === 'stepbind.discover big');
    expect(span?.attributes).toMatchObject({
      'stepbind.server': 'big',
      'stepbind.discovery.pages': 40,
    });
    void runtime;
    await fleet.close();
  });

  it('logs under DEBUG=stepbind:* and honours exclusions', async () => {
    expect(debugEnabled('stepbind:*', 'stepbind:discovery')).toBe(true);
    expect(debugEnabled('stepbind:*,-stepbind:discovery', 'stepbind:discovery')).toBe(false);
    expect(debugEnabled('other', 'stepbind:discovery')).toBe(false);
    expect(debugEnabled(undefined, 'stepbind:discovery')).toBe(false);
    const lines: string[] = [];
    const restore = setDebugSink({ debug: 'stepbind:*', write: (l) => lines.push(l) });
    try {
      const fleet = createInMemoryFleet({ a: { scenario: 'normal' } });
      const runtime = await McpRuntime.open(fleet.config(), { connect: fleet.connect });
      await runtime.close();
      await fleet.close();
    } finally {
      restore();
    }
    expect(lines.some((l) => l.startsWith('stepbind:discovery server "a": page 3'))).toBe(true);
    expect(lines.some((l) => l.startsWith('stepbind:events server-ready'))).toBe(true);
  });

  it('shows live progress in the CLI when given a progress sink, and clears it', async () => {
    const path = join(dir, 'progress.json');
    await writeFile(
      path,
      JSON.stringify({ mcpServers: { normal: stdioServerParams({ scenario: 'normal' }) } }),
    );
    const progress: string[] = [];
    let out = '';
    const code = await runCli(['catalog', '--config', path], {
      stdout: (t) => (out += t),
      stderr: () => undefined,
      progress: (line) => progress.push(line),
    });
    expect(code).toBe(0);
    expect(progress).toContain('discovering: normal page 3 (3 tools)');
    expect(progress.at(-1)).toBe('');
    expect(out).toContain('normal: 3 tools');
  });

  it('delivers server stderr lines and MCP log notifications as events (real stdio servers)', async () => {
    const scripted = stdioServerParams({ scenario: 'single' });
    const require = createRequire(import.meta.url);
    const everything = join(
      dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')),
      'dist',
      'index.js',
    );
    let gotLine: (line: string) => void = () => undefined;
    const line = new Promise<string>((resolve) => (gotLine = resolve));
    let gotLog: (event: RuntimeEvent) => void = () => undefined;
    const log = new Promise<RuntimeEvent>((resolve) => (gotLog = resolve));
    await using runtime = await McpRuntime.open(
      {
        mcpServers: {
          // A wrapper that says something on stderr before it becomes the server.
          noisy: {
            command: 'sh',
            args: [
              '-c',
              'echo "warming up the cache" >&2; exec "$@"',
              'sh',
              scripted.command,
              ...scripted.args,
            ],
          },
          everything: { command: process.execPath, args: [everything, 'stdio'], approval: 'none' },
          quiet: { ...stdioServerParams({ scenario: 'single' }), stderr: 'ignore' },
        },
      },
      {
        onEvent: (e) => {
          if (e.type === 'server-stderr' && e.server === 'noisy') gotLine(e.line);
          if (e.type === 'server-log') gotLog(e);
        },
      },
    );
    expect(await line).toBe('warming up the cache');
    await using step = await runtime.captureBinding();
    await step.prepareCall('everything__toggle-simulated-logging').run({});
    expect(await log).toMatchObject({
      type: 'server-log',
      server: 'everything',
      level: expect.any(String),
    });
  });

  it('traces each tools/call as a CLIENT span after the MCP conventions, propagates it in params._meta and records its duration', async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({
      exporter: metricExporter,
      exportIntervalMillis: 3_600_000,
    });
    const meters = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meters);
    const fleet = createInMemoryFleet({
      s: {
        scenario: 'fixture',
        fixture: {
          generations: [{ pages: [{ tools: [scriptedTool('ok'), scriptedTool('bad')] }] }],
          calls: { bad: { isError: true, text: 'no' } },
        },
      },
    });
    try {
      await using runtime = await McpRuntime.open(fleet.config(), {
        connect: fleet.connect,
        approval: 'none',
      });
      await using step = await runtime.captureBinding();
      await step.prepareCall('s__ok').run({});
      await step.prepareCall('s__bad').run({});
      const spans = exporter.getFinishedSpans().filter((s) => s.name.startsWith('tools/call'));
      expect(spans.map((s) => s.name)).toEqual(['tools/call ok', 'tools/call bad']);
      const [ok, bad] = spans;
      expect(ok?.kind).toBe(2); // SpanKind.CLIENT
      expect(ok?.attributes).toMatchObject({
        'mcp.method.name': 'tools/call',
        'gen_ai.tool.name': 'ok',
        'gen_ai.operation.name': 'execute_tool',
        'mcp.protocol.version': expect.any(String),
        'jsonrpc.request.id': expect.any(String),
        'stepbind.server': 's',
      });
      expect(ok?.status.code).toBe(0);
      expect(bad?.status.code).toBe(2); // ERROR for an isError result
      expect(bad?.attributes['error.type']).toBe('tool_error');
      // The server received the span's trace context in params._meta.
      const received = fleet.audit('s').filter((e) => e.method === 'tools/call');
      const traceparent = received[0]?.meta?.['traceparent'];
      expect(traceparent).toBe(`00-${ok?.spanContext().traceId}-${ok?.spanContext().spanId}-01`);
      await reader.forceFlush();
      const histogram = metricExporter
        .getMetrics()
        .flatMap((m) => m.scopeMetrics.flatMap((s) => s.metrics))
        .find((m) => m.descriptor.name === 'mcp.client.operation.duration');
      expect(histogram?.descriptor.unit).toBe('s');
      expect(histogram?.dataPoints.length).toBeGreaterThanOrEqual(2);
    } finally {
      await fleet.close();
      await meters.shutdown();
      metrics.disable();
      propagation.disable();
    }
  });
});
