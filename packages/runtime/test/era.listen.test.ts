import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode, RuntimeError, type StepbindError } from '@stepbind/binding/internal';
import type { RpcErrorObject } from '../src/era/envelope.js';
import {
  ListenStream,
  RELISTEN_BASE_MS,
  RELISTEN_HEALTHY_MS,
  RELISTEN_MAX_MS,
  type ListenHost,
} from '../src/era/listen.js';

/**
 * The re-listen policy of `era/listen.ts` on the runtime's side of the wire: a host that records what
 * the stream sends and lets the test answer it (the real streams are covered over stdio and HTTP by
 * era.sdk2.*.test.ts).
 */

interface Opened {
  readonly id: number;
  readonly resolve: (result: unknown) => void;
  readonly reject: (error: RpcErrorObject | StepbindError) => void;
}

function host(options: { failSend?: () => boolean } = {}) {
  let next = 1;
  let closed = false;
  const opened: Opened[] = [];
  const reported: Error[] = [];
  const pending = new Map<number, Omit<Opened, 'id'>>();
  const h: ListenHost = {
    server: 's',
    isClosed: () => closed,
    nextId: () => next++,
    expect: (id, handlers) => {
      pending.set(id, handlers);
      opened.push({ id, ...handlers });
    },
    send: () =>
      options.failSend?.() === true
        ? Promise.reject(new Error('connect ECONNREFUSED'))
        : Promise.resolve(),
    report: (error) => reported.push(error),
  };
  return {
    h,
    opened,
    reported,
    close: () => {
      closed = true;
    },
  };
}

const broke = (): StepbindError =>
  new RuntimeError(ErrorCode.MALFORMED_MESSAGE, 'the stream broke off', {
    detail: { server: 's' },
  });

describe('the subscriptions/listen stream of a modern connection', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is opened again after a backoff when the server ends it, and a broken run is reported once', async () => {
    const { h, opened, reported } = host();
    const stream = new ListenStream(h);
    stream.open();
    stream.acknowledged();
    expect(opened.map((o) => o.id)).toEqual([1]);
    await vi.advanceTimersByTimeAsync(RELISTEN_HEALTHY_MS);
    opened[0]?.resolve({});
    expect(stream.id).toBeUndefined();
    // Jitter keeps the delay within [half, full] of the base.
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS / 2 - 1);
    expect(opened).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS / 2 + 1);
    expect(opened.map((o) => o.id)).toEqual([1, 2]);
    stream.acknowledged();
    await vi.advanceTimersByTimeAsync(RELISTEN_HEALTHY_MS);
    opened[1]?.reject(broke());
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS);
    expect(opened).toHaveLength(3);
    opened[2]?.reject(broke());
    // The delay doubled: not yet after the base, surely after twice it.
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS - 1);
    expect(opened).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS + 1);
    expect(opened).toHaveLength(4);
    // The graceful end is no error; of the two broken streams in a row only the first is told.
    expect(reported.map((e) => e.message)).toEqual(['the stream broke off']);
    expect(stream.id).toBe(4);
  });

  it('reports the first failure of a run and backs off to at most 30 s while the server is down', async () => {
    let down = true;
    const { h, opened, reported } = host({ failSend: () => down });
    const stream = new ListenStream(h);
    stream.open();
    // To each armed re-listen exactly, so no part of the next delay has passed when the 12th opens.
    while (opened.length < 12) await vi.advanceTimersToNextTimerAsync();
    // From the eighth failure on, the delay is capped: between 15 s and 30 s (jitter).
    await vi.advanceTimersByTimeAsync(RELISTEN_MAX_MS / 2 - 1);
    expect(opened).toHaveLength(12);
    await vi.advanceTimersByTimeAsync(RELISTEN_MAX_MS / 2 + 1);
    expect(opened).toHaveLength(13);
    expect(reported.map((e) => e.message)).toEqual(['connect ECONNREFUSED']);
    // Once it is back and acknowledged, a new failure is told again and starts a fresh backoff.
    down = false;
    await vi.advanceTimersByTimeAsync(RELISTEN_MAX_MS);
    expect(stream.id).toBe(14);
    stream.acknowledged();
    await vi.advanceTimersByTimeAsync(RELISTEN_HEALTHY_MS);
    opened.at(-1)?.reject(broke());
    expect(reported).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS);
    expect(stream.id).toBe(15);
  });

  it('a stream acknowledged and ended at once backs off to the cap: at most 10 re-opens in a minute', async () => {
    const { h, opened } = host();
    const stream = new ListenStream(h);
    stream.open();
    // The attack: every stream is acknowledged, then ended by the server straight away.
    let answered = 0;
    for (let t = 0; t < 60_000; t += 50) {
      while (answered < opened.length) {
        stream.acknowledged();
        opened[answered++]?.resolve({});
      }
      await vi.advanceTimersByTimeAsync(50);
    }
    // 250 ms doubling to 30 s, jitter at least half: nine re-opens at most (about 300 before).
    expect(opened.length - 1).toBeLessThanOrEqual(10);
    expect(opened.length - 1).toBeGreaterThanOrEqual(5);
  });

  it('a stream that stayed open long after its acknowledgement is re-opened promptly when it ends', async () => {
    const { h, opened } = host();
    const stream = new ListenStream(h);
    stream.open();
    // First a run of short-lived streams drives the backoff up to the cap ...
    for (let i = 0; i < 10; i++) {
      stream.acknowledged();
      opened.at(-1)?.resolve({});
      await vi.advanceTimersByTimeAsync(RELISTEN_MAX_MS);
    }
    expect(opened).toHaveLength(11);
    // ... then one stays open ten minutes: its end starts a fresh backoff.
    stream.acknowledged();
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    opened.at(-1)?.resolve({});
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS);
    expect(opened).toHaveLength(12);
  });

  it('a JSON-RPC error answer is final: reported, never re-opened', async () => {
    const { h, opened, reported } = host();
    const stream = new ListenStream(h);
    stream.open();
    opened[0]?.reject({ code: -32601, message: 'Method not found' });
    await vi.advanceTimersByTimeAsync(RELISTEN_MAX_MS * 2);
    expect(opened).toHaveLength(1);
    expect(reported).toHaveLength(1);
    expect(reported[0]?.message).toContain('subscriptions/listen');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('an HTTP 5xx answer (a server restarting behind a proxy) is retried', async () => {
    const { h, opened } = host();
    const stream = new ListenStream(h);
    stream.open();
    opened[0]?.reject({ code: -32000, message: 'HTTP 503', data: { httpStatus: 503 } });
    await vi.advanceTimersByTimeAsync(RELISTEN_BASE_MS);
    expect(stream.id).toBe(2);
  });

  it('stop() hands back the open stream to cancel, and leaves no timer behind', async () => {
    const { h, opened } = host();
    const stream = new ListenStream(h);
    stream.open();
    expect(stream.stop()).toBe(1);
    stream.open();
    expect(opened).toHaveLength(1);

    const other = host();
    const second = new ListenStream(other.h);
    second.open();
    other.opened[0]?.resolve({});
    expect(vi.getTimerCount()).toBe(1);
    expect(second.stop()).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(RELISTEN_MAX_MS);
    expect(other.opened).toHaveLength(1);
  });

  it('is not re-opened once its connection has closed', async () => {
    const { h, opened, close } = host();
    const stream = new ListenStream(h);
    stream.open();
    close();
    opened[0]?.reject(broke());
    await vi.advanceTimersByTimeAsync(RELISTEN_MAX_MS);
    expect(opened).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });
});
