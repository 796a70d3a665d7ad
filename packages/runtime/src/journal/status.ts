/**
 * What `status().journal` and the `journal-recovered` event show of the journal a runtime opened:
 * its kind and location and, for a SQLite file, the driver and SQLite version in use.
 */
import { MemoryJournalStore, type CallJournal } from '@stepbind/binding/internal';
import type { JournalDriver } from './sqlite-driver.js';
import { SqliteJournalStore } from './sqlite.js';

/**
 * The journal part of {@link RuntimeStatus}: `memory` (no journal configured), `sqlite` (a SQLite
 * file, with the driver and SQLite version in use), `fleet` (the fleet store's database) or
 * `store` (a `JournalStore` the application gave). No secrets: `location` is a file path, the
 * fleet store's redacted location, or the store's own `location`.
 */
export interface JournalStatus {
  readonly kind: 'memory' | 'sqlite' | 'fleet' | 'store';
  readonly location: string;
  /** The SQLite library of a `sqlite` journal. */
  readonly driver?: JournalDriver;
  /** The SQLite library version of a `sqlite` journal, such as `3.54.1`. */
  readonly sqliteVersion?: string;
}

/** What `status().journal` shows of `journal` (`fleet`: it lives in the fleet store). */
export function journalStatus(journal: CallJournal, fleet: boolean): JournalStatus {
  const store = journal.store;
  const location = store.location;
  if (store instanceof SqliteJournalStore) {
    return Object.freeze({
      kind: 'sqlite',
      location,
      driver: store.driver,
      sqliteVersion: store.sqliteVersion,
    });
  }
  const kind = store instanceof MemoryJournalStore ? 'memory' : fleet ? 'fleet' : 'store';
  return Object.freeze({ kind, location });
}
