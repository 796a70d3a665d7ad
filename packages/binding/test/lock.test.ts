import fc from 'fast-check';
import { RevisionLock, isStepbindError } from '@stepbind/binding/internal';
import { propertyRun } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('RevisionLock', () => {
  it('lets readers share the lock', async () => {
    const lock = new RevisionLock();
    const a = await lock.acquireRead();
    const b = await lock.acquireRead();
    expect(lock.readers).toBe(2);
    a();
    b();
    expect(lock.readers).toBe(0);
  });

  it('makes a writer wait for earlier readers and later readers wait behind the writer', async () => {
    const lock = new RevisionLock();
    const log: string[] = [];
    const r1 = await lock.acquireRead();
    const writer = lock.acquireWrite().then((release) => {
      log.push('writer');
      release();
    });
    const r2 = lock.acquireRead().then((release) => {
      log.push('late reader');
      release();
    });
    await tick();
    expect(log).toEqual([]);
    r1();
    await Promise.all([writer, r2]);
    expect(log).toEqual(['writer', 'late reader']);
  });

  it('rejects an aborted waiter with ABORTED and keeps the others in order', async () => {
    const lock = new RevisionLock();
    const hold = await lock.acquireWrite();
    const controller = new AbortController();
    const aborted = lock.acquireRead({ signal: controller.signal });
    const next = lock.acquireWrite();
    controller.abort();
    const error: unknown = await aborted.catch((e: unknown) => e);
    expect(isStepbindError(error, 'ABORTED')).toBe(true);
    hold();
    (await next)();
    expect(lock.writing).toBe(false);
  });

  it('serves every acquirer in FIFO order across writers and never starves one (property)', async () => {
    const { seed, numRuns } = propertyRun('rwlock-fifo', 200);
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 12 }),
        async (s, kinds) => {
          const lock = new RevisionLock();
          let readers = 0;
          let writers = 0;
          const order: number[] = [];
          const arrivals: number[] = [];
          const tasks = kinds.map((isWriter, i) =>
            s.schedule(Promise.resolve(), `${isWriter ? 'W' : 'R'}${i}`).then(async () => {
              arrivals.push(i);
              const release = isWriter ? await lock.acquireWrite() : await lock.acquireRead();
              if (isWriter) {
                expect(readers).toBe(0);
                expect(writers).toBe(0);
                writers++;
              } else {
                expect(writers).toBe(0);
                readers++;
              }
              order.push(i);
              await s.schedule(Promise.resolve(), `hold ${i}`);
              if (isWriter) writers--;
              else readers--;
              release();
            }),
          );
          await s.waitFor(Promise.all(tasks));
          expect(order).toHaveLength(kinds.length);
          // Fair and writer-preferring: whenever a writer is involved, acquisition follows arrival.
          for (let x = 0; x < arrivals.length; x++) {
            for (let y = x + 1; y < arrivals.length; y++) {
              const [a, b] = [arrivals[x] ?? -1, arrivals[y] ?? -1];
              if (kinds[a] === true || kinds[b] === true) {
                expect(order.indexOf(a)).toBeLessThan(order.indexOf(b));
              }
            }
          }
          expect(lock.readers).toBe(0);
          expect(lock.writing).toBe(false);
        },
      ),
      { seed, numRuns },
    );
  });
});
