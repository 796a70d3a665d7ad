/**
 * OpenTelemetry instrumentation through `@opentelemetry/api` only: every span and metric is a no-op
 * until the application installs an OpenTelemetry SDK. Names follow the OpenTelemetry semantic
 * conventions for MCP (development status): a CLIENT span `{mcp.method.name} {target}` per request
 * with `mcp.method.name`, `mcp.session.id`, `mcp.protocol.version`, `jsonrpc.request.id`,
 * `gen_ai.tool.name`, `gen_ai.operation.name`, `network.transport` and `error.type`; the trace context
 * is injected into the request's `params._meta`; the `mcp.client.operation.duration` histogram (s).
 * Each accepted progress report of a `tools/call` is an `mcp.progress` span event with its numbers.
 * Arguments, results, progress messages, header values and environment values are never recorded.
 */
import {
  context,
  createNoopMeter,
  INVALID_SPAN_CONTEXT,
  metrics,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Histogram,
  type MeterProvider,
  type Span,
  type TracerProvider,
} from '@opentelemetry/api';
import { StepbindError, type CallProgress } from '@stepbind/binding/internal';

/** The instrumentation scope of every span and metric. */
export const TELEMETRY_SCOPE = '@stepbind/runtime';

/** One MCP request as the conventions describe it. */
export interface McpOperation {
  /** `tools/call`, `tools/list`, `initialize`... */
  readonly method: string;
  /** Low-cardinality target for the span name (the tool name of a `tools/call`). */
  readonly target?: string;
  /** The configured server name (`stepbind.server`). */
  readonly server: string;
  readonly sessionId?: string;
  readonly protocolVersion?: string;
  /** `pipe` for stdio, `tcp` for HTTP. */
  readonly transport?: 'pipe' | 'tcp';
  readonly attributes?: Attributes;
}

/** What the traced function receives. */
export interface TracedRequest {
  readonly span: Span;
  /** Trace context to put into the request's `params._meta` (empty when nothing is sampled). */
  readonly meta: Readonly<Record<string, string>>;
}

let durationProvider: MeterProvider | undefined;
let duration: Histogram | undefined;
/** The instrument every no-op meter hands out (one shared instance): recording into it is skipped. */
const NOOP_HISTOGRAM = createNoopMeter().createHistogram('noop');

