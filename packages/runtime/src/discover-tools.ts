import {
  discoverToolPages,
  type ChangeFeed,
  type DiscoverOptions,
  type ToolDiscovery,
} from '@stepbind/binding/internal';
import type { Client } from './sdk/sdk-connection.js';
import { clientListSource } from './sdk/sdk-requests.js';

/** Options for {@link discoverTools}: discovery limits plus the server name used in errors. */
export type DiscoverToolsOptions = Omit<DiscoverOptions, 'changes'> & {
  /** A `list_changed` counter for this client; a change restarts the traversal. */
  readonly changes?: ChangeFeed;
};

/**
 * Discovers every tool a connected SDK `Client` serves, following `nextCursor` across all pages
 * with the bounds of DESIGN §4 (defaults: 100 pages, 10,000 tools, 64 KiB cursors, 30 s per request,
 * 60 s in all). Sends raw `tools/list` requests, so the SDK's per-page output-schema cache is never
 * touched. Resolves to a frozen `{ tools, pageSizes, ... }` only once the last page was read.
 *
 * @throws CatalogError with a code from `DUPLICATE_TOOL_NAME`, `CURSOR_REPEATED`, `PAGE_LIMIT`,
 *   `TOOL_LIMIT`, `CURSOR_TOO_LARGE`, `INVALID_TOOL`, `INVALID_PAGE`, `TIMEOUT`, `ABORTED`,
 *   `CONNECTION_CLOSED`, `SERVER_ERROR` (JSON-RPC code in `detail.rpcCode`) or `INVALID_OPTIONS`
 *   (raised before any request is sent).
 */
export function discoverTools(
  client: Client,
  options: DiscoverToolsOptions = {},
): Promise<ToolDiscovery> {
  const server = options.server ?? client.getServerVersion()?.name ?? 'server';
  return discoverToolPages(clientListSource(client, server), { ...options, server });
}

/**
 * The former name of {@link discoverTools} (same function).
 *
 * @deprecated Use {@link discoverTools}; "discovery" is the word for listing a server's tools.
 */
export const enumerateTools: typeof discoverTools = discoverTools;

/**
 * The former name of {@link DiscoverToolsOptions}.
 *
 * @deprecated Use {@link DiscoverToolsOptions}.
 */
export type EnumerateToolsOptions = DiscoverToolsOptions;
