import type { CatalogSnapshot, ServerIdentity } from '@stepbind/binding/internal';
import type { CatalogDiscovery } from '../discover-catalog.js';
import type { RuntimeClock } from '../clock.js';
import type { ServerConfig } from '../config.js';
import type { Connection } from '../connection.js';
import type { ListingFreshness } from '../era/listing-cache.js';
import type { Emit } from '../events.js';
import type { McpRuntimeOptions, ServerConnector } from '../options.js';
import type { Publication, PublishOptions } from '../publish.js';

/** One discovery of one connection, as a {@link ManagedServer} asks its host for it. */
export interface DiscoveryRequest {
  readonly name: string;
  readonly config: ServerConfig;
  readonly connection: Connection;
  readonly identity: ServerIdentity;
  /** The server's catalog in force, if any (an unchanged listing ends in its state). */
  readonly published: CatalogSnapshot | undefined;
  /**
   * The listing key of the published catalog, when an unchanged listing may skip validation (not
   * when the identity changed); the host drops it when the catalog's policy epoch is not current.
   */
  readonly listingKey: string | undefined;
  readonly signal: AbortSignal;
}

/**
 * A discovered candidate (or nothing, for an unchanged listing) and, for a modern connection, the
 * freshness record of its listing (each page timed on the runtime's clock).
 */
export type Discovered = CatalogDiscovery & { readonly freshness: ListingFreshness | undefined };

/**
 * What a {@link ManagedServer} needs from the runtime that holds it, and nothing more: the clock
 * and events, how to connect, discover and publish, the options it reads, the close signal, the
 * dirty flag and the views. `RuntimeCore` implements it; a server never sees the set-level state.
 */
export interface ServerHost {
  /** The runtime's timers (debounce, reconnect backoff). */
  readonly clock: RuntimeClock;
  readonly emit: Emit;
  /** The options a server reads. */
  readonly options: Pick<McpRuntimeOptions, 'listChangedDebounceMs' | 'reconnect'>;
  /** Fires at the runtime's `close()`. */
  readonly closeSignal: AbortSignal;
  /** True from the runtime's first `close()` on. */
  readonly closed: boolean;
  /** Opens a new connection to a server. */
  readonly connect: ServerConnector;
  /** Discovers one connection's tools into a candidate (see {@link DiscoveryRequest}). */
  discover(request: DiscoveryRequest): Promise<Discovered>;
  /** THE publication path (`publishCatalogs`). */
  publish(items: readonly Publication[], options?: PublishOptions): Promise<boolean>;
  /** Records that the next capture must rebuild the ConnectionSet first. */
  markDirty(reason: string): void;
  /** Withdraws one dirty reason (a lost server came back); the flag clears when none is left. */
  withdrawDirty(reason: string): void;
  /** Marks every cached binding view stale, so new steps bind what changed. */
  invalidateViews(): void;
  /** Registers background work, awaited by the runtime's `close()`. */
  track(work: Promise<void>): void;
  /**
   * Who server `name`'s requests act for under `config` (the OAuth principal, `''` for none):
   * part of its catalog identity, never a token.
   */
  authPrincipal(name: string, config: ServerConfig): string;
  /** True when `server` is the one the current ConnectionSet serves under its name. */
  inService(server: { readonly name: string }): boolean;
  /**
   * A lazy server ran no call for its `idleTimeoutMs` (DESIGN §19.3): the runtime stops it and
   * shows its catalog provisionally until the next call.
   */
  idleStop(server: { readonly name: string }): void;
}
