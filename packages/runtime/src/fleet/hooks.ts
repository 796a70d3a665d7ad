/**
 * The narrow seam `McpRuntime` calls (each call site is marked `// fleet:`). Free of the database
 * driver: `pg` is loaded only when a `store` is configured.
 */
import type { CatalogSnapshot } from '@stepbind/binding';
import type { FleetStore, StoreOption } from './attach.js';

/** The generation the fleet assigned to each candidate, read by the local registry. */
const assigned = new WeakMap<CatalogSnapshot, number>();

/** Records the fleet generation of a candidate the fleet accepted (or adopted). */
export function assignFleetGeneration(snapshot: CatalogSnapshot, generation: number): void {
  assigned.set(snapshot, generation);
}

/** `{ generation }` the fleet assigned to `snapshot`, or `{}` (the local registry numbers it). */
export function fleetGeneration(snapshot: CatalogSnapshot): { readonly generation?: number } {
  const generation = assigned.get(snapshot);
  return generation === undefined ? {} : { generation };
}

/** Attaches the fleet store when `store` is set; `undefined` otherwise (nothing is loaded). */
export async function attachFleetFor(
  store: StoreOption | undefined,
): Promise<FleetStore | undefined> {
  if (store === undefined) return undefined;
  const { attachFleet } = await import('./attach.js');
  return attachFleet(store);
}
