import { Mutex } from 'async-mutex';
import type { CatalogCache } from './cache/catalog-cache.js';
import PQueue from 'p-queue';
import {
  CatalogRegistry,
  SchemaValidatorCache,
  type BoundServer,
} from '@stepbind/binding/internal';
import { discoverCatalog } from './discover-catalog.js';
import { systemClock, type RuntimeClock } from './clock.js';
import type { RuntimeConfig, ServerConfig } from './config.js';
import { boundServerOf, type ConnectionSet } from './connection-set.js';
import { DiscoveryStates } from './discovery-states.js';
import { listingContextOf, recordListing } from './era/listing-cache.js';
import { createEmitter, type Emit } from './events.js';
import type { FleetStore } from './fleet/attach.js';
import type { McpRuntimeOptions, ServerConnector } from './options.js';
import {
  publishCatalogs,
  type CatalogCacheAccess,
  type Publication,
  type PublishOptions,
} from './publish.js';
import type { Discovered, DiscoveryRequest, ServerHost } from './server/host.js';
import type { ManagedServer } from './server/managed-server.js';
import type { ProvisionalHost, ProvisionalServer } from './server/provisional.js';
import { ServerAuthorizers } from './server/authorizers.js';

/**
 * The set-level state of one {@link McpRuntime}: the registry, the servers and sets alive, the
 * dirty flag, the background work, the clock and the emitter. It is the {@link ServerHost} of
 * every {@link ManagedServer} (which owns its own state). Internal: the facade in `runtime.ts`
 * owns one and hands it to the refresh and status functions.
 */
export class RuntimeCore implements ServerHost, ProvisionalHost {
  readonly registry: CatalogRegistry;
  readonly validatorCache = new SchemaValidatorCache();
  /** The one-permit semaphore of `refreshIfDirty`. */
  readonly refreshMutex = new Mutex();
  readonly options: McpRuntimeOptions;
  readonly clock: RuntimeClock;
  readonly connect: ServerConnector;
  readonly closeController = new AbortController();
  /** Every server with a connection (in a set, starting, or closing). */
  readonly servers = new Set<ManagedServer>();
  readonly liveSets = new Set<ConnectionSet>();
  /** Late optional starts and background reconnects, awaited by `close()`. */
  readonly background = new Set<Promise<void>>();
  /** Servers whose next refresh must start a new connection (after `acceptIdentityChange`). */
  readonly forceRestart = new Set<string>();
  /** Each server's discovery state (DESIGN §5), for `status()` and `discovery-state` events. */
  readonly discovery: DiscoveryStates;
  readonly emit: Emit;
  /** The shared fleet store (`store` option), whose CAS every publication passes. */
  readonly fleet: FleetStore | undefined;
  /** The authorizer (and redactor) of every HTTP server with `auth`, kept across reconnects. */
  readonly auth: ServerAuthorizers;
  /** The persistent catalog cache (DESIGN §19.1), when the options or configuration name one. */
  cache: CatalogCacheAccess | undefined;
  /** Its file, closed (flushed) by the runtime's `close()`. */
  cacheFile: CatalogCache | undefined;
  /**
   * Servers whose live start failed since their catalog was last published: the next refresh
   * starts them for real instead of showing their cached catalog again (DESIGN §19.2).
   */
  readonly liveFailed = new Set<string>();
  /** Bounds the live starts of provisional servers (the configuration's `concurrency`). */
  readonly startQueue: PQueue;
  /**
   * How a provisional server starts and an idle lazy server stops (`provisional-start.ts`),
   * installed by the runtime that owns this core.
   */
  readonly lifecycle: {
    startLive?: (server: ProvisionalServer) => Promise<ManagedServer>;
    stopIdle?: (server: ManagedServer) => void;
  } = {};
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

  constructor(
    config: RuntimeConfig,
    options: McpRuntimeOptions,
    connect: ServerConnector,
    fleet: FleetStore | undefined,
    auth: ServerAuthorizers = new ServerAuthorizers(options),
  ) {
    this.auth = auth;
    this.config = config;
    this.fleet = fleet;
    this.options = options;
    this.connect = connect;
    this.clock = options.clock ?? systemClock;
    this.emit = createEmitter(options.onEvent);
    this.discovery = new DiscoveryStates(this.emit);
    this.registry = new CatalogRegistry({ policyEpoch: options.policyEpoch ?? 0 });
    this.startQueue = new PQueue({ concurrency: config.concurrency });
  }

  /** {@inheritDoc ProvisionalHost.startLive} */
  startLive(server: ProvisionalServer): Promise<ManagedServer> {
    const startLive = this.lifecycle.startLive;
    if (startLive === undefined) throw new Error('stepbind: the runtime installed no live start');
    const start = startLive(server);
    this.track(
      start.then(
        () => undefined,
        () => undefined,
      ),
    );
    return start;
  }

