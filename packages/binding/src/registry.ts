/**
 * The single acceptance point for catalogs (DESIGN §3.5, §3.7).
 *
 * @packageDocumentation
 */
import { canonicalJson } from './canonical.js';
import { CatalogError, ErrorCode } from './errors.js';
import { CATALOG_SNAPSHOT_SCHEMA, withGeneration } from './snapshot/snapshot.js';
import type { CatalogSnapshot, ServerIdentity } from './snapshot/snapshot.js';

/**
 * Where a published snapshot is in its life, as the registry sees it:
 * - `ELIGIBLE` / `UNVERSIONED_OBSERVATION`: the active snapshot of its (server, audience);
 * - `SUPERSEDED`: no longer active but still held by someone (readable, draining);
 * - `RETIRED`: superseded and drained (the `RETIRED` state of the discovery state machine).
 */
export type SnapshotLifecycle = 'ELIGIBLE' | 'UNVERSIONED_OBSERVATION' | 'SUPERSEDED' | 'RETIRED';

/** Why {@link CatalogRegistry.publish} refused a candidate (`detail.reason` of `PUBLISH_CONFLICT`). */
export type PublishConflictReason =
  'generation' | 'policy-epoch' | 'identity-changed' | 'not-a-candidate';

/** Options of {@link CatalogRegistry}. */
export interface CatalogRegistryOptions {
  /** Policy epoch in force at creation. @default 0 */
  readonly policyEpoch?: number;
  /**
   * Called once when a snapshot becomes `RETIRED`, after the registry's state is updated. Must not
   * throw (an exception propagates to the caller of `publish`/`release`/`retireServer`).
   */
  readonly onRetired?: (snapshot: CatalogSnapshot) => void;
}

/** Options of {@link CatalogRegistry.publish}. */
export interface PublishOptions {
  /** Generation the caller saw as active for (server, audience) when it started; 0 for none. */
  readonly expectedGeneration: number;
  /**
   * Accept a candidate whose identity (transport digest, serverInfo, protocol version) differs from
   * the one registered for its server name; the server's snapshots for every other audience are
   * then superseded. @default false
   */
  readonly expectIdentityChange?: boolean;
  /**
   * The generation a shared registry (the PostgreSQL fleet store) assigned to this candidate, so
   * every process of a fleet numbers a catalog alike. Must exceed every generation this registry
   * issued for the key (else `PUBLISH_CONFLICT`, reason `generation`). @default the next local one
   */
  readonly generation?: number;
}

/** A held snapshot; call `release` (idempotent) when done. */
export interface HeldSnapshot {
  readonly snapshot: CatalogSnapshot;
  readonly release: () => void;
}

/** The active catalog of one (server, audience) pair and the generations issued for it. */
interface AudiencePointer {
  readonly server: string;
  active: CatalogSnapshot | undefined;
  /** Highest generation ever issued for this key; never decreases. */
  issued: number;
}

interface SnapshotRecord {
  readonly key: string;
  holders: number;
  active: boolean;
  retired: boolean;
}

/**
 * Holds the active catalog per (server identity, audience class) and moves it only by
 * compare-and-set. One identity is registered per configured server name, so the (name, audience)
 * pointer is the (identity, audience) pointer; a read that names a different identity gets nothing.
 *
 * Guarantees: a refused publication changes nothing; generations issued for a key strictly increase
 * (also across A-B-A and identity changes); reads for one audience never see another's snapshot;
 * superseded snapshots stay readable while held and become `RETIRED` when the last holder releases.
 */
export class CatalogRegistry {
  #policyEpoch: number;
  readonly #onRetired: ((snapshot: CatalogSnapshot) => void) | undefined;
  readonly #identities = new Map<string, ServerIdentity>();
  readonly #pointers = new Map<string, AudiencePointer>();
  readonly #records = new WeakMap<CatalogSnapshot, SnapshotRecord>();

  constructor(options: CatalogRegistryOptions = {}) {
    this.#policyEpoch = options.policyEpoch ?? 0;
    this.#onRetired = options.onRetired;
  }

  /** The policy epoch candidates must carry to be published. */
  get policyEpoch(): number {
    return this.#policyEpoch;
  }

