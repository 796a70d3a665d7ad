import {
  CatalogState,
  DiscoveryTracker,
  ErrorCode,
  StepbindError,
  type CatalogSnapshot,
} from '@stepbind/binding/internal';
import type { Emit } from './events.js';

/** One server's discovery state and, for `INCOMPLETE` and `QUARANTINED`, why. */
export interface DiscoveryStatus {
  readonly state: CatalogState;
  readonly reason?: { readonly code: string; readonly message: string };
}
/**
 * Codes that say the server's catalog itself is invalid: a listing that ends with one is
 * `QUARANTINED` (retrying the same catalog gives the same verdict). Any other failure (timeout,
 * lost connection, server error, cancellation, a restart budget spent on list_changed) broke the
 * listing off: `INCOMPLETE`, to be listed again.
 */
const QUARANTINE_CODES: ReadonlySet<string> = new Set([
  ErrorCode.DUPLICATE_TOOL_NAME,
  ErrorCode.CURSOR_REPEATED,
  ErrorCode.PAGE_LIMIT,
  ErrorCode.TOOL_LIMIT,
  ErrorCode.CURSOR_TOO_LARGE,
  ErrorCode.INVALID_TOOL,
  ErrorCode.INVALID_PAGE,
  ErrorCode.INVALID_TOOL_NAME,
  ErrorCode.INVALID_INPUT_SCHEMA,
  ErrorCode.INVALID_OUTPUT_SCHEMA,
  ErrorCode.UNKNOWN_SCHEMA_DIALECT,
  ErrorCode.REMOTE_REF,
  ErrorCode.UNRESOLVED_REF,
  ErrorCode.SCHEMA_TOO_LARGE,
  ErrorCode.SCHEMA_INVALID,
]);

interface Entry {
  readonly tracker: DiscoveryTracker;
  reason: DiscoveryStatus['reason'];
}

/**
 * Drives binding's catalog state machine (`DiscoveryTracker`, every move checked) for each server
 * of one runtime: a listing starts `DISCOVERING`, is `VALIDATING` once every page arrived, and ends
 * in the candidate's state, `INCOMPLETE` or `QUARANTINED` (with the reason); publication moves a
 * proven candidate to `ELIGIBLE`, a refusal to `RETIRED`. Every move is a `discovery-state` event.
 */
export class DiscoveryStates {
  readonly #emit: Emit;
  readonly #servers = new Map<string, Entry>();

  constructor(emit: Emit) {
    this.#emit = emit;
  }

  /** The server's latest discovery state, `undefined` before its first listing. */
  of(server: string): DiscoveryStatus | undefined {
    const entry = this.#servers.get(server);
    if (entry === undefined) return undefined;
    return entry.reason === undefined
      ? { state: entry.tracker.state }
      : { state: entry.tracker.state, reason: entry.reason };
  }

  /**
   * Follows one listing: `DISCOVERING` now, then the outcome. `published` is the catalog in force
   * (an unchanged re-list ends in its state).
   */
  async track<T extends { readonly snapshot: CatalogSnapshot | undefined }>(
    server: string,
    listing: Promise<T>,
    published: CatalogSnapshot | undefined,
  ): Promise<T> {
    const entry: Entry = { tracker: new DiscoveryTracker(), reason: undefined };
    this.#servers.set(server, entry);
    this.#announce(server, entry);
    let result: T;
    try {
      result = await listing;
    } catch (error) {
      if (this.#servers.get(server) === entry) this.#fail(server, entry, error);
      throw error;
    }
    if (this.#servers.get(server) !== entry) return result;
    this.validating(server);
    const candidate = result.snapshot ?? published;
    // An unchanged re-list ends where the published catalog stands (proven ones are ELIGIBLE).
    if (candidate !== undefined) {
      const proven = candidate.state === 'SNAPSHOT_PROVEN' || candidate.state === 'ELIGIBLE';
      this.#move(
        server,
        entry,
        proven ? CatalogState.SNAPSHOT_PROVEN : CatalogState.UNVERSIONED_OBSERVATION,
      );
      if (result.snapshot === undefined && candidate.state === 'ELIGIBLE')
        this.#move(server, entry, CatalogState.ELIGIBLE);
    }
    return result;
  }

  /** Every page arrived; the listing is being turned into a snapshot. */
  validating(server: string): void {
    const entry = this.#servers.get(server);
    if (entry?.tracker.state === CatalogState.DISCOVERING)
      this.#move(server, entry, CatalogState.VALIDATING);
  }

  /** The server's candidate was published as `catalog`. */
  published(server: string, catalog: CatalogSnapshot): void {
    const entry = this.#servers.get(server);
    if (entry?.tracker.state === CatalogState.SNAPSHOT_PROVEN && catalog.state === 'ELIGIBLE')
      this.#move(server, entry, CatalogState.ELIGIBLE);
  }

  /** The server's candidate was refused at publication (`error` says why). */
  refused(server: string, error: StepbindError): void {
    const entry = this.#servers.get(server);
    const state = entry?.tracker.state;
    if (
      entry === undefined ||
      (state !== CatalogState.SNAPSHOT_PROVEN && state !== CatalogState.UNVERSIONED_OBSERVATION)
    )
      return;
    entry.reason = { code: error.code, message: error.message };
    this.#move(server, entry, CatalogState.RETIRED);
  }

  #fail(server: string, entry: Entry, error: unknown): void {
    const typed = error instanceof StepbindError ? error : undefined;
    entry.reason = {
      code: typed?.code ?? ErrorCode.SERVER_START_FAILED,
      message: error instanceof Error ? error.message : String(error),
    };
    const quarantine =
      entry.tracker.state === CatalogState.VALIDATING ||
      (typed !== undefined && QUARANTINE_CODES.has(typed.code));
    this.#move(server, entry, quarantine ? CatalogState.QUARANTINED : CatalogState.INCOMPLETE);
  }

  #move(server: string, entry: Entry, to: CatalogState): void {
    entry.tracker.to(to);
    this.#announce(server, entry);
  }

  #announce(server: string, entry: Entry): void {
    this.#emit({
      type: 'discovery-state',
      server,
      state: entry.tracker.state,
      ...(entry.reason === undefined ? {} : { reason: entry.reason }),
    });
  }
}
