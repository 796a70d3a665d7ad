import PQueue from 'p-queue';
import {
  acquireMutex,
  ErrorCode,
  RuntimeError,
  type CatalogSnapshot,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { ServerConfig } from './config.js';
import { ConnectionSet } from './connection-set.js';
import type { RuntimeCore } from './core.js';
import { freshListing } from './listing-reuse.js';
import type { ListingFreshness } from './era/listing-cache.js';
import { abortedError, closedError, toStepbindError } from './failures.js';
import { publishCatalogs, type Publication } from './publish.js';
import { ManagedServer, type Reconnected } from './server/managed-server.js';
import { ProvisionalServer } from './server/provisional.js';
import { identityKeyOf } from './transports/index.js';

/**
 * The dirty refresh (DESIGN §6): claims the dirty flag under a one-permit semaphore and rebuilds
 * the ConnectionSet: unchanged live connections are reused (and re-listed), the rest started with
 * bounded parallelism, optional ones in the background of the published set.
 */

/** One server's contribution to a rebuilt set. */
export interface Candidate {
  readonly server: ManagedServer;
  /** The configuration the candidate was discovered under; installed on the server at publication. */
  readonly config: ServerConfig;
  /** `undefined` when the re-list equals the published catalog (nothing to publish). */
  readonly snapshot: CatalogSnapshot | undefined;
  readonly listingKey: string | undefined;
  /** The freshness record to install with the listing (modern era), see `ManagedServer.freshness`. */
  readonly freshness: ListingFreshness | undefined;
  /** True for a new connection; false for a reused one that was re-listed. */
  readonly fresh: boolean;
  /** The registry generation this candidate was discovered against (its CAS expectation). */
  readonly expectedGeneration: number;
  /** For a reused server: releases its list mutex, held from the re-list until publication. */
  readonly release: () => void;
  /** For a reused server whose HTTP session was lost: the new connection to install. */
  readonly reconnect?: Reconnected;
}

/**
 * If dirty, rebuilds and publishes a new ConnectionSet, looping while dirtied again meanwhile.
 * @returns true when this call published at least one set.
 */
export async function refreshIfDirty(
  core: RuntimeCore,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  if (!core.dirty) return false;
  const release = await acquireMutex(core.refreshMutex, signal);
  try {
    let published = false;
    while (core.dirty && !core.closed) {
      const reasons = core.dirtyReasons;
      core.dirty = false;
      core.dirtyReasons = [];
      try {
        core.rebuilding = true;
        await rebuild(core, reasons, signal);
        published = true;
      } catch (error) {
        core.dirty = true;
        core.dirtyReasons.unshift(...reasons);
        const mapped = toStepbindError(error);
        core.emit({ type: 'refresh-failed', error: mapped });
        throw mapped;
      } finally {
        core.rebuilding = false;
      }
    }
    return published;
  } finally {
    release();
  }
}

/** A server start or re-list, run in the rebuild's bounded queue. */
type ServerTask = (signal: AbortSignal) => Promise<Candidate>;

/** What the servers of one rebuild gave. */
interface Found {
  readonly candidates: Candidate[];
  readonly failures: { server: string; error: StepbindError }[];
  /** Optional servers that were not reusable: started in the background of the published set. */
  readonly background: { name: string; task: ServerTask }[];
  /** New provisional servers (DESIGN §19.2); the eager ones start once the set is published. */
  readonly provisional: ProvisionalServer[];
}

/** Opens once the rebuild settled; `published` says whether its set was published. */
interface BackgroundGate {
  readonly opened: Promise<void>;
  readonly open: () => void;
  published: boolean;
}

/** Builds the next ConnectionSet from the configuration and publishes it (see `refreshIfDirty`). */
async function rebuild(
  core: RuntimeCore,
  reasons: readonly string[],
  signal: AbortSignal | undefined,
): Promise<void> {
  core.rebuilds++;
  const old = core.current;
  const controller = new AbortController();
  const closeSignal = core.closeController.signal;
  const abort = (): void => controller.abort(signal?.reason ?? closeSignal.reason);
  signal?.addEventListener('abort', abort, { once: true });
  closeSignal.addEventListener('abort', abort, { once: true });
  if (signal?.aborted === true || core.closed) abort();
  const set = new ConnectionSet(++core.setCounter, core.config);
  const found: Found = { candidates: [], failures: [], background: [], provisional: [] };
  const gate = backgroundGate();
  const { candidates } = found;
  try {
    await discoverServers(core, set, old, controller.signal, found);
    if (controller.signal.aborted) throw abortedError(controller.signal.reason);
    if (found.failures.length > 0) {
      throw requiredFailed(found.failures, core.current === undefined);
    }
    deferStarts(core, set, found.background, gate);
    await publishSet(core, set, candidates, reasons, controller.signal);
    gate.published = true;
    for (const p of found.provisional) {
      core.emit({
        type: 'server-provisional',
        server: p.name,
        generation: p.cached.generation,
        tools: p.cached.tools.length,
        start: p.config.start,
      });
    }
    startEagerLater(core, found.provisional);
  } catch (error) {
    controller.abort(error);
    // Background starts of an unpublished set are never begun.
    gate.open();
    for (const c of candidates) c.release();
    for (const c of candidates) if (c.fresh) await core.closeServer(c.server);
    // A reconnect that was not installed leaves the server lost; its new connection goes.
    for (const c of candidates) if (c.reconnect !== undefined) await c.reconnect.connection.close();
    throw error;
  } finally {
    signal?.removeEventListener('abort', abort);
    closeSignal.removeEventListener('abort', abort);
  }
  gate.open();
}

function backgroundGate(): BackgroundGate {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open, published: false };
}

