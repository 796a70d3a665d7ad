/**
 * The options bag of `PreparedCall.run`, checked at run time like a configuration file (JavaScript
 * callers have no compiler) before anything is journaled or sent.
 *
 * @packageDocumentation
 */
import { MAX_TIMER_MS } from '../discovery.js';
import { CallError, ErrorCode } from '../errors.js';

const RUN_OPTION_KEYS = ['prepare', 'signal', 'timeoutMs', 'idempotencyKey'] as const;

/**
 * Refuses a `RunOptions` bag the call could not honour: an unknown key (with the nearest
 * known one), a `timeoutMs` that is not an integer from 1 to 2^31−1 (Node clamps other values to
 * 1 ms, so the call would be sent and then time out), a `signal` that is not an `AbortSignal`, a
 * `prepare` that is not a function, or an idempotency key that is not 1 to 512 characters without
 * control characters.
 *
 * @param detailOf the call's error detail (server, tool, model name, step, `delivery: 'not-sent'`),
 *   built only when an option is refused (a valid call allocates nothing here).
 * @throws CallError `INVALID_OPTIONS` with `detail.option` and `detail.value` (described, never the
 *   key itself when it is a string: keys may carry user data).
 */
export function checkRunOptions(
  options: unknown,
  detailOf: () => Readonly<Record<string, unknown>>,
): void {
  const refuse = (option: string, value: unknown, expected: string): never => {
    const detail = detailOf();
    const modelName = String(detail['modelName']);
    throw new CallError(
      ErrorCode.INVALID_OPTIONS,
      `Invalid run option ${option}${value === undefined ? '' : `=${String(describe(value))}`} for "${modelName}" of server "${String(detail['server'])}": ${expected}. It was not run and nothing was sent or journaled; fix the option and call again.`,
      { detail: { ...detail, option, ...(value === undefined ? {} : { value: describe(value) }) } },
    );
  };
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    refuse('options', options, 'expected an object');
  }
  const bag = options as Record<string, unknown>;
  for (const key of Object.keys(bag)) {
    if (!(RUN_OPTION_KEYS as readonly string[]).includes(key)) {
      const near = nearest(key, RUN_OPTION_KEYS);
      refuse(
        key,
        undefined,
        `unknown option${near === undefined ? '' : ` (did you mean "${near}"?)`}; the options are ${RUN_OPTION_KEYS.join(', ')}`,
      );
    }
  }
  const { prepare, signal, timeoutMs, idempotencyKey } = bag;
  if (prepare !== undefined && typeof prepare !== 'function') {
    refuse('prepare', prepare, 'expected a function');
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    refuse('signal', signal, 'expected an AbortSignal');
  }
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== 'number' ||
      !Number.isInteger(timeoutMs) ||
      timeoutMs < 1 ||
      timeoutMs > MAX_TIMER_MS)
  ) {
    refuse('timeoutMs', timeoutMs, `expected an integer from 1 to ${MAX_TIMER_MS} (milliseconds)`);
  }
  if (
    idempotencyKey !== undefined &&
    (typeof idempotencyKey !== 'string' ||
      idempotencyKey.length === 0 ||
      idempotencyKey.length > 512 ||
      // eslint-disable-next-line no-control-regex
      /[\u0000-\u001f]/.test(idempotencyKey))
  ) {
    const detail = detailOf();
    throw new CallError(
      ErrorCode.INVALID_OPTIONS,
      `The idempotency key must be a string of 1 to 512 characters without control characters; "${String(detail['modelName'])}" was not run.`,
      { detail: { ...detail, option: 'idempotencyKey' } },
    );
  }
}

/** A value as an error may show it: numbers (NaN and ±Infinity named), types otherwise. */
function describe(value: unknown): string | number | boolean | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : String(value);
  if (value === null || typeof value === 'boolean') return value;
  return typeof value;
}

/** The known key within edit distance 2 of `key` (the closest first), if any. */
function nearest(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const d = distance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance (keys are short: at most a few dozen characters matter). */
function distance(a: string, b: string): number {
  if (a.length > 64 || b.length > 64) return Math.abs(a.length - b.length) + 3;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
