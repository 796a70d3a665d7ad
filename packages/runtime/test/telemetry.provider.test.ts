/**
 * Issue 20 / DESIGN §21.2: a `tools/call` decides "nothing records" once per tracer provider and
 * skips its span; installing or removing an OpenTelemetry SDK between calls is seen by the next
 * call (the cached decision follows the provider and its delegate).
 */
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { McpRuntime } from '@stepbind/runtime';
import { createInMemoryFleet } from '@stepbind/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { telemetryOff } from '../src/telemetry.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

afterAll(async () => {
  trace.disable();
  await provider.shutdown();
});

describe('telemetry decision per provider', () => {
  it('spans a tools/call only while a tracer provider is installed, decided again when it changes', async () => {
    trace.disable();
    const fleet = createInMemoryFleet({ s: { scenario: 'single' } });
    const runtime = await McpRuntime.open(fleet.config(), {
      connect: fleet.connect,
      approval: 'none',
    });
    const binding = await runtime.captureBinding();
    try {
      const tool = binding.tools.find((t) => t.name.endsWith('__alpha'));
      if (tool === undefined) throw new Error('no alpha tool');
      const call = binding.prepareCall(tool.name);
      const callSpans = (): number =>
        exporter.getFinishedSpans().filter((s) => s.name === 'tools/call alpha').length;

      expect(telemetryOff()).toBe(true);
      await call.run({ input: 'a' });
      expect(callSpans()).toBe(0);

      // An SDK installed after calls were made: the very next call records.
      trace.setGlobalTracerProvider(provider);
      expect(telemetryOff()).toBe(false);
      await call.run({ input: 'b' });
      expect(callSpans()).toBe(1);
      const span = exporter.getFinishedSpans().find((s) => s.name === 'tools/call alpha');
      expect(span?.attributes).toMatchObject({
        'mcp.method.name': 'tools/call',
        'gen_ai.tool.name': 'alpha',
        'stepbind.server': 's',
      });
      expect(span?.attributes['jsonrpc.request.id']).toBeTypeOf('string');

      // Removed again: back to no span.
      trace.disable();
      expect(telemetryOff()).toBe(true);
      await call.run({ input: 'c' });
      expect(callSpans()).toBe(1);
    } finally {
      binding.release();
      await runtime.close();
      await fleet.close();
    }
  });
});
