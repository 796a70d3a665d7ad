import type { RuntimeEvent } from '@stepbind/runtime';

type EventOf<T extends RuntimeEvent['type']> = Extract<RuntimeEvent, { type: T }>;

/** Records runtime events and lets a test await the next one of a kind (no polling, no sleeps). */
export interface EventLog {
  readonly events: RuntimeEvent[];
  readonly onEvent: (event: RuntimeEvent) => void;
  /** Resolves with the next event of `type` emitted after this call that `test` accepts. */
  next<T extends RuntimeEvent['type']>(
    type: T,
    test?: (event: EventOf<T>) => boolean,
  ): Promise<EventOf<T>>;
}

export function eventLog(): EventLog {
  const events: RuntimeEvent[] = [];
  const waiters = new Set<{ test: (e: RuntimeEvent) => boolean; resolve: (e: never) => void }>();
  return {
    events,
    onEvent: (event) => {
      events.push(event);
      for (const waiter of [...waiters]) {
        if (!waiter.test(event)) continue;
        waiters.delete(waiter);
        waiter.resolve(event as never);
      }
    },
    next: (type, test) =>
      new Promise((resolve) => {
        waiters.add({
          test: (e) => e.type === type && (test === undefined || test(e as never)),
          resolve,
        });
      }),
  };
}