/**
 * Starts or re-lists every server of `set`'s configuration (bounded parallelism): a server whose
 * identity is unchanged and whose connection is alive (or lost, to reconnect) is reused. Fills
 * `found`; an optional server's failure becomes its `failed` entry.
 */
async function discoverServers(
  core: RuntimeCore,
  set: ConnectionSet,
  old: ConnectionSet | undefined,
  signal: AbortSignal,
  found: Found,
): Promise<void> {
  const queue = new PQueue({ concurrency: set.config.concurrency });
  await Promise.all(
    [...set.config.servers].map(async ([name, cfg]) => {
      const key = identityKeyOf(cfg);
      const prior = old?.entries.get(name);
      // A provisional server of the same identity is carried over, still waiting for (or not
      // yet asked for) its live catalog; a server with a cached catalog becomes one.
      const provisional =
        core.forceRestart.has(name) || core.liveFailed.has(name)
          ? undefined
          : prior?.kind === 'provisional' &&
              prior.provisional.identityKey === key &&
              prior.provisional.failure === undefined
            ? prior.provisional
            : prior?.kind === 'ready' && prior.server.identityKey === key
              ? undefined
              : newProvisional(core, name, cfg, key);
      if (provisional !== undefined) {
        set.entries.set(name, { kind: 'provisional', provisional });
        if (provisional !== (prior?.kind === 'provisional' ? prior.provisional : undefined))
          found.provisional.push(provisional);
        return;
      }
      const reusable =
        prior?.kind === 'ready' &&
        prior.server.identityKey === key &&
        // A lost HTTP session is reused too: the re-list reconnects it in place.
        (!prior.server.connection.closed || prior.server.connection.lost !== undefined) &&
        !core.forceRestart.has(name)
          ? prior.server
          : undefined;
      const task: ServerTask = (taskSignal) =>
        queue.add(() =>
          reusable === undefined
            ? startServer(core, name, cfg, key, taskSignal)
            : relistReused(core, reusable, cfg, taskSignal),
        );
      if (!cfg.required && reusable === undefined) {
        found.background.push({ name, task });
        return;
      }
      try {
        found.candidates.push(await task(signal));
      } catch (error) {
        const mapped = toStepbindError(error);
        if (cfg.required) found.failures.push({ server: name, error: mapped });
        else set.entries.set(name, { kind: 'failed', error: mapped });
        core.emit({ type: 'server-failed', server: name, required: cfg.required, error: mapped });
      }
    }),
  );
}

/**
 * Starts the eager ones of a published set's new provisional servers on the next turn of the
 * event loop, not in the publication's: `open()` and the first capture return with the cached
 * catalogs before any process is spawned (spawning is synchronous work on this thread). A failure
 * is reported by the start itself (event, entry); nobody waits on it here.
 */
function startEagerLater(core: RuntimeCore, provisional: readonly ProvisionalServer[]): void {
  const eager = provisional.filter((p) => p.config.start === 'eager');
  if (eager.length === 0) return;
  setImmediate(() => {
    if (core.closed) return;
    for (const p of eager) p.start().catch(() => undefined);
  });
}

/** A provisional server for `name` if the catalog cache has its catalog (DESIGN §19.2). */
function newProvisional(
  core: RuntimeCore,
  name: string,
  cfg: ServerConfig,
  key: string,
): ProvisionalServer | undefined {
  const cached = core.cache?.lookup(name, cfg);
  return cached === undefined ? undefined : new ProvisionalServer(core, name, cfg, key, cached);
}

