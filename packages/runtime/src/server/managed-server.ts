import { Mutex } from 'async-mutex';
import {
  acquireMutex,
  CatalogError,
  CatalogSlot,
  ErrorCode,
  RuntimeError,
  type CatalogSnapshot,
  type ServerIdentity,
  type ToolCaller,
} from '@stepbind/binding/internal';
import type { ServerConfig } from '../config.js';
import type { Connection } from '../connection.js';
import type { ListingFreshness } from '../era/listing-cache.js';
import { combineSignals, toStepbindError } from '../failures.js';
import type { ServerStatus } from '../options.js';
import type { PublicationTarget } from '../publish.js';
import { identityOf } from '../transports/index.js';
import type { Discovered, ServerHost } from './host.js';
import { IdleWatch } from './idle.js';
import { ListChangedDebouncer } from './list-changed.js';
import { lossMessage, ReconnectLoop } from './reconnect-loop.js';
import { ServerFeatureLists } from '../resources/server-lists.js';

/** A new connection for a lost server, discovered and validated, not installed yet. */
export interface Reconnected {
  readonly connection: Connection;
  readonly identity: ServerIdentity;
  readonly snapshot: CatalogSnapshot | undefined;
  readonly listingKey: string | undefined;
  /** serverInfo or protocol version differ from the lost connection's: publish (the registry decides). */
  readonly identityChanged: boolean;
}

/** What a ConnectionSet's commit installs on a server that joins it (see {@link ManagedServer.joinSet}). */
export interface SetMembership {
  /** The configuration in force from now on (timeouts and limits are not part of the identity). */
  readonly config: ServerConfig;
  /** The key of the listing that stays published (an unchanged re-list still leaves its key). */
  readonly listingKey: string | undefined;
  /** The freshness record of that listing (modern era), see {@link ManagedServer.freshness}. */
  readonly freshness: ListingFreshness | undefined;
  /** A reconnect discovered for this set: its connection replaces the lost one. */
  readonly reconnected?: Reconnected | undefined;
}

/** Same serverInfo and protocol version: a reconnect may keep an unchanged catalog. */
export function sameServer(a: ServerIdentity, b: ServerIdentity): boolean {
  return (
    a.transportDigest === b.transportDigest &&
    a.protocolVersion === b.protocolVersion &&
    a.serverInfo?.name === b.serverInfo?.name &&
    a.serverInfo?.version === b.serverInfo?.version
  );
}

/**
 * The runtime's owner of one server (DESIGN §2, §6): its live connection, its catalog slot and
 * listing, and the background work around them (the `list_changed` debounce, the reconnects of a
 * lost HTTP session). Every change of its state goes through its methods: discovery, hard refresh,
 * reconnect, the installs a publication or a set's commit make, and close. It subscribes to its own
 * connection. Shared by the ConnectionSets that reuse it.
 */
export class ManagedServer implements PublicationTarget {
  readonly name: string;
  /** The identity key (transport, command, url, audience...) a refresh compares to reuse it. */
  readonly identityKey: string;
  readonly #host: ServerHost;
  /** Serializes discoveries on the connection (hard refresh, refresh re-list, reconnect). */
  readonly #listMutex = new Mutex();
  readonly #debouncer: ListChangedDebouncer;
  readonly #reconnect: ReconnectLoop;
  /** A lazy server's call count and idle timer (DESIGN §19.3); none for eager servers. */
  readonly #idle: IdleWatch | undefined;
  #config: ServerConfig;
  #connection: Connection;
  #identity: ServerIdentity;
  #slot: CatalogSlot | undefined;
  #listingKey: string | undefined;
  #freshness: ListingFreshness | undefined;
  /** ConnectionSets holding this server. */
  #refs = 0;
  #unsubscribe: (() => void)[] = [];
  #closing: Promise<void> | undefined;
  /** Its resources, templates and prompts (DESIGN §20.3), listed per connection. */
  readonly #features: ServerFeatureLists;

