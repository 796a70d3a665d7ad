/**
 * A cross-process lock made of one file (DESIGN §16): the owner record (host, boot id, pid, start
 * time) is written to a private temp file first and then hard-linked to the lock path (`link`
 * fails with `EEXIST` like `O_EXCL`), so a lock file is never seen empty or half written. Other processes wait with backoff (bounded; their signal ends the
 * wait) and take the lock over when its owner died (same host and boot, pid gone) or it outlived
 * `staleMs` (a hung owner, another host). The lock file is removed on release; nothing else
 * (no timer, no handle) outlives the call.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, open, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { onAbort } from '@stepbind/binding/internal';

import { Backoff } from '../backoff.js';

/** How a {@link withFileLock} call waits. */
export interface FileLockOptions {
  /** Ends the wait for the lock (never `work` once it started). */
  readonly signal?: AbortSignal;
  /** How long to wait for the lock before giving up. @default 30000 */
  readonly maxWaitMs?: number;
  /** Age after which a lock whose owner seems alive is taken over anyway. @default 120000 */
  readonly staleMs?: number;
  /** Called (no arguments) when the lock was taken over from a dead or stale owner. */
  readonly onTakeover?: () => void;
}

/** Why {@link withFileLock} gave up without running `work`. */
export class FileLockTimeout extends Error {
  override readonly name = 'FileLockTimeout';
  constructor(
    readonly path: string,
    readonly waitedMs: number,
  ) {
    super(`the lock file ${path} stayed held for ${waitedMs} ms`);
  }
}

/** What a lock file says about its owner. */
interface LockOwner {
  readonly host: string;
  /** The kernel's boot id (Linux), absent where unreadable: a pid is judged only within one boot. */
  readonly boot?: string;
  readonly pid: number;
  readonly at: number;
  /** Unique per acquisition: a takeover removes exactly the lock it judged stale. */
  readonly nonce: string;
}

const HOST = hostname();
const BOOT = readBootId();
/** First and largest pause between attempts. */
const FIRST_PAUSE_MS = 2;
const MAX_PAUSE_MS = 50;
/** Age after which an owner-less lock file or a takeover guard is left over from a dead process. */
const GUARD_STALE_MS = 2000;

/**
 * Runs `work` while holding the lock file `path` (created, and removed after `work` settles).
 *
 * @throws FileLockTimeout when the lock stayed held by a live owner for `maxWaitMs`; the
 *   signal's reason when it aborted the wait; a file system error (`EACCES`, `ENOENT` of the
 *   directory) as thrown.
 */
export async function withFileLock<T>(
  path: string,
  work: () => Promise<T>,
  options: FileLockOptions = {},
): Promise<T> {
  const nonce = await acquire(path, options);
  try {
    return await work();
  } finally {
    await release(path, nonce);
  }
}

async function acquire(path: string, options: FileLockOptions): Promise<string> {
  const maxWaitMs = options.maxWaitMs ?? 30_000;
  const staleMs = options.staleMs ?? 120_000;
  const started = Date.now();
  const backoff = new Backoff({ initialMs: FIRST_PAUSE_MS, maxMs: MAX_PAUSE_MS });
  for (;;) {
    options.signal?.throwIfAborted();
    const nonce = randomUUID();
    if (await tryCreate(path, nonce)) return nonce;
    const owner = await readOwner(path);
    if (owner === 'gone') continue;
    // A lock file without a readable owner record (never one of ours: ours are linked complete)
    // is stale once it is older than GUARD_STALE_MS.
    const stale =
      owner === 'unreadable' ? (await ageMs(path)) > GUARD_STALE_MS : isStale(owner, staleMs);
    if (stale && (await takeOver(path, owner, staleMs))) {
      options.onTakeover?.();
      continue;
    }
    const waited = Date.now() - started;
    if (waited >= maxWaitMs) throw new FileLockTimeout(path, waited);
    await pause(backoff, Math.min(backoff.fail() ?? MAX_PAUSE_MS, maxWaitMs - waited), options);
  }
}

