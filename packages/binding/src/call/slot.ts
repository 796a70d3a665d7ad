/**
 * The catalog of one server inside a ConnectionSet and its revision, behind the revision lock.
 *
 * @packageDocumentation
 */
import { RevisionLock } from '../lock.js';
import type { CatalogSnapshot } from '../snapshot/snapshot.js';

/**
 * The catalog of one server inside a ConnectionSet, with its revision behind a {@link RevisionLock}.
 * The catalog is swapped only under the write lock, and every swap increments the revision, so a
 * prepared call that holds the read lock sees a revision that cannot change until it finishes.
 */
export class CatalogSlot {
  /** Configured server name. */
  readonly server: string;
  /** The fair, writer-preferring lock guarding {@link catalog} and {@link revision}. */
  readonly lock = new RevisionLock();
  #catalog: CatalogSnapshot;
  #revision = 1;
  #listeners = new Set<() => void>();

  constructor(server: string, catalog: CatalogSnapshot) {
    this.server = server;
    this.#catalog = catalog;
  }

  /** The catalog currently in force. */
  get catalog(): CatalogSnapshot {
    return this.#catalog;
  }

  /** Starts at 1 and increments on every swap. */
  get revision(): number {
    return this.#revision;
  }

  /**
   * Installs `catalog` and increments the revision; the caller must hold the write lock (this lets
   * a refresh swap several slots and move its pointer in one synchronous step).
   *
   * @throws Error when the write lock is not held.
   */
  installLocked(catalog: CatalogSnapshot): number {
    if (!this.lock.writing) throw new Error(`CatalogSlot(${this.server}): write lock not held`);
    this.#catalog = catalog;
    this.#revision++;
    for (const listener of this.#listeners) listener();
    return this.#revision;
  }

  /** Calls `listener` after every swap (inside the write lock). Returns an unsubscribe function. */
  onSwap(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
