import type { RuntimeEvent } from '@stepbind/runtime';

type EventOf<T extends RuntimeEvent['type']> = Extract<RuntimeEvent, { type: T }>;

/** Records runtime events and lets a test await them (no polling, no sleeps). */
export interface EventLog {
  readonly events: RuntimeEvent[];
  readonly onEvent: (event: RuntimeEvent) => void;
  /** Resolves with the next event of `type` emitted after this call that `test` accepts. */
  next<T extends RuntimeEvent['type']>(
    type: T,
    test?: (event: EventOf<T>) => boolean,
  ): Promise<EventOf<T>>;
  /**
   * Resolves with the first `count` events of `type` that `test` accepts, counting those already
   * recorded, once there are that many.
   */
  first<T extends RuntimeEvent['type']>(
    type: T,
    count: number,
    test?: (event: EventOf<T>) => boolean,
  ): Promise<EventOf<T>[]>;
}

export function eventLog(): EventLog {
  const events: RuntimeEvent[] = [];
  const listeners = new Set<() => void>();
  const matching = <T extends RuntimeEvent['type']>(
    type: T,
    test: ((event: EventOf<T>) => boolean) | undefined,
    from: number,
  ): EventOf<T>[] =>
    events
      .slice(from)
      .filter(
        (e): e is EventOf<T> => e.type === type && (test === undefined || test(e as EventOf<T>)),
      );
  const when = <R>(check: () => R | undefined): Promise<R> =>
    new Promise((resolve) => {
      const listener = (): void => {
        const result = check();
        if (result === undefined) return;
        listeners.delete(listener);
        resolve(result);
      };
      listeners.add(listener);
      listener();
    });
  return {
    events,
    onEvent: (event) => {
      events.push(event);
      for (const listener of [...listeners]) listener();
    },
    next: (type, test) => {
      const from = events.length;
      return when(() => matching(type, test, from)[0]);
    },
    first: (type, count, test) =>
      when(() => {
        const found = matching(type, test, 0);
        return found.length >= count ? found.slice(0, count) : undefined;
      }),
  };
}
