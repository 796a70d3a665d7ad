import {
  createSnapshotBuilder,
  discoverToolPages,
  sha256Hex,
  type CatalogSnapshot,
  type SchemaValidatorCache,
  type ServerIdentity,
  type ToolListSource,
  type ToolDiscovery,
  type ValidationOptions,
} from '@stepbind/binding/internal';
import type { ServerConfig } from './config.js';
import type { Connection } from './connection.js';
import type { DiscoveryProgress } from './events.js';
import { createDebug } from './log.js';
import { traceDiscovery } from './telemetry.js';
import { toolFilterOf, type ToolFilterConfig } from './tool-filter.js';

/** The `name` of a raw tool as listed (validation later refuses a tool without one). */
function toolName(tool: unknown): string {
  const name = (tool as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : '';
}

/** Inputs of {@link discoverCatalog}. */
export interface DiscoverCatalogOptions {
  readonly name: string;
  readonly config: ServerConfig;
  readonly identity: ServerIdentity;
  readonly policyEpoch: number;
  readonly validation?: Omit<ValidationOptions, 'server' | 'validatorCache' | 'pageIndex'>;
  readonly validatorCache?: SchemaValidatorCache;
  readonly signal?: AbortSignal;
  /** The page source, when not the connection's own (the listing cache times each page). */
  readonly source?: ToolListSource;
  /**
   * The listing key of the catalog already published for this connection: when the new listing has
   * the same key, validation and digests are skipped and `snapshot` is `undefined`.
   */
  readonly previousListingKey?: string;
  /**
   * Compute the listing key: one sha256 over the builder's page root (the pages are not hashed
   * again for it). A first discovery of a new connection has nothing to compare with and can skip
   * it. @default true
   */
  readonly keyListing?: boolean;
  /** Called after each page arrived (1-based page number, tools on it, tools so far). */
  readonly onPage?: (progress: DiscoveryProgress) => void;
  /** Called once every page arrived, before the snapshot is built. */
  readonly onValidating?: () => void;
}

/** What {@link discoverCatalog} found. */
export interface CatalogDiscovery {
  readonly discovered: ToolDiscovery;
  /**
   * sha256 of the validated listing (its page root), the revision proof and the tool filter: equal
   * listings have equal keys. `undefined` when `keyListing` is `false`.
   */
  readonly listingKey: string | undefined;
  /** The validated candidate, or `undefined` when the listing equals `previousListingKey`. */
  readonly snapshot: CatalogSnapshot | undefined;
}

/**
 * Discovers one connection with the server's configured limits (restarting on `list_changed`) and
 * turns the complete listing into a validated candidate snapshot. All-or-nothing.
 *
 * Each page is validated and digested while the request for the next one is on the wire; the
 * snapshot is still only built once the whole traversal succeeded, and equals what
 * `createCatalogSnapshot` gives for the same pages.
 *
 * @throws CatalogError from discovery or validation.
 */
export function discoverCatalog(
  connection: Connection,
  options: DiscoverCatalogOptions,
): Promise<CatalogDiscovery> {
  return traceDiscovery(
    options.name,
    () => discover(connection, options),
    (d) => d.discovered.pages.length,
  );
}

const debugDiscovery = createDebug('stepbind:discovery');

async function discover(
  connection: Connection,
  options: DiscoverCatalogOptions,
): Promise<CatalogDiscovery> {
  const { config, name } = options;
  let total = 0;
  // The configured allow/deny filter drops tools before validation and model names (a denied tool
  // that is broken does not break its server's catalog); the listing key covers the filter too.
  const keep = toolFilterOf(config.tools);
  const builder = createSnapshotBuilder({
    identity: options.identity,
    audience: config.audience,
    policyEpoch: options.policyEpoch,
    validation: { ...options.validation },
    ...(options.validatorCache === undefined ? {} : { validatorCache: options.validatorCache }),
  });
  const discovery = await discoverToolPages(options.source ?? connection.listSource, {
    ...config.limits,
    requestTimeoutMs: config.requestTimeoutMs,
    server: name,
    changes: connection.changes,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    onPage: (tools, pageIndex) => {
      total += tools.length;
      if (debugDiscovery.enabled) {
        debugDiscovery(
          `server "${name}": page ${pageIndex + 1}, ${tools.length} tools (${total} so far)`,
        );
      }
      options.onPage?.({
        server: name,
        page: pageIndex + 1,
        pageTools: tools.length,
        totalTools: total,
      });
      builder.addPage(
        keep === undefined ? tools : tools.filter((t) => keep(toolName(t))),
        pageIndex,
      );
    },
    onRestart: () => {
      total = 0;
      debugDiscovery(`server "${name}": list_changed during the listing, restarting from page 1`);
      builder.reset();
    },
  });
  // Every page passed through onPage, in order, on the traversal that succeeded.
  if (builder.pageCount !== discovery.pages.length) {
    throw new Error(
      `discoverCatalog: ${builder.pageCount} pages validated for ${discovery.pages.length} listed`,
    );
  }
  // A key over the listing as validated lets an unchanged re-list (a list_changed that changed
  // nothing, a refresh of a reused connection) skip the snapshot: nothing is frozen or built, and
  // the pages validated on the way are dropped.
  const listingKey =
    options.keyListing === false
      ? undefined
      : listingKeyOf(builder.pageRoot, discovery, config.tools);
  options.onValidating?.();
  if (listingKey !== undefined && listingKey === options.previousListingKey) {
    return { discovered: discovery, listingKey, snapshot: undefined };
  }
  const proven = discovery.revision.kind === 'proven';
  const finish = {
    revisionProof: proven ? 'proven' : 'unversioned',
    ...(discovery.revision.kind === 'proven'
      ? { sourceRevision: discovery.revision.revision }
      : {}),
    discoveryStartedAt: discovery.startedAt,
  } as const;
  const snapshot = builder.finish(finish);
  return { discovered: discovery, listingKey, snapshot };
}

/**
 * The listing key of a traversal that succeeded: sha256 over the builder's page root (which covers
 * every kept tool's canonical definition, already hashed for its descriptor and page digests, and
 * the page boundaries), the revision proof and the tool filter. No page is serialised or hashed a
 * second time for it. Listings that differ only in the order of an object's keys (or in a tool the
 * filter drops) get the same key: their catalogs are equal, descriptor by descriptor.
 */
function listingKeyOf(
  pageRoot: string,
  discovery: ToolDiscovery,
  filter: ToolFilterConfig | undefined,
): string {
  return sha256Hex(
    `${pageRoot}\n${JSON.stringify(discovery.revision)}\n${JSON.stringify(filter ?? null)}`,
  );
}
