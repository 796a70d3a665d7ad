import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { CallJournal, MemoryJournalStore, type JournalStore } from '@stepbind/binding/internal';
import type { RuntimeClock } from '../clock.js';
import type { FleetStore } from '../fleet/attach.js';
import type { RuntimeJournalOptions } from '../options.js';
import { openSqliteJournal } from './sqlite.js';

/** Journal owners open in this process: a record of this pid with another owner is dead. */
const openOwners = new Set<string>();

/**
 * Opens the journal `options` name (in memory without), owned by this process under a fresh id.
 * With a fleet store the journal lives in its database; `options` then only tune retention and
 * in-progress expiry (a `path` or `store` given besides is not used). A SQLite journal waits for
 * another process's lock on `clock`.
 */
export function openJournal(
  requested: RuntimeJournalOptions | undefined,
  fleet?: FleetStore,
  clock?: RuntimeClock,
): CallJournal {
  const options = fleet === undefined ? requested : fleet.journalOptions(requested);
  const host = hostname();
  const owner = `${host}:${process.pid}:${randomUUID()}`;
  const store: JournalStore =
    options === undefined
      ? new MemoryJournalStore()
      : 'store' in options
        ? options.store
        : openSqliteJournal({
            path: options.path,
            ...(options.synchronous === undefined ? {} : { synchronous: options.synchronous }),
            ...(options.busyTimeoutMs === undefined
              ? {}
              : { busyTimeoutMs: options.busyTimeoutMs }),
            ...(options.driver === undefined ? {} : { driver: options.driver }),
            ...(clock === undefined ? {} : { clock }),
          });
  openOwners.add(owner);
  const journal = new CallJournal(store, {
    owner,
    // Without a journal configured, keys live in memory and unkeyed runs cost nothing; a durable
    // journal (or a store the application gives) receipts every run outcome.
    receipts: options === undefined ? 'keyed' : 'all',
    ...(options?.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
    ...(options?.inProgressTtlMs === undefined ? {} : { inProgressTtlMs: options.inProgressTtlMs }),
    isOwnerAlive: (other) => ownerAlive(other, host),
  });
  return journal;
}

/** Closes a journal `openJournal` opened; its owner id counts as dead from then on. */
export async function closeJournal(journal: CallJournal): Promise<void> {
  try {
    await journal.close();
  } finally {
    openOwners.delete(journal.owner);
  }
}

/** `false` for a holder on this host whose process is gone (or a closed journal of this one). */
function ownerAlive(owner: string, host: string): boolean | undefined {
  const match = /^(.*):(\d+):[0-9a-f-]{36}$/.exec(owner);
  if (match === null || match[1] !== host) return undefined;
  const pid = Number(match[2]);
  if (pid === process.pid) return openOwners.has(owner);
  try {
    process.kill(pid, 0);
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? undefined : false;
  }
}
