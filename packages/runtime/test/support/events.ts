import type { RuntimeEvent } from '@stepbind/runtime';
import type { EventLog, RuntimeEventOf } from '@stepbind/testkit';
import { within, WAIT_BOUND_MS } from './wait.js';

// One event recorder for every package: testkit's (public, so apps use the same one).
export { createEventLog as eventLog } from '@stepbind/testkit';
export type { EventLog, RuntimeEventOf } from '@stepbind/testkit';

/**
 * The next `type` event that `test` accepts, recorded after this call (call it before the action
 * that causes the event); fails with a clear message after `ms` instead of hanging.
 */
export function nextEvent<T extends RuntimeEvent['type']>(
  log: EventLog,
  type: T,
  test?: (event: RuntimeEventOf<T>) => boolean,
  ms: number = WAIT_BOUND_MS,
): Promise<RuntimeEventOf<T>> {
  return within(log.next(type, test), `"${type}" event`, ms);
}

/**
 * The first `count` `type` events that `test` accepts, counting those already recorded, once
 * there are that many; fails with a clear message after `ms` instead of hanging.
 */
export function firstEvents<T extends RuntimeEvent['type']>(
  log: EventLog,
  type: T,
  count: number,
  test?: (event: RuntimeEventOf<T>) => boolean,
  ms: number = WAIT_BOUND_MS,
): Promise<RuntimeEventOf<T>[]> {
  return within(log.first(type, count, test), `${count} "${type}" events`, ms);
}