/**
 * Optional servers that were not reusable start in the background of the published set, once the
 * gate opens; their entries exist from publication on, so a capture sees them as starting, in
 * config order. Nothing starts for a set that was not published.
 */
function deferStarts(
  core: RuntimeCore,
  set: ConnectionSet,
  background: readonly { name: string; task: ServerTask }[],
  gate: BackgroundGate,
): void {
  const closeSignal = core.closeController.signal;
  for (const { name, task } of background) {
    const promise = gate.opened
      .then(() => {
        if (!gate.published) throw closedError();
        return task(closeSignal);
      })
      .then(
        (candidate) => publishLate(core, set, name, candidate),
        (error: unknown) => {
          if (!gate.published) return;
          const mapped = toStepbindError(error);
          set.entries.set(name, { kind: 'failed', error: mapped });
          set.invalidate();
          core.emit({ type: 'server-failed', server: name, required: false, error: mapped });
        },
      );
    set.entries.set(name, { kind: 'starting', promise });
    core.track(promise);
  }
}

function requiredFailed(
  failures: readonly { server: string; error: StepbindError }[],
  opening: boolean,
): RuntimeError {
  return new RuntimeError(
    ErrorCode.REQUIRED_SERVERS_FAILED,
    `${failures.length} required server(s) failed; nothing was published ${opening ? 'and the runtime did not open (fix the servers below, or mark them "required": false, and open again)' : 'and the previous tools stay in service'}:\n${failures
      .map((f) => `  - ${f.server}: ${f.error.code}: ${f.error.message}`)
      .join('\n')}`,
    {
      detail: {
        servers: failures.map((f) => f.server),
        failures: failures.map((f) => ({
          server: f.server,
          code: f.error.code,
          message: f.error.message,
          // The server's typed detail (AUTH_REQUIRED's command, a limit...), already redacted.
          detail: f.error.detail,
        })),
      },
    },
  );
}

/** Starts a new connection to `name` and discovers it (watched from then on). */
export async function startServer(
  core: RuntimeCore,
  name: string,
  cfg: ServerConfig,
  key: string,
  signal: AbortSignal,
): Promise<Candidate> {
  const expectedGeneration = core.registry.current(name, cfg.audience)?.generation ?? 0;
  const connection = await core.connect(name, cfg, { signal });
  const server = new ManagedServer(core, name, cfg, key, connection);
  core.servers.add(server);
  try {
    const { snapshot, listingKey, freshness } = await server.discover(cfg, signal);
    server.watch();
    return {
      server,
      config: cfg,
      snapshot,
      listingKey,
      freshness,
      fresh: true,
      expectedGeneration,
      release: () => undefined,
    };
  } catch (error) {
    await core.closeServer(server);
    throw error;
  }
}

/** Re-lists a reused server (or keeps its fresh listing, or reconnects its lost session). */
async function relistReused(
  core: RuntimeCore,
  server: ManagedServer,
  config: ServerConfig,
  signal: AbortSignal,
): Promise<Candidate> {
  const release = await server.lockListing(signal);
  try {
    const expectedGeneration = server.catalog.generation;
    const reused = { server, config, fresh: false, expectedGeneration, release } as const;
    if (!server.connection.closed) {
      // A fresh modern listing (within every page's ttlMs, no list_changed since, same audience
      // and, for private, the same principal) stays published without a request.
      const fresh = freshListing(core, server, config);
      if (fresh !== undefined) {
        return { ...reused, snapshot: undefined, listingKey: undefined, freshness: fresh };
      }
      try {
        const { snapshot, listingKey, freshness } = await server.discover(config, signal);
        return { ...reused, snapshot, listingKey, freshness };
      } catch (error) {
        // A session that ended during the re-list is reopened below; anything else fails.
        if (server.connection.lost === undefined || signal.aborted) throw error;
      }
    }
    let reconnect: Reconnected;
    try {
      reconnect = await server.reconnect(config, signal);
    } catch (error) {
      if (config.required || signal.aborted) throw error;
      // An optional server stays in the set, still reconnecting in the background.
      core.emit({
        type: 'reconnect-failed',
        server: server.name,
        attempt: server.reconnectAttempts,
        error: toStepbindError(error),
      });
      return { ...reused, snapshot: undefined, listingKey: undefined, freshness: undefined };
    }
    return {
      ...reused,
      snapshot: reconnect.snapshot,
      listingKey: reconnect.listingKey,
      freshness: undefined,
      reconnect,
    };
  } catch (error) {
    release();
    throw error;
  }
}

/**
 * Publishes a whole set in one step (see {@link publishCatalogs}): every changed catalog, then,
 * still under the write locks, the set's entries and the pointer move.
 */