  /**
   * Raise the policy epoch. Candidates built under an older epoch are refused from now on; active
   * snapshots are left in place (the runtime decides whether to refresh them).
   *
   * @throws CatalogError `INVALID_OPTIONS` when `epoch` is lower than the current one or not an integer.
   */
  setPolicyEpoch(epoch: number): void {
    if (!Number.isSafeInteger(epoch) || epoch < this.#policyEpoch) {
      throw new CatalogError(
        ErrorCode.INVALID_OPTIONS,
        `The policy epoch can only increase (current ${this.#policyEpoch}, got ${String(epoch)}).`,
        { detail: { current: this.#policyEpoch, requested: epoch } },
      );
    }
    this.#policyEpoch = epoch;
  }

  /** The identity registered for a configured server name, if any. */
  identityOf(server: string): ServerIdentity | undefined {
    return this.#identities.get(server);
  }

  /**
   * The active snapshot for (server, audience), or `undefined`. `server` is a configured name or a
   * full identity; with an identity, a snapshot of any other identity is never returned.
   */
  current(server: string | ServerIdentity, audience: string): CatalogSnapshot | undefined {
    const name = typeof server === 'string' ? server : server.name;
    const active = this.#pointers.get(pointerKey(name, audience))?.active;
    if (active === undefined) return undefined;
    if (typeof server !== 'string' && !sameIdentity(active.identity, server)) return undefined;
    return active;
  }

  /** Highest generation ever issued for (server, audience); 0 when none. */
  lastIssuedGeneration(server: string, audience: string): number {
    return this.#pointers.get(pointerKey(server, audience))?.issued ?? 0;
  }

  /**
   * What {@link publish} would refuse, without changing anything: the `PUBLISH_CONFLICT` error it
   * would throw, or `undefined` when the candidate would be published. Lets a caller check several
   * candidates first so that either all of them publish or none does.
   */
  check(candidate: CatalogSnapshot, options: PublishOptions): CatalogError | undefined {
    const name = candidate.identity.name;
    const { audience } = candidate;
    const activeGeneration =
      this.#pointers.get(pointerKey(name, audience))?.active?.generation ?? 0;
    const refuse = (reason: PublishConflictReason, message: string): CatalogError =>
      new CatalogError(ErrorCode.PUBLISH_CONFLICT, `${message} Nothing was published.`, {
        detail: {
          server: name,
          audience,
          reason,
          expectedGeneration: options.expectedGeneration,
          activeGeneration,
          candidatePolicyEpoch: candidate.policyEpoch,
          policyEpoch: this.#policyEpoch,
        },
      });
    if (
      candidate.schema !== CATALOG_SNAPSHOT_SCHEMA ||
      candidate.generation !== 0 ||
      (candidate.state !== 'SNAPSHOT_PROVEN' && candidate.state !== 'UNVERSIONED_OBSERVATION')
    ) {
      return refuse(
        'not-a-candidate',
        `The catalog of server "${name}" is not an unpublished candidate (generation ${candidate.generation}, state ${candidate.state}); publish the result of createCatalogSnapshot.`,
      );
    }
    if (candidate.policyEpoch !== this.#policyEpoch) {
      return refuse(
        'policy-epoch',
        `The catalog of server "${name}" was built under policy epoch ${candidate.policyEpoch}, but epoch ${this.#policyEpoch} is in force; refresh the server again.`,
      );
    }
    const registered = this.#identities.get(name);
    const identityChanged =
      registered !== undefined && !sameIdentity(registered, candidate.identity);
    if (identityChanged && options.expectIdentityChange !== true) {
      return refuse(
        'identity-changed',
        `Server "${name}" now has a different identity (transport, serverInfo or protocol version); reconnect deliberately and publish with expectIdentityChange, or retireServer("${name}") first.`,
      );
    }
    const issued = this.#pointers.get(pointerKey(name, audience))?.issued ?? 0;
    if (options.generation !== undefined && !(options.generation > issued)) {
      return refuse(
        'generation',
        `The shared registry assigned generation ${options.generation} to the catalog of server "${name}" for audience "${audience}", but generation ${issued} was already issued here; refresh again.`,
      );
    }
    if (activeGeneration !== options.expectedGeneration) {
      return refuse(
        'generation',
        `The catalog of server "${name}" for audience "${audience}" moved to generation ${activeGeneration} while this refresh expected ${options.expectedGeneration}; a newer refresh won.`,
      );
    }

    return undefined;
  }

  /**
   * Publish a candidate (a snapshot with generation 0) as the active catalog of its
   * (server, audience), if the active generation still equals `expectedGeneration`. The published
   * copy gets the next generation of that key and the state `ELIGIBLE` (proven) or
   * `UNVERSIONED_OBSERVATION`; the previous active snapshot is superseded.
   *
   * @returns the published, frozen snapshot.
   * @throws CatalogError `PUBLISH_CONFLICT` (nothing changed) when the candidate is not a candidate,
   *   its policy epoch is not the registry's, its identity changed without `expectIdentityChange`,
   *   or the active generation is not `expectedGeneration`. `detail.reason` says which.
   */
  publish(candidate: CatalogSnapshot, options: PublishOptions): CatalogSnapshot {
    const conflict = this.check(candidate, options);
    if (conflict !== undefined) throw conflict;
    const name = candidate.identity.name;
    const key = pointerKey(name, candidate.audience);
    const pointer = this.#pointers.get(key);
    const registered = this.#identities.get(name);
    const identityChanged =
      registered !== undefined && !sameIdentity(registered, candidate.identity);

    const retired: CatalogSnapshot[] = [];
    if (identityChanged) {
      for (const [otherKey, other] of this.#pointers) {
        if (otherKey !== key && other.server === name) this.#supersede(other, retired);
      }
    }
    this.#identities.set(name, candidate.identity);
    const target = pointer ?? { server: name, active: undefined, issued: 0 };
    if (pointer === undefined) this.#pointers.set(key, target);
    const published = withGeneration(
      candidate,
      options.generation ?? target.issued + 1,
      candidate.state === 'SNAPSHOT_PROVEN' ? 'ELIGIBLE' : 'UNVERSIONED_OBSERVATION',
    );
    target.issued = published.generation;
    this.#supersede(target, retired);
    target.active = published;
    this.#records.set(published, { key, holders: 0, active: true, retired: false });
    this.#notify(retired);
    return published;
  }

  /**
   * Supersede every active snapshot of a server (all audiences) and forget its identity, so the
   * next publication for that name may carry any identity (with `expectedGeneration: 0`).
   * Generation counters are kept, so later generations are still higher.
   */
  retireServer(server: string): void {
    const retired: CatalogSnapshot[] = [];
    for (const pointer of this.#pointers.values()) {
      if (pointer.server === server) this.#supersede(pointer, retired);
    }
    this.#identities.delete(server);
    this.#notify(retired);
  }

  /**
   * Hold a published snapshot so it stays readable after it is superseded.
   *
   * @returns an idempotent release function.
   * @throws CatalogError `SNAPSHOT_RETIRED` when the snapshot already retired;
   *   `INVALID_OPTIONS` when this registry did not publish it.
   */
  acquire(snapshot: CatalogSnapshot): () => void {
    const record = this.#records.get(snapshot);
    if (record === undefined) {
      throw new CatalogError(
        ErrorCode.INVALID_OPTIONS,
        `This catalog of server "${snapshot.identity.name}" was not published by this registry.`,
        { detail: { server: snapshot.identity.name, audience: snapshot.audience } },
      );
    }
    if (record.retired) {
      throw new CatalogError(
        ErrorCode.SNAPSHOT_RETIRED,
        `Generation ${snapshot.generation} of server "${snapshot.identity.name}" is retired; capture the current catalog instead.`,
        {
          detail: {
            server: snapshot.identity.name,
            audience: snapshot.audience,
            generation: snapshot.generation,
          },
        },
      );
    }
    record.holders++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      record.holders--;
      if (!record.active && record.holders === 0 && !record.retired) {
        record.retired = true;
        this.#notify([snapshot]);
      }
    };
  }

  /** Atomically read and hold the active snapshot for (server, audience), or `undefined`. */
  acquireCurrent(server: string | ServerIdentity, audience: string): HeldSnapshot | undefined {
    const snapshot = this.current(server, audience);
    if (snapshot === undefined) return undefined;
    return Object.freeze({ snapshot, release: this.acquire(snapshot) });
  }

  /** The live lifecycle of a snapshot this registry published, else `undefined`. */
  lifecycleOf(snapshot: CatalogSnapshot): SnapshotLifecycle | undefined {
    const record = this.#records.get(snapshot);
    if (record === undefined) return undefined;
    if (record.retired) return 'RETIRED';
    if (!record.active) return 'SUPERSEDED';
    return snapshot.state === 'ELIGIBLE' ? 'ELIGIBLE' : 'UNVERSIONED_OBSERVATION';
  }

  #supersede(pointer: AudiencePointer, retired: CatalogSnapshot[]): void {
    const old = pointer.active;
    if (old === undefined) return;
    pointer.active = undefined;
    const record = this.#records.get(old);
    if (record === undefined) return;
    record.active = false;
    if (record.holders === 0) {
      record.retired = true;
      retired.push(old);
    }
  }

  #notify(retired: readonly CatalogSnapshot[]): void {
    if (this.#onRetired === undefined) return;
    for (const snapshot of retired) this.#onRetired(snapshot);
  }
}

/** True when two identities denote the same server: every field equal (serverInfo canonically). */
export function sameIdentity(a: ServerIdentity, b: ServerIdentity): boolean {
  return (
    a.name === b.name &&
    a.transportDigest === b.transportDigest &&
    a.protocolVersion === b.protocolVersion &&
    (a.serverInfo === b.serverInfo ||
      (a.serverInfo !== undefined &&
        b.serverInfo !== undefined &&
        canonicalJson(a.serverInfo) === canonicalJson(b.serverInfo)))
  );
}

function pointerKey(server: string, audience: string): string {
  return JSON.stringify([server, audience]);
}
