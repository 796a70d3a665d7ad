import { Mutex } from 'async-mutex';
import {
  CatalogRegistry,
  SchemaValidatorCache,
  type CatalogSnapshot,
  type ServerIdentity,
} from '@stepbind/binding/internal';
import { listCatalog, type CatalogListing } from './catalog-listing.js';
import { systemClock, type RuntimeClock } from './clock.js';
import type { RuntimeConfig, ServerConfig } from './config.js';
import type { ConnectionSet } from './connection-set.js';
import { DiscoveryStates } from './discovery-states.js';
import { listingContextOf, recordListing, type ListingFreshness } from './era/listing-cache.js';
import { createEmitter, type Emit } from './events.js';
import type { FleetStore } from './fleet/attach.js';
import type { McpRuntimeOptions, ServerConnector } from './options.js';
import type { Connection } from './connection.js';
import { stopRecovery, type ServerSession } from './session.js';

/**
 * The state one {@link McpRuntime} shares between its rooms (refresh, publish, hard refresh,
 * reconnect): the registry, the sessions and sets alive, the dirty flag, the clock and the emitter.
 * Internal: the facade in `runtime.ts` owns one and hands it to the functions of those files.
 */
export class RuntimeCore {
  readonly registry: CatalogRegistry;
  readonly validatorCache = new SchemaValidatorCache();
  /** The one-permit semaphore of `refreshIfDirty`. */
  readonly refreshMutex = new Mutex();
  readonly options: McpRuntimeOptions;
  readonly clock: RuntimeClock;
  readonly connect: ServerConnector;
  readonly closeController = new AbortController();
  readonly sessions = new Set<ServerSession>();
  readonly liveSets = new Set<ConnectionSet>();
  /** Late optional starts and background reconnects, awaited by `close()`. */
  readonly background = new Set<Promise<void>>();
  /** Servers whose next refresh must start a new connection (after `acceptIdentityChange`). */
  readonly forceRestart = new Set<string>();
  /** Each server's discovery state (DESIGN §5), for `status()` and `discovery-state` events. */
  readonly discovery: DiscoveryStates;
  readonly emit: Emit;
  /** The shared fleet store (`store` option), whose CAS every publication passes; set at open. */
  fleet: FleetStore | undefined;
  /** Installs a session's listeners (list_changed, close, logs); set by the facade. */
  watch: (session: ServerSession) => void = () => undefined;
  config: RuntimeConfig;
  current: ConnectionSet | undefined;
  rebuilding = false;
  dirty = false;
  dirtyReasons: string[] = [];
  setCounter = 0;
  rebuilds = 0;
  /** True from the first `close()` on. */
  closed = false;
  /** True once `close()` finished: every connection, the journal and the fleet store closed. */
  closeDone = false;

  constructor(config: RuntimeConfig, options: McpRuntimeOptions, connect: ServerConnector) {
    this.config = config;
    this.options = options;
    this.connect = connect;
    this.clock = options.clock ?? systemClock;
    this.emit = createEmitter(options.onEvent);
    this.discovery = new DiscoveryStates(this.emit);
    this.registry = new CatalogRegistry({ policyEpoch: options.policyEpoch ?? 0 });
  }

  /** Records that the next capture must rebuild the ConnectionSet first. */
  markDirty(reason: string): void {
    this.dirty = true;
    this.dirtyReasons.push(reason);
  }

  /** Marks every cached binding view stale, so new steps bind what changed. */
  invalidateViews(): void {
    for (const set of this.liveSets) set.invalidate();
    this.current?.invalidate();
  }

  /**
   * Lists one connection of `session` into a candidate (or nothing, for an unchanged listing). A
   * modern connection's listing comes with its freshness record (each page timed on the clock),
   * which the caller installs on the session once the listing is the published one; listing the
   * session's own connection drops the record it had (it only ever describes the published listing).
   */
  list(
    session: ServerSession,
    config: ServerConfig,
    signal: AbortSignal,
    via?: {
      readonly connection: Connection;
      readonly identity: ServerIdentity;
      /** Whether an unchanged listing may skip validation (not when the identity changed). */
      readonly compare: boolean;
    },
  ): Promise<CatalogListing & { readonly freshness: ListingFreshness | undefined }> {
    const connection = via?.connection ?? session.connection;
    if (via === undefined) session.freshness = undefined;
    const recorder =
      connection.era === 'modern'
        ? recordListing(connection.listSource, this.clock, connection.changes)
        : undefined;
    // An unchanged listing may skip validation only while the published catalog's epoch holds.
    const current = session.slot?.catalog;
    const previousListingKey =
      current !== undefined &&
      current.policyEpoch === this.registry.policyEpoch &&
      via?.compare !== false
        ? session.listingKey
        : undefined;
    const listing = listCatalog(connection, {
      ...(recorder === undefined ? {} : { source: recorder.source }),
      ...(previousListingKey === undefined ? {} : { previousListingKey }),
      // The first listing of a new connection has nothing to compare with; re-lists key theirs.
      keyListing: current !== undefined,
      name: session.name,
      config,
      identity: via?.identity ?? session.identity,
      policyEpoch: this.registry.policyEpoch,
      ...(this.options.validation === undefined ? {} : { validation: this.options.validation }),
      validatorCache: this.validatorCache,
      signal,
      onPage: (progress) => this.emit({ type: 'discovery-page', ...progress }),
      onValidating: () => this.discovery.validating(session.name),
    }).then((found) => ({
      ...found,
      freshness: recorder?.finish(found.enumeration.pages.length, listingContextOf(config)),
    }));
    return this.discovery.track(session.name, listing, session.slot?.catalog);
  }

  /** True when `candidate` adds nothing over the session's published catalog. */
  unchanged(session: ServerSession, candidate: CatalogSnapshot | undefined): boolean {
    if (candidate === undefined) return true;
    const current = session.slot?.catalog;
    return (
      current !== undefined &&
      current.pageRoot === candidate.pageRoot &&
      current.sourceRevision === candidate.sourceRevision &&
      current.policyEpoch === candidate.policyEpoch &&
      (current.state === 'ELIGIBLE') === (candidate.state === 'SNAPSHOT_PROVEN')
    );
  }

  /** Closes a retired set's sessions no other set holds, once no binding holds the set. */
  maybeDrain(set: ConnectionSet): void {
    if (!set.retired || set.bindings > 0 || !this.liveSets.has(set)) return;
    this.liveSets.delete(set);
    set.detach();
    for (const session of set.sessions()) {
      session.refs--;
      if (session.refs <= 0) void this.closeSession(session);
    }
  }

  /** Stops a session's timers and listeners and closes its connection. Idempotent. */
  closeSession(session: ServerSession): Promise<void> {
    session.closing ??= (async () => {
      if (session.debounce !== undefined) this.clock.clearTimeout(session.debounce);
      session.debounce = undefined;
      stopRecovery(session, this.clock);
      session.idle?.resolve();
      session.idle = undefined;
      for (const off of session.unsubscribe) off();
      session.unsubscribe = [];
      await session.connection.close();
      this.sessions.delete(session);
    })();
    return session.closing;
  }

  /** Tracks background work so `close()` can wait for it. */
  track(work: Promise<void>): void {
    this.background.add(work);
    void work.finally(() => this.background.delete(work));
  }
}
