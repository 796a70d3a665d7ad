/**
 * A call on a provisional server (DESIGN §19.2): the run waits for the server's live catalog and
 * moves onto it only when it has the tool the model saw.
 *
 * @packageDocumentation
 */
import type { CallError } from '../errors.js';
import { callDeadline } from '../signals.js';
import type { BoundServer } from '../tools/view.js';
import type { CheckedCall } from './checks.js';
import { provisionalStaleError, provisionalTimeoutError, type FailingCall } from './failure.js';
import type { CallRun } from './run.js';

/**
 * Waits, bounded by the call's timeout and signal, for the provisional server's live catalog, and
 * moves `run` onto the live server only when that catalog has the call's tool with the
 * descriptor digest the model saw. The `prepare` hook has not run; nothing is sent.
 *
 * @throws CallError `STALE_CATALOG` (changed or vanished), `TIMEOUT`, `ABORTED` (from
 *   `abortedBeforeSend`), or the server's start failure; all `delivery: 'not-sent'`.
 */
export async function confirmLive(
  run: CallRun,
  provisional: NonNullable<BoundServer['provisional']>,
  call: CheckedCall & FailingCall,
  abortedBeforeSend: (reason: unknown) => CallError,
): Promise<void> {
  const { signal } = run.options;
  const bound = callDeadline(signal, run.timeoutMs);
  let live: BoundServer;
  try {
    live = await provisional.live(bound.signal);
  } catch (error) {
    if (signal?.aborted === true) throw abortedBeforeSend(signal.reason);
    if (bound.signal?.aborted === true) throw provisionalTimeoutError(call, run.timeoutMs);
    throw error;
  } finally {
    bound.end();
  }
  const seen = call.bound.descriptor;
  const descriptor = live.catalog.toolsByName.get(seen.name);
  const liveDigest = descriptor?.descriptorDigest;
  if (liveDigest !== seen.descriptorDigest) {
    throw provisionalStaleError(
      call,
      descriptor === undefined ? 'vanished' : 'changed',
      seen.descriptorDigest,
      liveDigest,
    );
  }
  if (descriptor === undefined) {
    throw new Error('stepbind: unreachable: a matching digest without a tool');
  }
  run.bound = { modelName: call.modelName, server: live, descriptor };
  run.revision = live.revision;
}
