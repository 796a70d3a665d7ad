import {
  CatalogError,
  CatalogSlot,
  ErrorCode,
  type CatalogSnapshot,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { RuntimeCore } from './core.js';
import { reportUnenforced } from './events.js';
import { abortedError, closedError } from './failures.js';
import type { ServerSession } from './session.js';

/** One catalog to publish for one session. */
export interface Publication {
  readonly session: ServerSession;
  readonly snapshot: CatalogSnapshot;
  /** The listing key of `snapshot` (see `listCatalog`), kept to skip an unchanged re-list. */
  readonly listingKey: string | undefined;
  /** The registry generation the candidate was listed against (its compare-and-set). */
  readonly expectedGeneration: number;
  /** Why a catalog in force is replaced (`catalog-swapped`); a session's first catalog has none. */
  readonly cause: 'refresh' | 'hard-refresh' | 'reconnect';
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
}

/**
 * THE publication path (refresh, late optional start, hard refresh, reconnect all come here).
 *
 * Takes the revision write lock of every session that has a catalog in force (calls in flight
 * finish first), refuses a closed runtime or a cancelled publication, checks every candidate
 * against the registry before any is published (all or nothing), then publishes each through the
 * registry's compare-and-set, installs it (a new slot for a first catalog, a swap that moves the
 * revision otherwise), records its listing key and runs `commit`; after the locks are released it
 * announces each catalog (`patterns-unenforced`, `catalog-swapped` for a swap, the discovery state).
 *
 * @throws CatalogError `PUBLISH_CONFLICT` (nothing was published; an identity change says to call
 *   `acceptIdentityChange`); RuntimeError `RUNTIME_CLOSED`, `ABORTED`.
 */
export async function publishCatalogs(
  core: RuntimeCore,
  items: readonly Publication[],
  options: PublishOptions = {},
): Promise<void> {
  const { signal } = options;
  const releases: (() => void)[] = [];
  const swapped: { item: Publication; catalog: CatalogSnapshot; revision: number | undefined }[] =
    [];
  try {
    for (const item of items) {
      const slot = item.session.slot;
      if (slot !== undefined)
        releases.push(await slot.lock.acquireWrite(signal === undefined ? {} : { signal }));
    }
    if (core.closed) throw closedError();
    // Waiting for calls in flight can take long: a publication cancelled meanwhile publishes nothing.
    if (signal?.aborted === true) throw abortedError(signal.reason);
    // Check every precondition first so that either all catalogs publish or none does.
    for (const item of items) checkPublishable(core, item);
    for (const item of items) {
      const { session, snapshot } = item;
      const catalog = core.registry.publish(snapshot, publishOptions(core, item));
      let revision: number | undefined;
      if (session.slot === undefined) session.slot = new CatalogSlot(session.name, catalog);
      else revision = session.slot.installLocked(catalog);
      session.listingKey = item.listingKey;
      swapped.push({ item, catalog, revision });
    }
    options.commit?.();
  } finally {
    for (const release of releases) release();
  }
  for (const { item, catalog, revision } of swapped) {
    const server = item.session.name;
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
}

/** Throws what the registry would refuse for `item` (nothing changes), so a set publishes whole. */
function checkPublishable(core: RuntimeCore, item: Publication): void {
  const conflict = core.registry.check(item.snapshot, publishOptions(core, item));
  if (conflict === undefined) return;
  const error: StepbindError =
    conflict.detail['reason'] !== 'identity-changed'
      ? conflict
      : new CatalogError(
          ErrorCode.PUBLISH_CONFLICT,
          `${conflict.message} If the new identity is expected, call acceptIdentityChange("${item.session.name}").`,
          { detail: conflict.detail, cause: conflict },
        );
  core.discovery.refused(item.session.name, error);
  throw error;
}

function publishOptions(
  core: RuntimeCore,
  item: Publication,
): { expectedGeneration: number; expectIdentityChange: boolean } {
  const registered = core.registry.identityOf(item.session.name);
  return {
    expectedGeneration: item.expectedGeneration,
    expectIdentityChange:
      registered !== undefined &&
      registered.transportDigest !== item.snapshot.identity.transportDigest,
  };
}
