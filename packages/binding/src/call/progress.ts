/**
 * The progress reports of one running call (`notifications/progress`, DESIGN §20.1): what a server
 * sends is untrusted, so {@link ProgressGate} bounds it before anyone sees it, and
 * {@link progressRelay} keeps the caller's listener inside the call's lifetime and away from its
 * outcome.
 *
 * @packageDocumentation
 */
import type {
  CallProgress,
  ProgressListener,
  RunOptions,
  ToolCallResult,
  ToolCaller,
} from './types.js';

/** The longest progress message passed on; longer ones are cut to this many characters. */
export const MAX_PROGRESS_MESSAGE_CHARS = 1000;

/**
 * Accepts the progress reports of one call in order: a `progress` that is not a finite number or
 * does not increase (the specification says it must) is dropped, a non-finite `total` and a
 * non-string `message` are left out, and a message is cut to {@link MAX_PROGRESS_MESSAGE_CHARS}.
 * Constant work per report, whatever the server sends.
 */
export class ProgressGate {
  #last = Number.NEGATIVE_INFINITY;

  /** The bounded, frozen report of `params`, or `undefined` when it is dropped. */
  accept(params: unknown): CallProgress | undefined {
    if (typeof params !== 'object' || params === null) return undefined;
    const { progress, total, message } = params as Record<string, unknown>;
    if (typeof progress !== 'number' || !Number.isFinite(progress) || progress <= this.#last) {
      return undefined;
    }
    this.#last = progress;
    return Object.freeze({
      progress,
      ...(typeof total === 'number' && Number.isFinite(total) ? { total } : {}),
      ...(typeof message === 'string'
        ? { message: message.slice(0, MAX_PROGRESS_MESSAGE_CHARS) }
        : {}),
    });
  }
}

/**
 * Wraps the caller's listener for one call: nothing is delivered after `end()` (the call settled),
 * and a listener that throws is ignored (its failure is not the call's).
 */
export function progressRelay(listener: ProgressListener): {
  readonly listener: ProgressListener;
  end(): void;
} {
  let live = true;
  return {
    listener: (progress) => {
      if (!live) return;
      try {
        listener(progress);
      } catch {
        // The listener's own failure: the call goes on, and its outcome is the server's.
      }
    },
    end: () => {
      live = false;
    },
  };
}

/**
 * The progress options of one call's `callTool` (only those given), its listener behind a
 * {@link progressRelay}; `end` when the call settled: nothing reaches the caller after it.
 */
export function progressOptions(options: RunOptions): {
  readonly options: {
    readonly onProgress?: ProgressListener;
    readonly resetTimeoutOnProgress?: boolean;
    readonly maxTotalTimeoutMs?: number;
  };
  readonly end: () => void;
} {
  const { onProgress, resetTimeoutOnProgress, maxTotalTimeoutMs } = options;
  const relay = onProgress === undefined ? undefined : progressRelay(onProgress);
  return {
    options: {
      ...(relay === undefined ? {} : { onProgress: relay.listener }),
      ...(resetTimeoutOnProgress === true ? { resetTimeoutOnProgress } : {}),
      ...(maxTotalTimeoutMs === undefined ? {} : { maxTotalTimeoutMs }),
    },
    end: () => relay?.end(),
  };
}

/** Whether a run asked for progress reports or a progress-driven timeout. */
export function wantsProgress(options: RunOptions): boolean {
  return (
    options.onProgress !== undefined ||
    options.resetTimeoutOnProgress !== undefined ||
    options.maxTotalTimeoutMs !== undefined
  );
}

/** `caller.callTool` of a run with a progress listener, which ends once the call settles. */
export async function sendWithProgress(
  caller: ToolCaller,
  tool: string,
  args: Readonly<Record<string, unknown>>,
  request: Parameters<ToolCaller['callTool']>[2],
  end: () => void,
): Promise<ToolCallResult> {
  try {
    return await caller.callTool(tool, args, request);
  } finally {
    end();
  }
}
