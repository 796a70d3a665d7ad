/**
 * Which catalog cache file a runtime uses (DESIGN §19.1): the `cache` option, else the
 * configuration's `cache`, else none (the library's default); and the CLI's default, the user's
 * cache directory unless `--no-cache` or the configuration says otherwise.
 *
 * @packageDocumentation
 */
import { resolve } from 'node:path';
import type { CatalogCacheConfig, RuntimeConfig } from '../config.js';
import { defaultCachePath } from './catalog-cache.js';

/** The `cache` option of `McpRuntime.open`: a file, or `false` for none. */
export type CatalogCacheOption = CatalogCacheConfig | false;

/**
 * The absolute path of the cache file a runtime uses, or undefined for none: the option wins
 * (`false` turns a configured cache off), else the configuration's (already resolved against its
 * file; a relative path of a configuration object resolves against the working directory).
 */
export function resolveCachePath(
  option: CatalogCacheOption | undefined,
  config: RuntimeConfig['cache'],
): string | undefined {
  const chosen = option ?? config;
  return chosen === undefined || chosen === false ? undefined : resolve(chosen.path);
}

/**
 * The `cache` option the CLI opens a runtime with: `false` with `--no-cache`; none (the
 * configuration's `cache` decides) when the configuration has one; else the default file under
 * the user's cache directory ({@link defaultCachePath}).
 */
export function cliCacheOption(
  noCache: boolean,
  config: RuntimeConfig,
  env: NodeJS.ProcessEnv = process.env,
): CatalogCacheOption | undefined {
  if (noCache) return false;
  if (config.cache !== undefined) return undefined;
  return { path: defaultCachePath(env) };
}
