import { acquireMutex, CatalogError } from '@stepbind/binding/internal';
import type { ServerConfig } from './config.js';
import type { RuntimeCore } from './core.js';
import { toStepbindError } from './failures.js';
import { publishCatalogs } from './publish.js';
import { sameServer, stopRecovery, type Reconnected, type ServerSession } from './session.js';
import { identityOf } from './transports/index.js';

/**
 * Reconnecting a session whose Streamable HTTP session was lost (DESIGN §6): a new connection is
 * opened and listed, and installed in the same session and slot (publishing only a changed
 * catalog), inline (refresh, capture, hard refresh) or in the background with bounded backoff.
 */

/** Starts the background reconnects of a session whose HTTP session was lost. */
export function startRecovery(core: RuntimeCore, session: ServerSession): void {
  const recovery = session.recovery;
  if (recovery.timer !== undefined || recovery.running) return;
  recovery.attempts = 0;
  recovery.lastError = undefined;
  // With background reconnects off, status says so: only a refresh, capture or hardRefresh reopens.
  recovery.gaveUp = (core.options.reconnect?.maxAttempts ?? 10) <= 0;
  if (recovery.gaveUp) return;
  scheduleRecovery(core, session, 0);
}

function scheduleRecovery(core: RuntimeCore, session: ServerSession, delayMs: number): void {
  if (core.closed || session.closing !== undefined) return;
  session.recovery.timer = core.clock.setTimeout(() => {
    session.recovery.timer = undefined;
    attemptRecovery(core, session);
  }, delayMs);
}

function attemptRecovery(core: RuntimeCore, session: ServerSession): void {
  const recovery = session.recovery;
  // Only the current set's sessions are reconnected; one a refresh dropped is closing anyway.
  const inCurrent = [...(core.current?.entries.values() ?? [])].some(
    (e) => e.kind === 'ready' && e.session === session,
  );
  if (core.closed || session.closing !== undefined || !inCurrent) return;
  if (session.connection.lost === undefined) return;
  recovery.attempts++;
  recovery.running = true;
  const attempt = recovery.attempts;
  const run = reconnectSession(core, session, core.closeController.signal).then(
    () => {
      recovery.running = false;
    },
    (error: unknown) => {
      recovery.running = false;
      if (core.closed || session.closing !== undefined) return;
      if (session.connection.lost === undefined) return;
      const mapped = toStepbindError(error);
      recovery.lastError = mapped;
      const {
        initialDelayMs = 250,
        maxDelayMs = 10_000,
        maxAttempts = 10,
      } = core.options.reconnect ?? {};
      // A catalog or identity the registry refuses will not change by retrying.
      const nextDelayMs =
        attempt < maxAttempts && !(mapped instanceof CatalogError)
          ? Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(attempt - 1, 30))
          : undefined;
      if (nextDelayMs === undefined) recovery.gaveUp = true;
      core.emit({
        type: 'reconnect-failed',
        server: session.name,
        attempt,
        error: mapped,
        ...(nextDelayMs === undefined ? {} : { nextDelayMs }),
      });
      if (nextDelayMs !== undefined) scheduleRecovery(core, session, nextDelayMs);
    },
  );
  core.track(run);
}

/**
 * Reconnects a lost session in place (new initialize, re-list, publish if changed).
 * @returns false when another path reconnected it first.
 */
async function reconnectSession(
  core: RuntimeCore,
  session: ServerSession,
  signal: AbortSignal,
): Promise<boolean> {
  const release = await acquireMutex(session.listMutex, signal);
  try {
    if (!session.connection.closed) return false;
    await reopen(core, session, signal);
    return true;
  } finally {
    release();
  }
}

/** Reconnect + install, holding the list mutex. @returns true when the catalog changed. */
export async function reopen(
  core: RuntimeCore,
  session: ServerSession,
  signal: AbortSignal,
): Promise<boolean> {
  const r = await reconnectLocked(core, session, session.config, signal);
  try {
    return await installReconnected(core, session, r, signal);
  } catch (error) {
    await r.connection.close();
    throw error;
  }
}

/**
 * Opens a new connection for `session` (whose HTTP session was lost) and lists it, holding the
 * session's list mutex. Nothing is installed; the connection is closed again on failure.
 */
export async function reconnectLocked(
  core: RuntimeCore,
  session: ServerSession,
  config: ServerConfig,
  signal: AbortSignal,
): Promise<Reconnected> {
  const connection = await core.connect(session.name, config, { signal });
  try {
    const identity = identityOf(session.name, config, connection);
    const identityChanged = !sameServer(identity, session.identity);
    const { snapshot, listingKey } = await core.list(session, config, signal, {
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
export function reconnectChanged(
  core: RuntimeCore,
  session: ServerSession,
  r: Reconnected,
): boolean {
  return r.snapshot !== undefined && (r.identityChanged || !core.unchanged(session, r.snapshot));
}

/**
 * Installs a reconnected session: if its catalog changed, publishes it (the revision moves, so
 * steps captured before are stale); then the new connection replaces the lost one. Holds the list
 * mutex (the caller does).
 *
 * @returns true when the catalog changed.
 */
async function installReconnected(
  core: RuntimeCore,
  session: ServerSession,
  r: Reconnected,
  signal: AbortSignal,
): Promise<boolean> {
  const slot = session.slot;
  if (slot === undefined) throw new Error(`session ${session.name} has no published catalog`);
  const changed = reconnectChanged(core, session, r);
  const items =
    changed && r.snapshot !== undefined
      ? [
          {
            session,
            snapshot: r.snapshot,
            listingKey: r.listingKey,
            expectedGeneration: slot.catalog.generation,
            cause: 'reconnect' as const,
          },
        ]
      : [];
  await publishCatalogs(core, items, { signal, commit: () => adoptConnection(core, session, r) });
  emitReconnected(core, session, changed);
  // The loss marked the runtime dirty; with the session back, nothing else may be pending.
  core.dirtyReasons = core.dirtyReasons.filter(
    (reason) => reason !== `session-lost:${session.name}`,
  );
  if (core.dirtyReasons.length === 0) core.dirty = false;
  return changed;
}

/** The new connection replaces the lost one; views are rebuilt so new steps bind it. */
export function adoptConnection(core: RuntimeCore, session: ServerSession, r: Reconnected): void {
  const lost = session.connection;
  for (const off of session.unsubscribe) off();
  session.unsubscribe = [];
  session.connection = r.connection;
  session.identity = r.identity;
  if (r.listingKey !== undefined) session.listingKey = r.listingKey;
  session.freshness = undefined;
  session.recovery.lastError = undefined;
  session.recovery.gaveUp = false;
  stopRecovery(session, core.clock);
  core.watch(session);
  core.invalidateViews();
  void lost.close();
}

/** The `server-reconnected` event; the attempt count starts again from 0. */
export function emitReconnected(core: RuntimeCore, session: ServerSession, changed: boolean): void {
  const attempt = session.recovery.attempts;
  session.recovery.attempts = 0;
  core.emit({
    type: 'server-reconnected',
    server: session.name,
    attempt,
    generation: session.catalog.generation,
    revision: session.slot?.revision ?? 0,
    changed,
  });
}