  constructor(
    host: ServerHost,
    name: string,
    config: ServerConfig,
    identityKey: string,
    connection: Connection,
  ) {
    this.#host = host;
    this.name = name;
    this.#config = config;
    this.identityKey = identityKey;
    this.#connection = connection;
    this.#identity = identityOf(name, config, connection, host.authPrincipal(name, config));
    const active = (): boolean => !host.closed && this.#closing === undefined;
    this.#debouncer = new ListChangedDebouncer({
      clock: host.clock,
      debounceMs: host.options.listChangedDebounceMs ?? 100,
      active,
      run: () => this.#hardRefreshOnListChanged(),
    });
    const {
      initialDelayMs = 250,
      maxDelayMs = 10_000,
      maxAttempts = 10,
    } = host.options.reconnect ?? {};
    this.#reconnect = new ReconnectLoop({
      clock: host.clock,
      policy: { initialMs: initialDelayMs, maxMs: maxDelayMs, maxAttempts },
      active,
      inService: () => host.inService(this),
      lost: () => this.#connection.lost !== undefined,
      attempt: () => this.#reconnectInBackground(),
      // A catalog or identity the registry refuses will not change by retrying.
      isFinal: (error) => error instanceof CatalogError,
      onFailed: (attempt, error, nextDelayMs) =>
        host.emit({
          type: 'reconnect-failed',
          server: name,
          attempt,
          error,
          ...(nextDelayMs === undefined ? {} : { nextDelayMs }),
        }),
      track: (work) => host.track(work),
    });
    this.#idle =
      config.start === 'lazy' && config.idleTimeoutMs > 0
        ? new IdleWatch({
            clock: host.clock,
            idleMs: config.idleTimeoutMs,
            onIdle: () => host.idleStop(this),
          })
        : undefined;
    this.#features = new ServerFeatureLists({
      server: name,
      clock: host.clock,
      emit: host.emit,
      debounceMs: host.options.listChangedDebounceMs ?? 100,
      active,
      track: (work) => host.track(work),
      requestTimeoutMs: () => this.#config.requestTimeoutMs,
      callTimeoutMs: () => this.#config.callTimeoutMs,
      closeSignal: host.closeSignal,
      connection,
    });
  }

  /** Its resources, templates and prompts: what a step captures of them (DESIGN §20.3). */
  get features(): ServerFeatureLists {
    return this.#features;
  }

  /**
   * The client a binding captures: the connection, counted for the idle stop when the server is
   * lazy (DESIGN §19.3).
   */
  get caller(): ToolCaller {
    return this.#idle === undefined ? this.#connection : this.#idle.callerOf(this.#connection);
  }

  /** Calls in flight through {@link caller} (lazy servers only; 0 otherwise). */
  get callsInFlight(): number {
    return this.#idle?.inFlight ?? 0;
  }

  /** The configuration in force; a refresh that reuses the connection carries the new one over. */
  get config(): ServerConfig {
    return this.#config;
  }

  /** The live connection; replaced in place when a lost HTTP session is reconnected. */
  get connection(): Connection {
    return this.#connection;
  }

  get identity(): ServerIdentity {
    return this.#identity;
  }

  /** The slot of the catalog in force; `undefined` before the first publication. */
  get slot(): CatalogSlot | undefined {
    return this.#slot;
  }

  /** The catalog in force. @throws Error before the first publication. */
  get catalog(): CatalogSnapshot {
    if (this.#slot === undefined) throw new Error(`server ${this.name} has no published catalog`);
    return this.#slot.catalog;
  }

  /**
   * Freshness of the published listing of a modern connection (`ttlMs`/`cacheScope`), which a
   * dirty refresh may reuse without a request; `undefined` for none or while a re-list runs.
   */
  get freshness(): ListingFreshness | undefined {
    return this.#freshness;
  }

  /** Resolves when no debounce is armed and no fired hard refresh runs; `undefined` when idle. */
  get idle(): Promise<void> | undefined {
    return this.#debouncer.idle;
  }

  /** Takes the list mutex (discoveries of this server run one at a time). @returns its release. */
  lockListing(signal: AbortSignal | undefined): Promise<() => void> {
    return acquireMutex(this.#listMutex, signal);
  }

  /**
   * Discovers one connection of this server into a candidate (or nothing, for an unchanged
   * listing): its own (`via` absent; the freshness record it had goes, since it only describes the
   * published listing), or a new one being reconnected.
   */
  discover(
    config: ServerConfig,
    signal: AbortSignal,
    via?: {
      readonly connection: Connection;
      readonly identity: ServerIdentity;
      /** Whether an unchanged listing may skip validation (not when the identity changed). */
      readonly compare: boolean;
    },
  ): Promise<Discovered> {
    if (via === undefined) this.#freshness = undefined;
    return this.#host.discover({
      name: this.name,
      config,
      connection: via?.connection ?? this.#connection,
      identity: via?.identity ?? this.#identity,
      published: this.#slot?.catalog,
      listingKey: via?.compare === false ? undefined : this.#listingKey,
      signal,
    });
  }

  /** True when `candidate` adds nothing over the published catalog. */
  unchanged(candidate: CatalogSnapshot | undefined): boolean {
    if (candidate === undefined) return true;
    const current = this.#slot?.catalog;
    return (
      current !== undefined &&
      current.pageRoot === candidate.pageRoot &&
      current.sourceRevision === candidate.sourceRevision &&
      current.policyEpoch === candidate.policyEpoch &&
      (current.state === 'ELIGIBLE') === (candidate.state === 'SNAPSHOT_PROVEN')
    );
  }

  /** {@inheritDoc PublicationTarget.installCatalog} */
  installCatalog(catalog: CatalogSnapshot, listingKey: string | undefined): number | undefined {
    let revision: number | undefined;
    if (this.#slot === undefined) this.#slot = new CatalogSlot(this.name, catalog);
    else revision = this.#slot.installLocked(catalog);
    this.#listingKey = listingKey;
    return revision;
  }

  /**
   * A ConnectionSet's commit (under the write locks): the server joins the set under the new
   * configuration with its listing; a reconnect found for the set is installed.
   */
  joinSet(membership: SetMembership): void {
    if (membership.listingKey !== undefined) this.#listingKey = membership.listingKey;
    this.#freshness = membership.freshness;
    this.#refs++;
    this.#config = membership.config;
    if (membership.reconnected !== undefined) this.#adopt(membership.reconnected);
    this.#idle?.arm();
  }

  /** A set holding this server drained. @returns true when no set holds it any more (close it). */
  leaveSet(): boolean {
    this.#refs--;
    return this.#refs <= 0;
  }

  /**
   * Hard refresh (DESIGN §6): re-lists on the same connection outside the lock and publishes a
   * changed catalog (cause `hard-refresh`); a lost HTTP session is reopened first.
   * @returns true when the catalog changed.
   * @throws CatalogError from discovery or publication (nothing changes); RuntimeError
   *   `SERVER_NOT_READY` when the server has no live connection.
   */
  async hardRefresh(signal: AbortSignal | undefined): Promise<boolean> {
    const release = await this.lockListing(signal);
    try {
      if (this.#slot === undefined) return false;
      const combined = combineSignals(signal, this.#host.closeSignal);
      if (!this.#connection.closed) {
        try {
          return await this.#relistLocked(signal, combined);
        } catch (error) {
          // A session that ended during the re-list is reopened below; anything else fails.
          if (this.#connection.lost === undefined || combined.aborted) throw error;
        }
      }
      if (this.#connection.lost === undefined) {
        throw new RuntimeError(
          ErrorCode.SERVER_NOT_READY,
          `Server "${this.name}" has no live connection to re-list; refresh first.`,
          { detail: { server: this.name } },
        );
      }
      return await this.#reopen(combined);
    } finally {
      release();
    }
  }

  /** The hard refresh proper on a live connection, holding the list mutex. */
  async #relistLocked(signal: AbortSignal | undefined, combined: AbortSignal): Promise<boolean> {
    const expectedGeneration = this.catalog.generation;
    // Always a request: the application (or the server's list_changed) asked for the server's word.
    const { snapshot, listingKey, freshness } = await this.discover(this.#config, combined);
    if (snapshot === undefined || this.unchanged(snapshot)) {
      // The published catalog is this listing: remember its key so the next re-list can skip.
      if (listingKey !== undefined) this.#listingKey = listingKey;
      this.#freshness = freshness;
      return false;
    }
    await this.#host.publish(
      [{ server: this, snapshot, listingKey, expectedGeneration, cause: 'hard-refresh' }],
      signal === undefined ? {} : { signal },
    );
    this.#freshness = freshness;
    return true;
  }

  /**
   * One `notifications/tools/list_changed` of the connection: a `list-changed` event, then the
   * debounced hard refresh (see {@link ListChangedDebouncer}).
   */
  notifyListChanged(): void {
    if (this.#host.closed || this.#closing !== undefined) return;
    this.#host.emit({ type: 'list-changed', server: this.name });
    this.#debouncer.notify();
  }

  async #hardRefreshOnListChanged(): Promise<void> {
    try {
      await this.hardRefresh(undefined);
    } catch (error) {
      if (!this.#host.closed) {
        this.#host.emit({
          type: 'hard-refresh-failed',
          server: this.name,
          error: toStepbindError(error),
        });
      }
    }
  }

  /**
   * Opens a new connection for this server (whose HTTP session was lost) and discovers it, holding
   * the list mutex (the caller does). Nothing is installed; the connection is closed again on
   * failure.
   */
  async reconnect(config: ServerConfig, signal: AbortSignal): Promise<Reconnected> {
    const connection = await this.#host.connect(this.name, config, { signal });
    try {
      const identity = identityOf(
        this.name,
        config,
        connection,
        this.#host.authPrincipal(this.name, config),
      );
      const identityChanged = !sameServer(identity, this.#identity);
      const { snapshot, listingKey } = await this.discover(config, signal, {
        connection,
        identity,
        compare: !identityChanged,
      });
      return { connection, identity, snapshot, listingKey, identityChanged };
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  /** True when the reconnected listing must be published (a new catalog or a new identity). */
  reconnectChanged(r: Reconnected): boolean {
    return r.snapshot !== undefined && (r.identityChanged || !this.unchanged(r.snapshot));
  }

  /** The `server-reconnected` event; the attempt count starts again from 0. */
  reportReconnected(changed: boolean): void {
    this.#host.emit({
      type: 'server-reconnected',
      server: this.name,
      attempt: this.#reconnect.takeAttempts(),
      generation: this.catalog.generation,
      revision: this.#slot?.revision ?? 0,
      changed,
    });
  }

  /** One background attempt: reconnects in place unless another path did it first. */
  async #reconnectInBackground(): Promise<void> {
    const signal = this.#host.closeSignal;
    const release = await this.lockListing(signal);
    try {
      if (!this.#connection.closed) return;
      await this.#reopen(signal);
    } finally {
      release();
    }
  }

  /** Reconnect + install, holding the list mutex. @returns true when the catalog changed. */
  async #reopen(signal: AbortSignal): Promise<boolean> {
    const r = await this.reconnect(this.#config, signal);
    try {
      return await this.#installReconnected(r, signal);
    } catch (error) {
      await r.connection.close();
      throw error;
    }
  }

  /**
   * Installs a reconnect: if its catalog changed, publishes it (the revision moves, so steps
   * captured before are stale); then the new connection replaces the lost one. Holds the list
   * mutex (the caller does). @returns true when the catalog changed.
   */
  async #installReconnected(r: Reconnected, signal: AbortSignal): Promise<boolean> {
    const slot = this.#slot;
    if (slot === undefined) throw new Error(`server ${this.name} has no published catalog`);
    const changed = this.reconnectChanged(r);
    const items =
      changed && r.snapshot !== undefined
        ? [
            {
              server: this,
              snapshot: r.snapshot,
              listingKey: r.listingKey,
              expectedGeneration: slot.catalog.generation,
              cause: 'reconnect' as const,
            },
          ]
        : [];
    await this.#host.publish(items, { signal, commit: () => this.#adopt(r) });
    this.reportReconnected(changed);
    // The loss marked the runtime dirty; with the server back, nothing else may be pending.
    this.#host.withdrawDirty(`session-lost:${this.name}`);
    return changed;
  }

  /** The new connection replaces the lost one; views are rebuilt so new steps bind it. */
  #adopt(r: Reconnected): void {
    const lost = this.#connection;
    this.#unwatch();
    this.#connection = r.connection;
    this.#identity = r.identity;
    if (r.listingKey !== undefined) this.#listingKey = r.listingKey;
    this.#freshness = undefined;
    this.#reconnect.reconnected();
    this.watch();
    this.#host.invalidateViews();
    void lost.close();
  }

  /**
   * Subscribes to the connection: `list_changed` (debounced hard refresh), errors, stderr and logs
   * (as events), and its close (dirty for a refresh, or the reconnects of a lost HTTP session). The
   * subscriptions go with the connection.
   */
  watch(): void {
    const connection = this.#connection;
    const host = this.#host;
    const server = this.name;
    this.#unsubscribe.push(
      connection.onListChanged(() => this.notifyListChanged()),
      connection.onError((error) => {
        host.emit({ type: 'connection-error', server, error });
      }),
      connection.onStderr((line) => {
        host.emit({ type: 'server-stderr', server, line });
      }),
      connection.onLog((message) => {
        host.emit({ type: 'server-log', server, ...message });
      }),
      connection.onClose(() => {
        const expected = host.closed || this.#closing !== undefined;
        host.emit({ type: 'connection-closed', server, expected });
        if (expected) return;
        host.invalidateViews();
        const loss = connection.lost;
        if (loss === undefined) {
          host.markDirty(`connection-closed:${server}`);
          return;
        }
        host.emit({
          type: 'session-lost',
          server,
          reason: loss.reason,
          ...(loss.httpStatus === undefined ? {} : { httpStatus: loss.httpStatus }),
          message: loss.message,
        });
        // The next capture reconnects at once; meanwhile the background tries with backoff.
        host.markDirty(`session-lost:${server}`);
        this.#reconnect.start();
      }),
      this.#features.attach(connection),
    );
  }

  #unwatch(): void {
    for (const off of this.#unsubscribe) off();
    this.#unsubscribe = [];
  }

  /** Clears the scheduled background reconnect (the runtime closes). */
  stopReconnecting(): void {
    this.#reconnect.stop();
  }

  /** Stops the server's timers and listeners and closes its connection. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#debouncer.stop();
      this.#features.stop();
      this.#reconnect.stop();
      this.#idle?.stop();
      this.#unwatch();
      await this.#connection.close();
    })();
    return this.#closing;
  }

  /** The server's own part of `status()` (the runtime adds name, discovery and listing). */
  status(): Omit<ServerStatus, 'name' | 'required' | 'discovery' | 'listing'> {
    const connection = this.#connection;
    const loss = connection.lost;
    const reconnect = this.#reconnect.state;
    const slot = this.#slot;
    return {
      state:
        loss !== undefined
          ? reconnect.gaveUp
            ? 'failed'
            : 'reconnecting'
          : connection.closed
            ? 'closed'
            : 'ready',
      generation: slot?.catalog.generation ?? 0,
      revision: slot?.revision ?? 0,
      catalogState: slot?.catalog.state ?? 'DISCOVERING',
      tools: slot?.catalog.tools.length ?? 0,
      ...(connection.pid === undefined ? {} : { pid: connection.pid }),
      era: connection.era,
      ...(connection.hello.protocolVersion === undefined
        ? {}
        : { protocolVersion: connection.hello.protocolVersion }),
      ...(loss === undefined
        ? {}
        : {
            error: { code: ErrorCode.CONNECTION_CLOSED, message: lossMessage(loss, reconnect) },
            reconnectAttempts: reconnect.attempts,
          }),
    };
  }

  /** Attempts of the background reconnects since the loss (for `reconnect-failed` of a refresh). */
  get reconnectAttempts(): number {
    return this.#reconnect.state.attempts;
  }
}
