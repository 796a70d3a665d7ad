/**
 * Progress of long `tools/call`s, the same in both protocol eras (DESIGN §20.1): each call that
 * asks for progress gets a token of its connection's {@link ProgressRoutes}; a
 * `notifications/progress` is routed by that token to the call's {@link CallProgressWatch}, which
 * bounds it ({@link ProgressGate}), restarts the call's timeout when asked to, records it on the
 * call's span and tells the caller. A report for a token no call holds (late, or never issued) is
 * dropped.
 *
 * @packageDocumentation
 */
import type { Span } from '@opentelemetry/api';
import {
  ErrorCode,
  MAX_TIMER_MS,
  onAbort,
  ProgressGate,
  RuntimeError,
  type Delivery,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { CallRequestOptions } from './connection.js';
import { recordProgress } from './telemetry.js';

/** What ended a call whose timeout progress extends. */
export type ProgressTimeout = 'idle' | 'total';

/** Where a watched call runs, for its timeout error. */
export interface WatchedCall {
  readonly server: string;
  readonly tool: string;
  /** The call's delivery when its timer fires. */
  readonly delivery: () => Delivery;
  /** The call's span: each accepted report is an `mcp.progress` event. */
  readonly span?: Span | undefined;
}

/** True when `options` ask for progress: only then does the call carry a progress token. */
export function wantsProgress(options: CallRequestOptions): boolean {
  return options.onProgress !== undefined || options.resetTimeoutOnProgress === true;
}

/**
 * The progress side of one call. With `resetTimeoutOnProgress` it owns the call's timeout: the
 * idle timer (`timeoutMs`, restarted by each accepted report while armed) and the total cap
 * (`maxTotalTimeoutMs` from {@link start}); the connection then gives its own request no shorter
 * timer. Without it, timing stays the connection's (exactly as without progress).
 */
export class CallProgressWatch {
  readonly token: string;
  readonly #options: CallRequestOptions;
  readonly #call: WatchedCall;
  readonly #gate = new ProgressGate();
  #idle: ReturnType<typeof setTimeout> | undefined;
  #total: ReturnType<typeof setTimeout> | undefined;
  #armed = false;
  #ended = false;
  /** The `TIMEOUT` error, once the reset timeout or the total cap ended the call. */
  timedOut: StepbindError | undefined;
  /**
   * Told once, when the reset timeout or the total cap ends the call, with the `TIMEOUT` error: the
   * connection cancels its request with it (`notifications/cancelled` is sent).
   */
  onTimeout: (error: StepbindError) => void = () => undefined;

  constructor(token: string, options: CallRequestOptions, call: WatchedCall) {
    this.token = token;
    this.#options = options;
    this.#call = call;
  }

  /** True when this watch, not the connection's request, owns the call's timeout. */
  get ownsTimeout(): boolean {
    return this.#options.resetTimeoutOnProgress === true;
  }

  /** Starts delivering, the total cap and the idle timer (the timers only when {@link ownsTimeout}). */
  start(): void {
    if (this.#ended) return;
    const cap = this.#options.maxTotalTimeoutMs;
    if (this.ownsTimeout && cap !== undefined) {
      this.#total = setTimeout(() => this.#fire('total'), cap);
    }
    this.arm();
  }

  /**
   * Delivers from now on and (re)starts the idle timer: at the start and at each request of the
   * call (MRTR rounds).
   */
  arm(): void {
    if (this.#ended) return;
    this.#armed = true;
    if (!this.ownsTimeout) return;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => this.#fire('idle'), this.#options.timeoutMs);
  }

  /**
   * Stops delivering and the idle timer: called synchronously when the request's answer arrives
   * (so a report the server wrote after its result is never delivered), and while the call waits
   * on the application (an MRTR answer).
   */
  disarm(): void {
    this.#armed = false;
    clearTimeout(this.#idle);
    this.#idle = undefined;
  }

  /** One `notifications/progress` params object for this call's token. */
  receive(params: unknown): void {
    if (!this.#armed) return;
    const progress = this.#gate.accept(params);
    if (progress === undefined) return;
    if (this.ownsTimeout) this.arm();
    if (this.#call.span !== undefined) recordProgress(this.#call.span, progress);
    this.#options.onProgress?.(progress);
  }

  /** The call settled: timers cleared, nothing more delivered. Idempotent. */
  end(): void {
    this.#ended = true;
    this.disarm();
    clearTimeout(this.#total);
    this.#total = undefined;
  }

  #fire(kind: ProgressTimeout): void {
    if (this.#ended) return;
    this.end();
    this.timedOut = this.#timeoutError(kind);
    this.onTimeout(this.timedOut);
  }

  #timeoutError(kind: ProgressTimeout): StepbindError {
    const { server, tool } = this.#call;
    const delivery = this.#call.delivery();
    const sent = delivery === 'sent';
    const { timeoutMs, maxTotalTimeoutMs } = this.#options;
    const why =
      kind === 'idle'
        ? `timed out after ${timeoutMs} ms without progress`
        : `reached its maxTotalTimeoutMs of ${maxTotalTimeoutMs} ms`;
    return new RuntimeError(
      ErrorCode.TIMEOUT,
      `tools/call on server "${server}" (tool "${tool}") ${why}; a cancellation was sent${sent ? ', but the request may have run' : ''}. Check the server or raise the ${kind === 'idle' ? 'timeout' : 'cap'}.`,
      {
        detail: {
          server,
          tool,
          delivery,
          timeoutMs,
          ...(kind === 'total' ? { maxTotalTimeoutMs } : {}),
        },
      },
    );
  }
}

/** How one call's requests run under its progress watch (see {@link ProgressRoutes.run}). */
export interface WiredCall {
  /** The call's options, their signal the watch's own when it owns the timeout (it follows the caller's). */
  readonly options: CallRequestOptions;
  /**
   * `meta` with the call's progress token, when it asked for progress; `undefined` when that leaves
   * nothing to add to the request's `_meta`.
   */
  meta(meta: Readonly<Record<string, string>>): Readonly<Record<string, string>> | undefined;
  /**
   * Runs one request of the call with progress delivered. `send` gets what the request runs with:
   * its own timeout (`timeoutMs`, or 2^31−1 when the watch owns the timeout), the call's signal,
   * and `onSettled`, to be called synchronously when the request's answer arrives.
   */
  request<T>(send: (request: WiredRequest) => Promise<T>): Promise<T>;
}

/** What one request of a wired call runs with (see {@link WiredCall.request}). */
export interface WiredRequest {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  readonly onSettled?: () => void;
}

/** The progress tokens of one connection's calls in flight. */
export class ProgressRoutes {
  readonly #watches = new Map<string, CallProgressWatch>();
  #next = 0;

  /** A watch with a new token for one call; {@link close} it when the call settles. */
  open(options: CallRequestOptions, call: WatchedCall): CallProgressWatch {
    const watch = new CallProgressWatch(`stepbind-${++this.#next}`, options, call);
    this.#watches.set(watch.token, watch);
    return watch;
  }

  /** Routes one `notifications/progress` by its token; unknown tokens are dropped. */
  route(params: unknown): void {
    if (typeof params !== 'object' || params === null) return;
    const token: unknown = (params as Record<string, unknown>)['progressToken'];
    if (typeof token !== 'string') return;
    this.#watches.get(token)?.receive(params);
  }

  /**
   * Runs one call (`body`) under a watch when its options ask for progress (else as it is): the
   * token in its `_meta`, delivery armed while a request is in flight (and stopped when its answer
   * arrives), and with `resetTimeoutOnProgress` the watch's timers cancelling the request in flight
   * through a signal of the call's own; the watch is closed when the call settles.
   */
  async run<T>(
    options: CallRequestOptions,
    call: WatchedCall,
    body: (wired: WiredCall) => Promise<T>,
  ): Promise<T> {
    const { signal, timeoutMs } = options;
    if (!wantsProgress(options)) {
      const plain: WiredRequest = { timeoutMs, ...(signal === undefined ? {} : { signal }) };
      return body({
        options,
        meta: (meta) => (Object.keys(meta).length === 0 ? undefined : meta),
        request: (send) => send(plain),
      });
    }
    const watch = this.open(options, call);
    const owned = watch.ownsTimeout ? ownedSignal(signal) : undefined;
    if (owned !== undefined) watch.onTimeout = (error) => owned.controller.abort(error);
    watch.start();
    const callSignal = owned?.controller.signal ?? signal;
    const wired: WiredRequest = {
      timeoutMs: owned === undefined ? timeoutMs : MAX_TIMER_MS,
      ...(callSignal === undefined ? {} : { signal: callSignal }),
      onSettled: () => watch.disarm(),
    };
    try {
      return await body({
        options: callSignal === signal ? options : { ...options, signal: callSignal },
        meta: (meta) => ({ ...meta, progressToken: watch.token }),
        request: async (send) => {
          watch.arm();
          try {
            return await send(wired);
          } finally {
            watch.disarm();
          }
        },
      });
    } finally {
      this.close(watch);
      owned?.dispose();
    }
  }

  /** Ends `watch` and forgets its token. */
  close(watch: CallProgressWatch): void {
    watch.end();
    this.#watches.delete(watch.token);
  }
}

/** A signal of the call's own that follows the caller's; `dispose()` detaches it. */
function ownedSignal(outer: AbortSignal | undefined): {
  readonly controller: AbortController;
  dispose(): void;
} {
  const controller = new AbortController();
  if (outer === undefined) return { controller, dispose: () => undefined };
  if (outer.aborted) {
    controller.abort(outer.reason);
    return { controller, dispose: () => undefined };
  }
  return { controller, dispose: onAbort(outer, () => controller.abort(outer.reason)) };
}
