/**
 * What the runtime loads to attach a fleet store. Free of the database driver: `pg` is imported
 * only when a `store` is configured.
 */
import type { FleetStore, StoreOption } from './attach.js';

/** Attaches the fleet store when `store` is set; `undefined` otherwise (nothing is loaded). */
export async function attachFleetFor(
  store: StoreOption | undefined,
): Promise<FleetStore | undefined> {
  if (store === undefined) return undefined;
  const { attachFleet } = await import('./attach.js');
  return attachFleet(store);
}