function durationHistogram(): Histogram | undefined {
  // The metrics API has no proxy: re-resolve when the application installs a provider later.
  const provider = metrics.getMeterProvider();
  if (duration === undefined || provider !== durationProvider) {
    durationProvider = provider;
    duration = provider.getMeter(TELEMETRY_SCOPE).createHistogram('mcp.client.operation.duration', {
      unit: 's',
      description:
        'The duration of the MCP request as observed on the sender, from the time it was sent until the response is received.',
      advice: {
        explicitBucketBoundaries: [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
      },
    });
  }
  return duration === NOOP_HISTOGRAM ? undefined : duration;
}

/** The global tracer provider {@link tracesNothing} last looked at, and its answer. */
let seenTracerProvider: TracerProvider | undefined;
let seenTracerDelegate: TracerProvider | undefined;
let seenTracesNothing = false;
/** The no-op provider the API's proxy hands spans to until an SDK registers (one per API copy). */
const NOOP_TRACER_PROVIDER = (trace.getTracerProvider() as ProxyLike).getDelegate?.();

/** The API's `ProxyTracerProvider`, as far as this module reads it. */
interface ProxyLike extends TracerProvider {
  getDelegate?(): TracerProvider;
}

/**
 * True when no span can record: the global tracer provider is the API's proxy and it still
 * delegates to the API's no-op provider (no SDK installed). Decided again only when the provider
 * or its delegate changes, so a call without an SDK pays two identity checks, not a tracer lookup
 * and a span.
 */
function tracesNothing(): boolean {
  const provider = trace.getTracerProvider() as ProxyLike;
  const delegate = provider.getDelegate?.();
  if (provider !== seenTracerProvider || delegate !== seenTracerDelegate) {
    seenTracerProvider = provider;
    seenTracerDelegate = delegate;
    seenTracesNothing = delegate !== undefined && delegate === NOOP_TRACER_PROVIDER;
  }
  return seenTracesNothing;
}

/**
 * True when a request would record nothing (no tracer provider and no meter provider installed):
 * a caller may then skip describing the operation and call {@link traceRequest}'s `run` with
 * {@link UNTRACED} itself. Re-decided whenever a provider changes.
 */
export function telemetryOff(): boolean {
  return tracesNothing() && durationHistogram() === undefined;
}

/** The request a `run` gets when nothing records: a span that records nothing and no `_meta`. */
export const UNTRACED: TracedRequest = Object.freeze({
  span: trace.wrapSpanContext(INVALID_SPAN_CONTEXT),
  meta: Object.freeze({}) as Readonly<Record<string, string>>,
});

/**
 * Runs one MCP request inside a CLIENT span and records its duration. `errorTypeOf` names a failure
 * that is not an exception (a `tools/call` result with `isError: true` gives `tool_error`).
 */
export function traceRequest<T>(
  op: McpOperation,
  run: (request: TracedRequest) => Promise<T>,
  errorTypeOf?: (value: T) => string | undefined,
): Promise<T> {
  if (telemetryOff()) return run(UNTRACED);
  const span = trace
    .getTracer(TELEMETRY_SCOPE)
    .startSpan(op.target === undefined ? op.method : `${op.method} ${op.target}`, {
      kind: SpanKind.CLIENT,
    });
  const histogram = durationHistogram();
  // Without an SDK nothing records: run the request as it is, with no attributes, propagation,
  // context switch or extra await (this is on the path of every tools/call).
  if (!span.isRecording() && histogram === undefined) return run({ span, meta: NO_META });
  return traced(op, span, histogram, run, errorTypeOf);
}

/**
 * Runs one `tools/call` inside its CLIENT span (see {@link traceRequest}): `run` gets the trace
 * context for `params._meta`, a listener that puts the JSON-RPC id on the span, and the span; a
 * result with `isError: true` is `error.type` `tool_error`.
 */
export function traceToolCall<T extends { readonly isError?: boolean | undefined }>(
  call: {
    readonly tool: string;
    readonly server: string;
    readonly sessionId: string | undefined;
    readonly protocolVersion: string | undefined;
    readonly transport: 'pipe' | 'tcp' | undefined;
  },
  run: (
    meta: Readonly<Record<string, string>>,
    onRequestId: (id: string | number) => void,
    span: Span,
  ) => Promise<T>,
): Promise<T> {
  const { tool, server, sessionId, protocolVersion, transport } = call;
  return traceRequest(
    {
      method: 'tools/call',
      target: tool,
      server,
      ...(sessionId === undefined ? {} : { sessionId }),
      ...(protocolVersion === undefined ? {} : { protocolVersion }),
      ...(transport === undefined ? {} : { transport }),
    },
    ({ span, meta }) =>
      run(
        meta,
        (id) => {
          span.setAttribute('jsonrpc.request.id', String(id));
        },
        span,
      ),
    (result) => (result.isError === true ? 'tool_error' : undefined),
  );
}

async function traced<T>(
  op: McpOperation,
  span: Span,
  histogram: Histogram | undefined,
  run: (request: TracedRequest) => Promise<T>,
  errorTypeOf: ((value: T) => string | undefined) | undefined,
): Promise<T> {
  let meta: Record<string, string> = NO_META;
  let active: Context | undefined;
  if (span.isRecording()) {
    span.setAttributes({
      ...commonAttributes(op),
      'stepbind.server': op.server,
      ...(op.sessionId === undefined ? {} : { 'mcp.session.id': op.sessionId }),
      ...op.attributes,
    });
    active = trace.setSpan(context.active(), span);
    meta = {};
    propagation.inject(active, meta);
  }
  const started = performance.now();
  let errorType: string | undefined;
  try {
    const value = await (active === undefined
      ? run({ span, meta })
      : context.with(active, () => run({ span, meta })));
    errorType = errorTypeOf?.(value);
    if (errorType !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: errorType });
    return value;
  } catch (error) {
    errorType = error instanceof StepbindError ? error.code : 'Error';
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    throw error;
  } finally {
    if (errorType !== undefined) span.setAttribute('error.type', errorType);
    span.end();
    histogram?.record((performance.now() - started) / 1000, {
      ...commonAttributes(op),
      ...(errorType === undefined ? {} : { 'error.type': errorType }),
    });
  }
}

const NO_META: Record<string, string> = Object.freeze({});

function commonAttributes(op: McpOperation): Attributes {
  return {
    'mcp.method.name': op.method,
    ...(op.protocolVersion === undefined ? {} : { 'mcp.protocol.version': op.protocolVersion }),
    ...(op.transport === undefined ? {} : { 'network.transport': op.transport }),
    ...(op.method === 'tools/call' && op.target !== undefined
      ? { 'gen_ai.tool.name': op.target, 'gen_ai.operation.name': 'execute_tool' }
      : {}),
  };
}

/**
 * Runs a whole discovery of one server inside an INTERNAL span `stepbind.discover {server}`; the
 * page requests are its children. `pagesOf` reads the page count for `stepbind.discovery.pages`.
 */
export async function traceDiscovery<T>(
  server: string,
  run: () => Promise<T>,
  pagesOf: (value: T) => number,
): Promise<T> {
  const span = trace.getTracer(TELEMETRY_SCOPE).startSpan(`stepbind.discover ${server}`, {
    kind: SpanKind.INTERNAL,
    attributes: { 'stepbind.server': server },
  });
  try {
    const value = await context.with(trace.setSpan(context.active(), span), run);
    span.setAttribute('stepbind.discovery.pages', pagesOf(value));
    return value;
  } catch (error) {
    span.setAttribute('error.type', error instanceof StepbindError ? error.code : 'Error');
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    throw error;
  } finally {
    span.end();
  }
}

/**
 * Records one accepted progress report on a `tools/call` span: an `mcp.progress` event with
 * `mcp.progress.value` and, when known, `mcp.progress.total`. The server's message is not recorded
 * (it is server text, like a result).
 */
export function recordProgress(span: Span, progress: CallProgress): void {
  if (!span.isRecording()) return;
  span.addEvent('mcp.progress', {
    'mcp.progress.value': progress.progress,
    ...(progress.total === undefined ? {} : { 'mcp.progress.total': progress.total }),
  });
}
