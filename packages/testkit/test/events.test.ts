import { createEventLog } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

const listChanged = (server: string) => ({ type: 'list-changed', server }) as const;

describe('createEventLog', () => {
  it('next() resolves with the first matching event recorded after the call, not before', async () => {
    const log = createEventLog();
    log.onEvent(listChanged('a'));
    const next = log.next('list-changed', (e) => e.server === 'a');
    let settled = false;
    void next.then(() => (settled = true));
    log.onEvent(listChanged('b'));
    await Promise.resolve();
    expect(settled).toBe(false);
    log.onEvent(listChanged('a'));
    expect(await next).toEqual(listChanged('a'));
    expect(log.events).toHaveLength(3);
    expect(log.count('list-changed')).toBe(3);
  });

  it('first() counts events already recorded and resolves once there are enough', async () => {
    const log = createEventLog();
    log.onEvent(listChanged('a'));
    const two = log.first('list-changed', 2);
    log.onEvent(listChanged('b'));
    expect((await two).map((e) => e.server)).toEqual(['a', 'b']);
  });
});
