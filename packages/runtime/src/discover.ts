import {
  createCatalogSnapshot,
  enumerateCatalog,
  type CatalogSnapshot,
  type SchemaValidatorCache,
  type ServerIdentity,
  type ToolEnumeration,
  type ValidationOptions,
} from '@stepbind/binding';
import type { ServerConfig } from './config.js';
import type { SdkConnection } from './sdk.js';

/** Inputs of {@link discoverSnapshot}. */
export interface DiscoverSnapshotOptions {
  readonly name: string;
  readonly config: ServerConfig;
  readonly identity: ServerIdentity;
  readonly policyEpoch: number;
  readonly validation?: Omit<ValidationOptions, 'server' | 'validatorCache' | 'pageIndex'>;
  readonly validatorCache?: SchemaValidatorCache;
  readonly signal?: AbortSignal;
}

/**
 * Enumerates one connection with the server's configured limits (restarting on `list_changed`) and
 * turns the complete listing into a validated candidate snapshot. All-or-nothing.
 *
 * @throws CatalogError from discovery or validation.
 */
export async function discoverSnapshot(
  connection: SdkConnection,
  options: DiscoverSnapshotOptions,
): Promise<{ enumeration: ToolEnumeration; snapshot: CatalogSnapshot }> {
  const { config, name } = options;
  const enumeration = await enumerateCatalog(connection.listSource, {
    ...config.limits,
    requestTimeoutMs: config.requestTimeoutMs,
    server: name,
    changes: connection,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  const proven = enumeration.revision.kind === 'proven';
  const snapshot = createCatalogSnapshot({
    identity: options.identity,
    audience: config.audience,
    policyEpoch: options.policyEpoch,
    pages: enumeration.pages,
    revisionProof: proven ? 'proven' : 'unversioned',
    ...(enumeration.revision.kind === 'proven'
      ? { sourceRevision: enumeration.revision.revision }
      : {}),
    discoveryStartedAt: enumeration.startedAt,
    validation: { ...options.validation },
    ...(options.validatorCache === undefined ? {} : { validatorCache: options.validatorCache }),
  });
  return { enumeration, snapshot };
}