async function publishSet(
  core: RuntimeCore,
  set: ConnectionSet,
  candidates: readonly Candidate[],
  reasons: readonly string[],
  signal: AbortSignal,
): Promise<void> {
  const changed = new Set<Candidate>();
  const items: Publication[] = [];
  for (const c of candidates) {
    if (c.snapshot === undefined) continue;
    const publish =
      c.fresh ||
      (c.reconnect === undefined
        ? !c.server.unchanged(c.snapshot)
        : c.server.reconnectChanged(c.reconnect));
    if (!publish) continue;
    changed.add(c);
    items.push({
      server: c.server,
      snapshot: c.snapshot,
      listingKey: c.listingKey,
      expectedGeneration: c.expectedGeneration,
      cause: c.reconnect === undefined ? 'refresh' : 'reconnect',
    });
  }
  try {
    await publishCatalogs(core, items, {
      signal,
      commit: () => commitSet(core, set, candidates),
    });
  } finally {
    for (const c of candidates) c.release();
  }
  for (const c of candidates) {
    if (c.reconnect !== undefined) c.server.reportReconnected(changed.has(c));
  }
  for (const c of changed) {
    if (c.fresh) {
      core.emit({
        type: 'server-ready',
        server: c.server.name,
        generation: c.server.catalog.generation,
        tools: c.server.catalog.tools.length,
      });
    }
  }
  core.emit({ type: 'set-published', setId: set.id, reasons });
}

/**
 * The set's commit, under the write locks of its publication: every candidate joins the set, the
 * entries take config order, and the current pointer moves (the previous set retires).
 */
function commitSet(core: RuntimeCore, set: ConnectionSet, candidates: readonly Candidate[]): void {
  for (const c of candidates) {
    set.entries.set(c.server.name, { kind: 'ready', server: c.server });
    // An unchanged re-list still leaves the key of the listing that stays published; timeouts
    // and limits are not part of the identity: a reused connection takes the new ones.
    c.server.joinSet({
      config: c.config,
      listingKey: c.listingKey,
      freshness: c.freshness,
      reconnected: c.reconnect,
    });
    if (c.fresh) core.forceRestart.delete(c.server.name);
    set.watch(c.server);
  }
  const ordered = [...set.config.servers.keys()]
    .filter((name) => set.entries.has(name))
    .map((name) => [name, set.entries.get(name)] as const);
  set.entries.clear();
  for (const [name, entry] of ordered) if (entry !== undefined) set.entries.set(name, entry);
  const previous = core.current;
  core.current = set;
  core.liveSets.add(set);
  if (previous !== undefined) {
    previous.retired = true;
    core.maybeDrain(previous);
  }
}

/** The publication of a new connection's first catalog (`snapshot`, its candidate's). */
export function firstPublication(candidate: Candidate, snapshot: CatalogSnapshot): Publication {
  return {
    server: candidate.server,
    snapshot,
    listingKey: candidate.listingKey,
    expectedGeneration: candidate.expectedGeneration,
    cause: 'refresh',
    config: candidate.config,
  };
}

/** An optional server finished starting after its set was published: publish and adopt it. */
async function publishLate(
  core: RuntimeCore,
  set: ConnectionSet,
  name: string,
  candidate: Candidate,
): Promise<void> {
  const { server, snapshot } = candidate;
  // A refresh under way will start (or has started) its own connection for this server.
  const stillCurrent = (): boolean =>
    !(set.retired || core.closed || core.current !== set || core.rebuilding);
  if (!stillCurrent()) {
    void core.closeServer(server);
    return;
  }
  let published: boolean;
  try {
    // Late starts are always new connections, so their listing was validated in full.
    if (snapshot === undefined) throw new Error(`late start of "${name}" has no snapshot`);
    // With a fleet store this waits for its CAS, so the set is asked again before installing.
    published = await publishCatalogs(core, [firstPublication(candidate, snapshot)], {
      commit: () => {
        server.joinSet({
          config: candidate.config,
          listingKey: undefined,
          freshness: candidate.freshness,
        });
        set.entries.set(name, { kind: 'ready', server });
        set.watch(server);
        set.invalidate();
      },
      stillCurrent,
    });
  } catch (error) {
    const mapped = toStepbindError(error);
    set.entries.set(name, { kind: 'failed', error: mapped });
    set.invalidate();
    void core.closeServer(server);
    core.emit({ type: 'server-failed', server: name, required: false, error: mapped });
    return;
  }
  if (!published) {
    void core.closeServer(server);
    return;
  }
  core.emit({
    type: 'server-ready',
    server: name,
    generation: server.catalog.generation,
    tools: server.catalog.tools.length,
  });
}
