import type { RuntimeEvent } from '@stepbind/runtime';

/** The member of {@link RuntimeEvent} whose `type` is `T`. */
export type RuntimeEventOf<T extends RuntimeEvent['type']> = Extract<RuntimeEvent, { type: T }>;

/**
 * Records a runtime's events (pass {@link EventLog.onEvent} as the runtime's `onEvent`) and lets a
 * test await them, so tests wait for what happened instead of polling or sleeping.
 */
export interface EventLog {
  /** Every event recorded, oldest first. */
  readonly events: RuntimeEvent[];
  /** The listener to give the runtime (`McpRuntime.open(config, { onEvent: log.onEvent })`). */
  readonly onEvent: (event: RuntimeEvent) => void;
  /**
   * Resolves with the next event of `type` recorded after this call that `test` accepts. Call it
   * before the action that causes the event.
   */
  next<T extends RuntimeEvent['type']>(
    type: T,
    test?: (event: RuntimeEventOf<T>) => boolean,
  ): Promise<RuntimeEventOf<T>>;
  /**
   * Resolves with the first `count` events of `type` that `test` accepts, counting those already
   * recorded, once there are that many.
   */
  first<T extends RuntimeEvent['type']>(
    type: T,
    count: number,
    test?: (event: RuntimeEventOf<T>) => boolean,
  ): Promise<RuntimeEventOf<T>[]>;
  /** How many recorded events have `type`. */
  count(type: RuntimeEvent['type']): number;
}

/** Creates an empty {@link EventLog}. Waiters resolve synchronously inside `onEvent`'s call. */
export function createEventLog(): EventLog {
  const events: RuntimeEvent[] = [];
  const listeners = new Set<() => void>();
  const matching = <T extends RuntimeEvent['type']>(
    type: T,
    test: ((event: RuntimeEventOf<T>) => boolean) | undefined,
    from: number,
  ): RuntimeEventOf<T>[] =>
    events
      .slice(from)
      .filter(
        (e): e is RuntimeEventOf<T> =>
          e.type === type && (test === undefined || test(e as RuntimeEventOf<T>)),
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
    count: (type) => events.reduce((n, e) => (e.type === type ? n + 1 : n), 0),
  };
}
