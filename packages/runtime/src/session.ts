import { Mutex } from 'async-mutex';
import type {
  CatalogSlot,
  CatalogSnapshot,
  ServerIdentity,
  StepbindError,
} from '@stepbind/binding/internal';
import type { RuntimeClock, TimerHandle } from './clock.js';
import type { ServerConfig } from './config.js';
import type { Connection } from './connection.js';
import type { ListingFreshness } from './era/listing-cache.js';
import { identityOf } from './transports/index.js';
import type { SessionLoss } from './transports/http-session.js';

/** Background reconnects of a session whose HTTP session was lost. */
export interface Recovery {
  attempts: number;
  timer: TimerHandle;
  running: boolean;
  lastError: StepbindError | undefined;
  gaveUp: boolean;
}

/** One live connection, its catalog slot and its background work. Shared by the sets that reuse it. */
export class ServerSession {
  readonly name: string;
  /** The configuration in force; a refresh that reuses the connection carries the new one over. */
  config: ServerConfig;
  readonly identityKey: string;
  /** The live connection; replaced in place when a lost HTTP session is reconnected. */
  connection: Connection;
  identity: ServerIdentity;
  /** Serializes re-listings (hard refresh, refresh re-list, reconnect) of this connection. */
  readonly listMutex = new Mutex();
  slot: CatalogSlot | undefined;
  /** Listing key of the published catalog (see `listCatalog`). */
  listingKey: string | undefined;
  /**
   * Freshness of the published listing of a modern connection (`ttlMs`/`cacheScope`), which a
   * dirty refresh may reuse without a request; `undefined` for none or while a re-list runs.
   */
  freshness: ListingFreshness | undefined;
  /** ConnectionSets holding this session. */
  refs = 0;
  /** The armed trailing list_changed debounce (see `hard-refresh.ts`). */
  debounce: TimerHandle;
  debounceStarted = 0;
  /** Hard refreshes fired by list_changed and not finished yet (0 or 1: they never overlap). */
  hardRefreshes = 0;
  /** A list_changed arrived while a fired hard refresh was re-listing: run once more after it. */
  again = false;
  /** Resolves when no debounce is armed and no fired hard refresh is running. */
  idle: { promise: Promise<void>; resolve: () => void } | undefined;
  unsubscribe: (() => void)[] = [];
  closing: Promise<void> | undefined;
  /** Background reconnects after the connection's HTTP session was lost. */
  readonly recovery: Recovery = {
    attempts: 0,
    timer: undefined,
    running: false,
    lastError: undefined,
    gaveUp: false,
  };

  constructor(name: string, config: ServerConfig, identityKey: string, connection: Connection) {
    this.name = name;
    this.config = config;
    this.identityKey = identityKey;
    this.connection = connection;
    this.identity = identityOf(name, config, connection);
  }

  get catalog(): CatalogSnapshot {
    if (this.slot === undefined) throw new Error(`session ${this.name} has no published catalog`);
    return this.slot.catalog;
  }
}

/** A new connection for a lost session, listed and validated, not installed yet. */
export interface Reconnected {
  readonly connection: Connection;
  readonly identity: ServerIdentity;
  readonly snapshot: CatalogSnapshot | undefined;
  readonly listingKey: string | undefined;
  /** serverInfo or protocol version differ from the lost session's: publish (the registry decides). */
  readonly identityChanged: boolean;
}

/** Clears a session's scheduled reconnect (a running attempt stops on the close signal). */
export function stopRecovery(session: ServerSession, clock: RuntimeClock): void {
  if (session.recovery.timer !== undefined) clock.clearTimeout(session.recovery.timer);
  session.recovery.timer = undefined;
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

/** The status message of a lost session: why, the last attempt, and what happens next. */
export function lossMessage(loss: SessionLoss, recovery: Recovery): string {
  const last =
    recovery.lastError === undefined
      ? ''
      : ` Last reconnect attempt: ${recovery.lastError.code}: ${recovery.lastError.message.split('\n')[0] ?? ''}`;
  const next = recovery.gaveUp
    ? ` Gave up after ${recovery.attempts} attempts; the next refresh, capture or hardRefresh tries again.`
    : ' Reconnecting.';
  return `The HTTP session ended: ${loss.message}.${last}${next}`;
}
