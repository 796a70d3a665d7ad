/**
 * Issue 20 / DESIGN §21.2: `RevisionLock.tryAcquireRead`, the synchronous read hold an unkeyed
 * prepared call takes when the lock is uncontended, never passes a writer that holds or waits.
 */
import { RevisionLock } from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';

describe('RevisionLock.tryAcquireRead', () => {
  it('takes a shared hold at once when no writer holds or waits, and never past a writer', async () => {
    const lock = new RevisionLock();
    const first = lock.tryAcquireRead();
    const second = lock.tryAcquireRead();
    expect(first).toBeTypeOf('function');
    expect(lock.readers).toBe(2);
    // A writer queues behind the two readers: from now on a reader must queue too.
    const writing = lock.acquireWrite();
    await Promise.resolve();
    expect(lock.tryAcquireRead()).toBeUndefined();
    expect(lock.readers).toBe(2);
    first?.();
    second?.();
    const releaseWrite = await writing;
    expect(lock.writing).toBe(true);
    expect(lock.tryAcquireRead()).toBeUndefined();
    const queued = lock.acquireRead();
    releaseWrite();
    const release = await queued;
    expect(lock.readers).toBe(1);
    release();
    // Free again: the synchronous path is back.
    const again = lock.tryAcquireRead();
    expect(lock.readers).toBe(1);
    again?.();
    expect(lock.readers).toBe(0);
  });
});
