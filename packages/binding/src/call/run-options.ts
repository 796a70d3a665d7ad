/**
 * The options bag of `PreparedCall.run`, checked at run time like a configuration file (JavaScript
 * callers have no compiler) before anything is journaled or sent.
 *
 * @packageDocumentation
 */
import * as z from 'zod/v4';
import { MAX_TIMER_MS } from '../discovery.js';
import { CallError } from '../errors.js';
import { abortSignal, bagOf, checkOptions, fn, problemIssue } from '../options-check.js';
import type { RunOptions } from './types.js';

/**
 * The schema of `RunOptions`: a `timeoutMs` from 1 to 2^31−1 (Node clamps other values to 1 ms,
 * so the call would be sent and then time out), an `AbortSignal`, a `prepare` function, an
 * idempotency key of 1 to 512 characters without control characters, an `onProgress` function, a
 * boolean `resetTimeoutOnProgress` and a `maxTotalTimeoutMs` like `timeoutMs` and not below it.
 */
export const runOptionsSchema = bagOf<RunOptions>()({
  prepare: fn<RunOptions['prepare']>('(context) => void | Promise<void>').optional(),
  signal: abortSignal.optional(),
  timeoutMs: z
    .number()
    .int()
    .min(1)
    .max(MAX_TIMER_MS)
    .describe(`an integer from 1 to ${MAX_TIMER_MS} (milliseconds)`)
    .optional(),
  idempotencyKey: z
    .string()
    .min(1)
    .max(512)
    // eslint-disable-next-line no-control-regex
    .regex(/^[^\u0000-\u001f]*$/)
    .describe('a string of 1 to 512 characters without control characters')
    .optional(),
  onProgress: fn<RunOptions['onProgress']>('(progress) => void').optional(),
  resetTimeoutOnProgress: z.boolean().describe('a boolean').optional(),
  maxTotalTimeoutMs: z
    .number()
    .int()
    .min(1)
    .max(MAX_TIMER_MS)
    .describe(`an integer from 1 to ${MAX_TIMER_MS} (milliseconds), at least timeoutMs`)
    .optional(),
  task: z
    .union([
      z.boolean(),
      z
        .object({
          ttlMs: z
            .number()
            .int()
            .min(1)
            .max(MAX_TIMER_MS)
            .describe(`an integer from 1 to ${MAX_TIMER_MS} (milliseconds)`)
            .optional(),
        })
        .strict(),
    ])
    .describe('true, false or { ttlMs }')
    .optional(),
}).superRefine((bag, ctx) => {
  const { timeoutMs, maxTotalTimeoutMs } = bag;
  if (timeoutMs !== undefined && maxTotalTimeoutMs !== undefined && maxTotalTimeoutMs < timeoutMs) {
    ctx.addIssue(
      problemIssue(
        ['maxTotalTimeoutMs'],
        `must be at least timeoutMs (${timeoutMs}): it caps the whole call, including every reset timeout`,
      ),
    );
  }
});

/**
 * Refuses a `RunOptions` bag the call could not honour (see {@link runOptionsSchema}): an unknown
 * key (with the nearest known one) or a value of the wrong type or range.
 *
 * @param detailOf the call's error detail (server, tool, model name, step, `delivery: 'not-sent'`),
 *   built only when an option is refused (a valid call allocates nothing here).
 * @throws CallError `INVALID_OPTIONS` with `detail.option`, `detail.path`, `detail.problems` and,
 *   for a number, `detail.value` (a string is never echoed: keys may carry user data).
 */
export function checkRunOptions(
  options: unknown,
  detailOf: () => Readonly<Record<string, unknown>>,
): void {
  if (isEmptyPlainObject(options)) return;
  checkOptions(runOptionsSchema, options, {
    fn: 'PreparedCall.run',
    as: CallError,
    subject: () => {
      const detail = detailOf();
      return `for "${String(detail['modelName'])}" of server "${String(detail['server'])}"`;
    },
    consequence: 'It was not run and nothing was sent or journaled; fix the option and call again.',
    detail: detailOf,
  });
}

/** The common `{}` bag, accepted without running the validator. */
function isEmptyPlainObject(bag: unknown): boolean {
  if (typeof bag !== 'object' || bag === null || Object.getPrototypeOf(bag) !== Object.prototype) {
    return false;
  }
  for (const key in bag) if (Object.hasOwn(bag, key)) return false;
  return true;
}
