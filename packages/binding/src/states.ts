/**
 * The discovery state machine of one server's catalog, as explicit data (DESIGN §5).
 *
 * ```
 * DISCOVERING ─► VALIDATING ─► SNAPSHOT_PROVEN ─────────► ELIGIBLE ─► RETIRED
 *    │   ▲           │    └──► UNVERSIONED_OBSERVATION ───────────────► RETIRED
 *    ▼   │           └───────► QUARANTINED
 * INCOMPLETE     (DISCOVERING ─► QUARANTINED on a fatal discovery error)
 * ```
 *
 * An unversioned catalog is published as it is and keeps the state `UNVERSIONED_OBSERVATION`
 * (usable, but write-class calls need approval); only a proven catalog becomes `ELIGIBLE`.
 * `SNAPSHOT_PROVEN → RETIRED` covers a candidate that was refused at publication.
 *
 * @packageDocumentation
 */
import { CatalogError, ErrorCode } from './errors.js';

/** Every state a catalog can be in, as an `as const` table. */
export const CatalogState = {
  DISCOVERING: 'DISCOVERING',
  VALIDATING: 'VALIDATING',
  SNAPSHOT_PROVEN: 'SNAPSHOT_PROVEN',
  ELIGIBLE: 'ELIGIBLE',
  UNVERSIONED_OBSERVATION: 'UNVERSIONED_OBSERVATION',
  INCOMPLETE: 'INCOMPLETE',
  QUARANTINED: 'QUARANTINED',
  RETIRED: 'RETIRED',
} as const;

/** One of the states in {@link CatalogState}. */
export type CatalogState = (typeof CatalogState)[keyof typeof CatalogState];

/** The allowed transitions: `CATALOG_TRANSITIONS[from]` lists every legal `to`. */
export const CATALOG_TRANSITIONS: Readonly<Record<CatalogState, readonly CatalogState[]>> =
  Object.freeze({
    DISCOVERING: Object.freeze(['VALIDATING', 'INCOMPLETE', 'QUARANTINED'] as const),
    VALIDATING: Object.freeze([
      'SNAPSHOT_PROVEN',
      'UNVERSIONED_OBSERVATION',
      'QUARANTINED',
    ] as const),
    SNAPSHOT_PROVEN: Object.freeze(['ELIGIBLE', 'RETIRED'] as const),
    UNVERSIONED_OBSERVATION: Object.freeze(['RETIRED'] as const),
    ELIGIBLE: Object.freeze(['RETIRED'] as const),
    INCOMPLETE: Object.freeze(['DISCOVERING'] as const),
    QUARANTINED: Object.freeze([] as const),
    RETIRED: Object.freeze([] as const),
  });

/** True when `from → to` is in {@link CATALOG_TRANSITIONS}. */
export function isLegalTransition(from: CatalogState, to: CatalogState): boolean {
  return CATALOG_TRANSITIONS[from].includes(to);
}

/**
 * Check one move of the state machine.
 *
 * @returns `to`, when the move is legal.
 * @throws CatalogError `INVALID_OPTIONS` (a programming error) when `from → to` is not allowed.
 */
export function transition(from: CatalogState, to: CatalogState): CatalogState {
  if (!isLegalTransition(from, to)) {
    throw new CatalogError(
      ErrorCode.INVALID_OPTIONS,
      `Illegal catalog state transition ${from} → ${to}; allowed from ${from}: ` +
        `${CATALOG_TRANSITIONS[from].join(', ') || 'none (terminal)'}. This is a stepbind bug.`,
      { detail: { from, to } },
    );
  }
  return to;
}

/** True for states with no outgoing transition. */
export function isTerminalState(state: CatalogState): boolean {
  return CATALOG_TRANSITIONS[state].length === 0;
}

/** Records one discovery's path through the state machine; every move is checked. */
export class DiscoveryTracker {
  #state: CatalogState;
  #path: CatalogState[];

