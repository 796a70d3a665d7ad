/**
 * The life of a provisional server past its publication (DESIGN §19.2, §19.3): its live start,
 * published in its entry's place, and the idle stop that turns a lazy server provisional again.
 * The runtime hands these to its core (`RuntimeCore.lifecycle`).
 *
 * @packageDocumentation
 */
import { acquireMutex, ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import type { RuntimeCore } from './core.js';
import { closedError, toStepbindError } from './failures.js';
import { publishCatalogs } from './publish.js';
import { firstPublication, startServer, type Candidate } from './refresh.js';
import type { ManagedServer } from './server/managed-server.js';
import { ProvisionalServer } from './server/provisional.js';

/**
 * The live start of a provisional server (DESIGN §19.2), bounded by the runtime's start queue:
 * a new connection, discovered and validated, then published through the one publication path
 * under the refresh mutex (so a refresh in progress has carried the provisional entry into its
 * set first), replacing the provisional entry of the current set.
 *
 * @throws the start's or the publication's failure, after the entry shows it (`server-failed`);
 *   RuntimeError `SERVER_NOT_READY` when a refresh replaced the entry meanwhile.
 */
export async function startProvisional(
  core: RuntimeCore,
  p: ProvisionalServer,
): Promise<ManagedServer> {
  try {
    if (core.closed) throw closedError();
    const candidate = await core.startQueue.add(() =>
      startServer(core, p.name, p.config, p.identityKey, core.closeSignal),
    );
    return await adoptLive(core, p, candidate);
  } catch (error) {
    const mapped = toStepbindError(error);
    p.fail(mapped);
    // A start whose entry a refresh replaced (a new identity) is no failure of the server in force.
    const entry = core.current?.entries.get(p.name);
    if (!core.closed && entry?.kind === 'provisional' && entry.provisional === p) {
      core.liveFailed.add(p.name);
      core.invalidateViews();
      core.emit({
        type: 'server-failed',
        server: p.name,
        required: p.config.required,
        error: mapped,
      });
      // A required server that is down fails the next capture, as it does without a cache.
      if (p.config.required) core.markDirty(`start:${p.name}`);
    }
    throw mapped;
  }
}

/** Publishes a provisional server's live catalog and puts the server in its entry's place. */
async function adoptLive(
  core: RuntimeCore,
  p: ProvisionalServer,
  candidate: Candidate,
): Promise<ManagedServer> {
  const { server, snapshot } = candidate;
  let joined = false;
  let release: (() => void) | undefined;
  try {
    release = await acquireMutex(core.refreshMutex, core.closeSignal);
    const set = core.current;
    const entry = set?.entries.get(p.name);
    if (core.closed) throw closedError();
    if (set === undefined || entry?.kind !== 'provisional' || entry.provisional !== p) {
      throw new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        `Server "${p.name}" was reconfigured before its live catalog was published; nothing was sent. Call again from the next step.`,
        { detail: { server: p.name, delivery: 'not-sent' } },
      );
    }
    if (snapshot === undefined) throw new Error(`live start of "${p.name}" has no snapshot`);
    await publishCatalogs(core, [firstPublication(candidate, snapshot)], {
      commit: () => {
        const membership = {
          config: p.config,
          listingKey: candidate.listingKey,
          freshness: candidate.freshness,
        };
        server.joinSet(membership);
        joined = true;
        set.entries.set(p.name, { kind: 'ready', server });
        set.watch(server);
        set.invalidate();
        // An older set a step still holds showed `p` too: that step's calls run here, so the
        // set holds this server until it drains.
        for (const older of core.liveSets) {
          const shown = older.entries.get(p.name);
          if (older === set || shown?.kind !== 'provisional' || shown.provisional !== p) continue;
          server.joinSet(membership);
          older.entries.set(p.name, { kind: 'ready', server });
        }
      },
    });
  } catch (error) {
    if (!joined) await core.closeServer(server);
    throw error;
  } finally {
    release?.();
  }
  core.liveFailed.delete(p.name);
  const catalog = server.catalog;
  let changed = 0;
  for (const tool of p.cached.tools) {
    if (catalog.toolsByName.get(tool.name)?.descriptorDigest !== tool.descriptorDigest) changed++;
  }
  const added = catalog.tools.filter((t) => !p.cached.toolsByName.has(t.name)).length;
  core.emit({
    type: 'server-ready',
    server: p.name,
    generation: catalog.generation,
    tools: catalog.tools.length,
  });
  core.emit({
    type: 'provisional-confirmed',
    server: p.name,
    unchanged: catalog.pageRoot === p.cached.pageRoot,
    changedTools: changed,
    addedTools: added,
  });
  return server;
}

/**
 * A lazy server idle for its `idleTimeoutMs` (DESIGN §19.3): under the refresh mutex, if it is
 * still the current set's and runs no call, its entry becomes provisional again (its catalog as
 * the cached one) and the server closes once no older set holds it.
 */
export function stopIdleServer(core: RuntimeCore, server: ManagedServer): void {
  core.track(
    (async () => {
      let release: () => void;
      try {
        release = await acquireMutex(core.refreshMutex, core.closeSignal);
      } catch {
        return; // the runtime closed
      }
      try {
        const set = core.current;
        const entry = set?.entries.get(server.name);
        if (
          core.closed ||
          set === undefined ||
          entry?.kind !== 'ready' ||
          entry.server !== server ||
          server.callsInFlight > 0 ||
          server.slot === undefined ||
          server.connection.closed
        )
          return;
        const p = new ProvisionalServer(
          core,
          server.name,
          server.config,
          server.identityKey,
          server.catalog,
        );
        set.entries.set(server.name, { kind: 'provisional', provisional: p });
        set.invalidate();
        core.emit({
          type: 'server-idle-stopped',
          server: server.name,
          idleTimeoutMs: server.config.idleTimeoutMs,
        });
        if (server.leaveSet()) await core.closeServer(server);
      } finally {
        release();
      }
    })(),
  );
}
