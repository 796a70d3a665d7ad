/**
 * The runtime's view of its catalog cache file (DESIGN §19.1): keys from a server's name,
 * configuration and principal, restores under the policy epoch and validation in force.
 *
 * @packageDocumentation
 */
import type { ServerConfig } from '../config.js';
import type { RuntimeCore } from '../core.js';
import type { CatalogCacheAccess } from '../publish.js';
import { CatalogCache, catalogCacheKeyOf } from './catalog-cache.js';
import { resolveCachePath, type CatalogCacheOption } from './option.js';

/**
 * Opens the cache file the `cache` option (else the configuration's `cache`) names, if any, and
 * installs it on `core`. Its content never fails the open (a `catalog-cache-ignored` event says
 * why it was not used).
 *
 * @throws ConfigError `INVALID_CONFIG` for a path that cannot name a file.
 */
export async function openCatalogCache(
  core: RuntimeCore,
  option: CatalogCacheOption | undefined,
  configured: RuntimeCore['config']['cache'],
): Promise<void> {
  const path = resolveCachePath(option, configured);
  if (path === undefined) return;
  const file = await CatalogCache.open(path, { emit: core.emit });
  core.cacheFile = file;
  core.cache = catalogCacheAccess(file, core);
}

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
