import {
  CatalogError,
  ErrorCode,
  type CatalogRegistry,
  type CatalogSlot,
  type CatalogSnapshot,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { ServerConfig } from './config.js';
import type { DiscoveryStates } from './discovery-states.js';
import { reportUnenforced, type Emit } from './events.js';
import { abortedError, closedError } from './failures.js';
import type { FleetStore } from './fleet/attach.js';

/** What the publication path reads of the runtime (`RuntimeCore` is one). */
export interface PublishContext {
  readonly closed: boolean;
  readonly registry: CatalogRegistry;
  readonly fleet: FleetStore | undefined;
  readonly discovery: DiscoveryStates;
  readonly emit: Emit;
  /** The persistent catalog cache (DESIGN §19.1): every published catalog is recorded there. */
  readonly cache: CatalogCacheAccess | undefined;
}

/**
 * The runtime's use of the persistent catalog cache (DESIGN §19.1), keyed by a server's name and
 * configuration (its identity, audience, principal and tool filter).
 */
export interface CatalogCacheAccess {
  /** The cached catalog of `name` under `config`, restored and verified, if any. */
  lookup(name: string, config: ServerConfig): CatalogSnapshot | undefined;
  /** Records a published catalog (written to disk in the background). */
  record(name: string, config: ServerConfig, catalog: CatalogSnapshot): void;
}

/** The server a catalog is published for (a `ManagedServer`): its slot, and how it installs one. */
export interface PublicationTarget {
  readonly name: string;
  /** The configuration in force (a refresh's {@link Publication.config} overrides it). */
  readonly config: ServerConfig;
  /** The slot of the catalog in force; `undefined` before the first publication. */
  readonly slot: CatalogSlot | undefined;
  /**
   * Installs a published catalog and its listing key, under the slot's write lock (held by the
   * publication): a new slot for a first catalog, a swap otherwise.
   * @returns the new revision of a swap, `undefined` for a first catalog.
   */
  installCatalog(catalog: CatalogSnapshot, listingKey: string | undefined): number | undefined;
}

/** One catalog to publish for one server. */
export interface Publication {
  readonly server: PublicationTarget;
  readonly snapshot: CatalogSnapshot;
  /** The listing key of `snapshot` (see `discoverCatalog`), kept to skip an unchanged re-list. */
  readonly listingKey: string | undefined;
  /** The registry generation the candidate was listed against (its compare-and-set). */
  readonly expectedGeneration: number;
  /** Why a catalog in force is replaced (`catalog-swapped`); a server's first catalog has none. */
  readonly cause: 'refresh' | 'hard-refresh' | 'reconnect';
  /** The configuration the candidate was discovered under. @default the server's */
  readonly config?: ServerConfig;
}

/** Options of {@link publishCatalogs}. */
export interface PublishOptions {
  /** Cancels the wait for the write locks; a cancelled publication publishes nothing. */
  readonly signal?: AbortSignal;
  /**
   * Runs synchronously after every catalog was installed, still under the write locks (the
   * refresh moves its set pointer here, a reconnect installs its new connection).
   */
  readonly commit?: () => void;
  /**
   * Asked again after the fleet's compare-and-set (a database round trip): `false` publishes nothing
   * locally and resolves `false` (a late optional start whose set was superseded meanwhile).
   */
  readonly stillCurrent?: () => boolean;
}

/**
 * THE publication path (refresh, late optional start, hard refresh, reconnect all come here).
 *
 * Takes the revision write lock of every server that has a catalog in force (calls in flight
 * finish first), refuses a closed runtime or a cancelled publication, checks every candidate
 * against the registry before any is published (all or nothing). With a fleet store, the
 * candidates then pass the fleet's compare-and-set as one unit (DESIGN §15): each either moves the
 * shared pointer or adopts the catalog already active there, and the fleet's generation is the one
 * the local registry issues. Then it publishes each through the registry's compare-and-set,
 * installs it (a new slot for a first catalog, a swap that moves the revision otherwise), records
 * its listing key and runs `commit`; after the locks are released it announces each catalog
 * (`patterns-unenforced`, `catalog-swapped` for a swap, the discovery state).
 *
 * @returns false only when `stillCurrent` said no after the fleet round trip (nothing published).
 * @throws CatalogError `PUBLISH_CONFLICT` (nothing was published locally; an identity change says
 *   to call `acceptIdentityChange`; `detail.fleet` marks a refusal of the fleet's CAS);
 *   RuntimeError `RUNTIME_CLOSED`, `ABORTED`, `STORE_UNAVAILABLE`.
 */
export async function publishCatalogs(
  core: PublishContext,
  items: readonly Publication[],
  options: PublishOptions = {},
): Promise<boolean> {
  const { signal } = options;
  const releases: (() => void)[] = [];
  const swapped: { item: Publication; catalog: CatalogSnapshot; revision: number | undefined }[] =
    [];
  try {
    for (const item of items) {
      const slot = item.server.slot;
      if (slot !== undefined)
        releases.push(await slot.lock.acquireWrite(signal === undefined ? {} : { signal }));
    }
    if (core.closed) throw closedError();
    // Waiting for calls in flight can take long: a publication cancelled meanwhile publishes nothing.
    if (signal?.aborted === true) throw abortedError(signal.reason);
    // Check every precondition first so that either all catalogs publish or none does.
    for (const item of items) checkPublishable(core, item);
    const generations = await fleetGenerations(core, items);
    if (generations !== undefined) {
      if (core.closed) throw closedError();
      if (options.stillCurrent?.() === false) return false;
      // The database round trip let other work run: the local registry must still agree.
      for (const item of items) checkPublishable(core, item, generations.get(item));
    }
    for (const item of items) {
      const catalog = core.registry.publish(
        item.snapshot,
        publishOptions(core, item, generations?.get(item)),
      );
      const revision = item.server.installCatalog(catalog, item.listingKey);
      swapped.push({ item, catalog, revision });
    }
    options.commit?.();
  } finally {
    for (const release of releases) release();
  }
  for (const { item, catalog, revision } of swapped) {
    const server = item.server.name;
    core.cache?.record(server, item.config ?? item.server.config, catalog);
    core.discovery.published(server, catalog);
    reportUnenforced(core.emit, server, catalog);
    if (revision !== undefined) {
      core.emit({
        type: 'catalog-swapped',
        server,
        generation: catalog.generation,
        revision,
        cause: item.cause,
      });
    }
  }
  return true;
}

/**
 * The fleet's compare-and-set for `items` (one transaction; all move or none), or `undefined`
 * without a fleet store. @returns the fleet generation of each item.
 */
async function fleetGenerations(
  core: PublishContext,
  items: readonly Publication[],
): Promise<Map<Publication, number> | undefined> {
  const fleet = core.fleet;
  if (fleet === undefined || items.length === 0) return undefined;
  let decided;
  try {
    decided = await fleet.publish(items.map((item) => item.snapshot));
  } catch (error) {
    const refused = items.find(
      (item) => error instanceof CatalogError && error.detail['server'] === item.server.name,
    );
    if (refused !== undefined) core.discovery.refused(refused.server.name, error as CatalogError);
    throw error;
  }
  const generations = new Map<Publication, number>();
  for (const [i, item] of items.entries()) {
    const publication = decided[i];
    if (publication !== undefined) generations.set(item, publication.generation);
  }
  return generations;
}

/** Throws what the registry would refuse for `item` (nothing changes), so a set publishes whole. */
function checkPublishable(core: PublishContext, item: Publication, generation?: number): void {
  const conflict = core.registry.check(item.snapshot, publishOptions(core, item, generation));
  if (conflict === undefined) return;
  const error: StepbindError =
    conflict.detail['reason'] !== 'identity-changed'
      ? conflict
      : new CatalogError(
          ErrorCode.PUBLISH_CONFLICT,
          `${conflict.message} If the new identity is expected, call acceptIdentityChange("${item.server.name}").`,
          { detail: conflict.detail, cause: conflict },
        );
  core.discovery.refused(item.server.name, error);
  throw error;
}

function publishOptions(
  core: PublishContext,
  item: Publication,
  generation: number | undefined,
): { expectedGeneration: number; expectIdentityChange: boolean; generation?: number } {
  const registered = core.registry.identityOf(item.server.name);
  return {
    expectedGeneration: item.expectedGeneration,
    ...(generation === undefined ? {} : { generation }),
    expectIdentityChange:
      registered !== undefined &&
      registered.transportDigest !== item.snapshot.identity.transportDigest,
  };
}