/**
 * Creates the lock file holding this process's owner record; false when it exists. The record is
 * complete before the lock path exists: written to `<path>.<nonce>.tmp`, then linked.
 */
async function tryCreate(path: string, nonce: string): Promise<boolean> {
  const temp = `${path}.${nonce}.tmp`;
  const owner: LockOwner = {
    host: HOST,
    ...(BOOT === undefined ? {} : { boot: BOOT }),
    pid: process.pid,
    at: Date.now(),
    nonce,
  };
  await writeFile(temp, JSON.stringify(owner), { mode: 0o600, flag: 'wx' });
  try {
    await link(temp, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}

function readBootId(): string | undefined {
  try {
    const id = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return id === '' ? undefined : id;
  } catch {
    return undefined;
  }
}

async function readOwner(path: string): Promise<LockOwner | 'gone' | 'unreadable'> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw error;
  }
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>;
    if (
      typeof owner.host === 'string' &&
      typeof owner.pid === 'number' &&
      typeof owner.at === 'number' &&
      typeof owner.nonce === 'string' &&
      (owner.boot === undefined || typeof owner.boot === 'string')
    ) {
      return owner as LockOwner;
    }
  } catch {
    // Lock files are linked complete; an unreadable one is left by something else: judged below.
  }
  return 'unreadable';
}

function isStale(owner: LockOwner, staleMs: number): boolean {
  if (Date.now() - owner.at > staleMs) return true;
  // A pid means nothing on another host or after a reboot (pids are reused): only age counts there.
  return owner.host === HOST && owner.boot === BOOT && !isAlive(owner.pid);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the pid exists (another user's process).
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the stale lock unless another waiter already replaced it. Takeovers are serialised by a
 * guard file (`<path>.takeover`, `O_EXCL`): under it the lock is read again and removed only if it
 * is still the one judged stale, so two waiters that judged the same dead owner never remove each
 * other's fresh lock. A guard left by a waiter that died holding it is removed once it is older
 * than {@link GUARD_STALE_MS}.
 */
async function takeOver(
  path: string,
  judged: LockOwner | 'unreadable',
  staleMs: number,
): Promise<boolean> {
  const guard = `${path}.takeover`;
  let handle;
  try {
    handle = await open(guard, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    if ((await ageMs(guard)) > GUARD_STALE_MS) await unlink(guard).catch(() => undefined);
    return false;
  }
  await handle.close();
  try {
    const again = await readOwner(path);
    // Judged again under the guard: still the same lock, and still stale (an unreadable lock's age
    // is read again, a record's owner is checked again).
    const same =
      judged === 'unreadable'
        ? again === 'unreadable' && (await ageMs(path)) > GUARD_STALE_MS
        : typeof again === 'object' && again.nonce === judged.nonce && isStale(again, staleMs);
    if (!same) return false;
    await unlink(path).catch(() => undefined);
    return true;
  } finally {
    await unlink(guard).catch(() => undefined);
  }
}

/** Milliseconds since `path` was last written (0 when it is gone). */
async function ageMs(path: string): Promise<number> {
  try {
    return Date.now() - (await stat(path)).mtimeMs;
  } catch {
    return 0;
  }
}

/** Removes the lock file if it is still this acquisition's (a taken-over lock is not removed). */
async function release(path: string, nonce: string): Promise<void> {
  const owner = await readOwner(path).catch(() => 'gone' as const);
  if (owner !== 'gone' && owner !== 'unreadable' && owner.nonce !== nonce) return;
  await unlink(path).catch(() => undefined);
}

function pause(backoff: Backoff, ms: number, options: FileLockOptions): Promise<void> {
  return new Promise((resolve) => {
    const stop =
      options.signal === undefined
        ? () => undefined
        : onAbort(options.signal, () => {
            backoff.cancel();
            resolve();
          });
    backoff.schedule(Math.max(0, ms), () => {
      stop();
      resolve();
    });
  });
}