  /** {@inheritDoc ProvisionalHost.boundOf} */
  boundOf(server: ManagedServer): BoundServer {
    const bound = boundServerOf(server, this.options.approval ?? 'unproven-writes');
    if (bound === undefined) throw new Error(`stepbind: server ${server.name} has no catalog`);
    return bound;
  }

  /** {@inheritDoc ServerHost.idleStop} */
  idleStop(server: ManagedServer): void {
    this.lifecycle.stopIdle?.(server);
  }

  /** Records that the next capture must rebuild the ConnectionSet first. */
  markDirty(reason: string): void {
    this.dirty = true;
    this.dirtyReasons.push(reason);
  }

  /** Withdraws one dirty reason; the flag clears when none is left. */
  withdrawDirty(reason: string): void {
    this.dirtyReasons = this.dirtyReasons.filter((r) => r !== reason);
    if (this.dirtyReasons.length === 0) this.dirty = false;
  }

  /** Fires at `close()`. */
  get closeSignal(): AbortSignal {
    return this.closeController.signal;
  }

  /** {@inheritDoc ServerHost.authPrincipal} */
  authPrincipal(name: string, config: ServerConfig): string {
    return this.auth.principalOf(name, config);
  }

  /** True when `server` is the one the current set serves under its name. */
  inService(server: { readonly name: string }): boolean {
    const entry = this.current?.entries.get(server.name);
    return entry?.kind === 'ready' && entry.server === server;
  }

  /** {@inheritDoc ServerHost.publish} */
  publish(items: readonly Publication[], options?: PublishOptions): Promise<boolean> {
    return publishCatalogs(this, items, options);
  }

  /** Marks every cached binding view stale, so new steps bind what changed. */
  invalidateViews(): void {
    for (const set of this.liveSets) set.invalidate();
    this.current?.invalidate();
  }

  /**
   * Discovers one connection into a candidate (or nothing, for an unchanged listing). A modern
   * connection's listing comes with its freshness record (each page timed on the clock), which the
   * server installs once the listing is the published one.
   */
  discover(request: DiscoveryRequest): Promise<Discovered> {
    const { name, config, connection, published, signal } = request;
    const recorder =
      connection.era === 'modern'
        ? recordListing(connection.listSource, this.clock, connection.changes)
        : undefined;
    // An unchanged listing may skip validation only while the published catalog's epoch holds.
    const previousListingKey =
      published !== undefined && published.policyEpoch === this.registry.policyEpoch
        ? request.listingKey
        : undefined;
    const listing = discoverCatalog(connection, {
      ...(recorder === undefined ? {} : { source: recorder.source }),
      ...(previousListingKey === undefined ? {} : { previousListingKey }),
      // The first listing of a new connection has nothing to compare with; re-lists key theirs.
      keyListing: published !== undefined,
      name,
      config,
      identity: request.identity,
      policyEpoch: this.registry.policyEpoch,
      ...(this.options.validation === undefined ? {} : { validation: this.options.validation }),
      validatorCache: this.validatorCache,
      signal,
      onPage: (progress) => this.emit({ type: 'discovery-page', ...progress }),
      onValidating: () => this.discovery.validating(name),
    }).then((found) => ({
      ...found,
      freshness: recorder?.finish(
        found.discovered.pages.length,
        listingContextOf(config, this.auth.principalOf(name, config)),
      ),
    }));
    return this.discovery.track(name, listing, published);
  }

  /** Closes a retired set's servers no other set holds, once no binding holds the set. */
  maybeDrain(set: ConnectionSet): void {
    if (!set.retired || set.bindings > 0 || !this.liveSets.has(set)) return;
    this.liveSets.delete(set);
    set.detach();
    for (const server of set.servers()) if (server.leaveSet()) void this.closeServer(server);
  }

  /** Closes a server (timers, listeners, connection) and forgets it. Idempotent. */
  async closeServer(server: ManagedServer): Promise<void> {
    await server.close();
    this.servers.delete(server);
  }

  /** Tracks background work so `close()` can wait for it. */
  track(work: Promise<void>): void {
    this.background.add(work);
    void work.finally(() => this.background.delete(work));
  }
}

/** The read-only side of the runtime's {@link CatalogRegistry} that `McpRuntime.registry` hands out. */
export type RegistryView = Pick<
  CatalogRegistry,
  'current' | 'lifecycleOf' | 'lastIssuedGeneration' | 'identityOf' | 'policyEpoch'
>;

/** A frozen read-only view of `registry` (its methods only read). */
export function registryView(registry: CatalogRegistry): RegistryView {
  return Object.freeze({
    current: registry.current.bind(registry),
    lifecycleOf: registry.lifecycleOf.bind(registry),
    lastIssuedGeneration: registry.lastIssuedGeneration.bind(registry),
    identityOf: registry.identityOf.bind(registry),
    get policyEpoch() {
      return registry.policyEpoch;
    },
  });
}
