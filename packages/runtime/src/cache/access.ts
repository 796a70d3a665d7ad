/**
 * The runtime's view of its catalog cache file (DESIGN §19.1): keys from a server's name,
 * configuration and principal, restores under the policy epoch and validation in force.
 *
 * @packageDocumentation
 */
import type { ServerConfig } from '../config.js';
import type { RuntimeCore } from '../core.js';
import type { CatalogCacheAccess } from '../publish.js';
import { catalogCacheKeyOf, type CatalogCache } from './catalog-cache.js';

/** The {@link CatalogCacheAccess} of `file` for `core`. */
export function catalogCacheAccess(file: CatalogCache, core: RuntimeCore): CatalogCacheAccess {
  const keyOf = (name: string, config: ServerConfig) =>
    catalogCacheKeyOf(name, config, core.authPrincipal(name, config));
  return {
    lookup: (name, config) =>
      file.lookup(keyOf(name, config), {
        policyEpoch: core.registry.policyEpoch,
        ...(core.options.validation === undefined ? {} : { validation: core.options.validation }),
        validatorCache: core.validatorCache,
      })?.snapshot,
    record: (name, config, catalog) => file.record(keyOf(name, config), catalog),
  };
}
