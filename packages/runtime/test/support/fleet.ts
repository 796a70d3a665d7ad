import type { AuditEntry, InMemoryFleet, ScriptedServer } from '@stepbind/testkit';
import { within, WAIT_BOUND_MS } from './wait.js';

/** The tools the instances of in-memory server `name` were asked to call, in order. */
export function callsOf(fleet: InMemoryFleet, name: string): (string | undefined)[] {
  return fleet
    .audit(name)
    .filter((e) => e.method === 'tools/call')
    .map((e) => e.tool);
}

/** How many `tools/list` requests the instances of in-memory server `name` received. */
export function listsOf(fleet: InMemoryFleet, name: string): number {
  return fleet.audit(name).filter((e) => e.method === 'tools/list').length;
}

/**
 * Resolves with the first entry, already in the live instance's audit trail or still to come,
 * that `test` accepts: waits for what the server received instead of polling its audit trail.
 */
export function received(
  fleet: InMemoryFleet,
  name: string,
  test: (entry: AuditEntry) => boolean,
  ms: number = WAIT_BOUND_MS,
): Promise<AuditEntry> {
  return within(fleet.server(name).waitFor(test), `matching request at server "${name}"`, ms);
}

/**
 * Resolves once `instance`'s connection has closed (either side closed it): waits for the close
 * instead of polling the runtime's status. Chains any `onclose` already set.
 */
export function serverClosed(instance: ScriptedServer, ms: number = WAIT_BOUND_MS): Promise<void> {
  const closed = new Promise<void>((resolve) => {
    const previous = instance.server.onclose;
    instance.server.onclose = () => {
      previous?.();
      resolve();
    };
  });
  return within(closed, 'close of the scripted server', ms);
}
