/**
 * A journal that fails before the send, said from the call's side: which tool, which key, that
 * nothing was sent, and what the store said (DESIGN §13, a store that stops answering).
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode, StepbindError } from '../errors.js';
import type { CallIntent } from './claim.js';
import { contextDetail } from './rules.js';

/**
 * `error` as the run's error when the store failed or was abandoned (`JOURNAL_UNAVAILABLE`, its
 * `detail.reason` kept, e.g. `timeout`; `ABORTED` for the caller's signal) while claiming or
 * marking `intent`'s key: the same code, a message naming the tool and key and saying it was not
 * sent, `delivery: 'not-sent'`. Any other error is returned as is.
 */
export function notSentError(error: unknown, intent: CallIntent): unknown {
  if (!StepbindError.isInstance(error)) return error;
  if (error.code !== ErrorCode.JOURNAL_UNAVAILABLE && error.code !== ErrorCode.ABORTED) {
    return error;
  }
  const { context, key } = intent;
  const what =
    error.code === ErrorCode.ABORTED
      ? 'the caller cancelled while the journal was being written'
      : error.detail['reason'] === 'timeout'
        ? 'the journal did not answer in time'
        : 'the journal could not be written';
  return new CallError(
    error.code,
    `"${context.modelName}" (server "${context.server}", tool "${context.tool}", idempotency key "${key}") was not sent: ${what}. ${error.message}`,
    {
      detail: { ...error.detail, ...contextDetail(context), key, delivery: 'not-sent' },
      cause: error,
    },
  );
}
