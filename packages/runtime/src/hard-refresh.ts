import { acquireMutex, ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import type { RuntimeCore } from './core.js';
import { combineSignals, toStepbindError } from './failures.js';
import { publishCatalogs } from './publish.js';
import { reopen } from './reconnect.js';
import type { ServerSession } from './session.js';

/**
 * Hard refresh of one server (DESIGN §6): re-list on the same connection outside the lock and
 * publish a changed listing; and the `list_changed` trigger of it, debounced on the runtime's
 * clock with storms coalesced (at most one fired hard refresh runs and at most one waits).
 */

/**
 * Re-lists `session` and publishes a changed catalog (cause `hard-refresh`); a lost HTTP session
 * is reopened first. @returns true when the catalog changed.
 * @throws CatalogError from discovery or publication (nothing changes); RuntimeError
 *   `SERVER_NOT_READY` when the session has no live connection.
 */
export async function hardRefreshSession(
  core: RuntimeCore,
  session: ServerSession,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const release = await acquireMutex(session.listMutex, signal);
  try {
    if (session.slot === undefined) return false;
    const combined = combineSignals(signal, core.closeController.signal);
    if (!session.connection.closed) {
      try {
        return await relistLocked(core, session, signal, combined);
      } catch (error) {
        // A session that ended during the re-list is reopened below; anything else fails.
        if (session.connection.lost === undefined || combined.aborted) throw error;
      }
    }
    if (session.connection.lost === undefined) {
      throw new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        `Server "${session.name}" has no live connection to re-list; refresh first.`,
        { detail: { server: session.name } },
      );
    }
    return await reopen(core, session, combined);
  } finally {
    release();
  }
}

/** The hard refresh proper on a live connection, holding the list mutex. */
async function relistLocked(
  core: RuntimeCore,
  session: ServerSession,
  signal: AbortSignal | undefined,
  combined: AbortSignal,
): Promise<boolean> {
  const expectedGeneration = session.catalog.generation;
  // Always a request: the application (or the server's list_changed) asked for the server's word.
  const { snapshot, listingKey, freshness } = await core.list(session, session.config, combined);
  if (snapshot === undefined || core.unchanged(session, snapshot)) {
    // The published catalog is this listing: remember its key so the next re-list can skip.
    if (listingKey !== undefined) session.listingKey = listingKey;
    session.freshness = freshness;
    return false;
  }
  await publishCatalogs(
    core,
    [{ session, snapshot, listingKey, expectedGeneration, cause: 'hard-refresh' }],
    signal === undefined ? {} : { signal },
  );
  session.freshness = freshness;
  return true;
}

/**
 * The `list_changed` listener of `session`: a trailing debounce (option `listChangedDebounceMs`,
 * never postponed past 10 quiet periods by a steady stream) on the runtime's clock, then one hard
 * refresh; a notification during that re-list only marks it to run once more after it.
 */
export function onListChanged(core: RuntimeCore, session: ServerSession): () => void {
  const debounceMs = core.options.listChangedDebounceMs ?? 100;
  const { clock } = core;
  const settle = (): void => {
    if (
      session.debounce === undefined &&
      session.hardRefreshes === 0 &&
      session.idle !== undefined
    ) {
      const { resolve } = session.idle;
      session.idle = undefined;
      resolve();
    }
  };
  const arm = (now: number): void => {
    if (session.debounce === undefined) session.debounceStarted = now;
    else clock.clearTimeout(session.debounce);
    const wait = Math.max(0, Math.min(debounceMs, session.debounceStarted + 10 * debounceMs - now));
    session.debounce = clock.setTimeout(fire, wait);
  };
  const fire = (): void => {
    session.debounce = undefined;
    session.hardRefreshes++;
    session.again = false;
    hardRefreshSession(core, session, undefined)
      .catch((error: unknown) => {
        if (!core.closed) {
          core.emit({
            type: 'hard-refresh-failed',
            server: session.name,
            error: toStepbindError(error),
          });
        }
      })
      .finally(() => {
        session.hardRefreshes--;
        if (session.again && !core.closed && session.closing === undefined) {
          session.again = false;
          arm(clock.now());
        }
        settle();
      });
  };
  return () => {
    if (core.closed || session.closing !== undefined) return;
    core.emit({ type: 'list-changed', server: session.name });
    if (session.idle === undefined) {
      let resolve: () => void = () => undefined;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      session.idle = { promise, resolve };
    }
    if (session.hardRefreshes > 0) session.again = true;
    else arm(clock.now());
  };
}