  /** @param initial first state. @default 'DISCOVERING' */
  constructor(initial: CatalogState = CatalogState.DISCOVERING) {
    this.#state = initial;
    this.#path = [initial];
  }

  /** The current state. */
  get state(): CatalogState {
    return this.#state;
  }

  /** Every state visited, in order, the current one last. */
  get path(): readonly CatalogState[] {
    return Object.freeze([...this.#path]);
  }

  /**
   * Move to `next`.
   *
   * @throws CatalogError `INVALID_OPTIONS` on an illegal move; the state is unchanged.
   */
  to(next: CatalogState): this {
    this.#state = transition(this.#state, next);
    this.#path.push(next);
    return this;
  }
}

/** Why a traversal's revision tokens make it `INCOMPLETE`. */
export type RevisionIncompleteReason =
  | 'revision-changed'
  | 'revision-missing'
  | 'reread-changed'
  | 'reread-missing'
  | 'revision-appeared';

/** What the revision tokens of one traversal prove. */
export type RevisionClassification =
  | { readonly state: 'SNAPSHOT_PROVEN'; readonly revision: string }
  | { readonly state: 'UNVERSIONED_OBSERVATION' }
  | {
      readonly state: 'INCOMPLETE';
      readonly reason: RevisionIncompleteReason;
      /** Index of the first page that disagrees, or -1 for the re-read. */
      readonly pageIndex: number;
    };

/**
 * Classify a traversal by the `_meta["io.stepbind/catalogRevision"]` token of each page and of the
 * final re-read of page 1 (`'not-read'` when no re-read was made).
 *
 * - every page carries the same token `v` and the re-read carries `v` → `SNAPSHOT_PROVEN`; a
 *   single-page traversal needs no re-read (one response is atomic);
 * - no page carries a token → `UNVERSIONED_OBSERVATION` (unless the re-read suddenly carries one:
 *   `INCOMPLETE`, `revision-appeared`);
 * - a multi-page traversal with consistent tokens but no re-read cannot be proven →
 *   `UNVERSIONED_OBSERVATION`;
 * - a token that changes across pages (`revision-changed`), a page without a token while others
 *   have one (`revision-missing`), or a re-read that differs (`reread-changed`) or lacks it
 *   (`reread-missing`) → `INCOMPLETE`, to be restarted.
 */
export function classifyRevisions(
  pageRevisions: readonly (string | undefined)[],
  // 'not-read' is spelled out for readers although `string` already admits it.
  // eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents
  rereadRevision: string | undefined | 'not-read',
): RevisionClassification {
  const first = pageRevisions.findIndex((r) => r !== undefined);
  if (first === -1) {
    if (rereadRevision !== undefined && rereadRevision !== 'not-read') {
      return { state: 'INCOMPLETE', reason: 'revision-appeared', pageIndex: -1 };
    }
    return { state: 'UNVERSIONED_OBSERVATION' };
  }
  const revision = pageRevisions[first] as string;
  for (let i = 0; i < pageRevisions.length; i++) {
    const r = pageRevisions[i];
    if (r === undefined) return { state: 'INCOMPLETE', reason: 'revision-missing', pageIndex: i };
    if (r !== revision) return { state: 'INCOMPLETE', reason: 'revision-changed', pageIndex: i };
  }
  if (rereadRevision === 'not-read') {
    return pageRevisions.length === 1
      ? { state: 'SNAPSHOT_PROVEN', revision }
      : { state: 'UNVERSIONED_OBSERVATION' };
  }
  if (rereadRevision === undefined) {
    return { state: 'INCOMPLETE', reason: 'reread-missing', pageIndex: -1 };
  }
  if (rereadRevision !== revision) {
    return { state: 'INCOMPLETE', reason: 'reread-changed', pageIndex: -1 };
  }
  return { state: 'SNAPSHOT_PROVEN', revision };
}
