/**
 * Catalog snapshots (DESIGN §5): the frozen shape of one server's validated catalog, its tool
 * descriptors and effect classes. They are built by `builder.ts`.
 *
 * @packageDocumentation
 */
import { digestOf } from '../canonical.js';
import type { SchemaValidator } from '../schema/cache.js';
import type { CatalogState } from '../states.js';
import type { McpToolDefinition, UnenforcedPattern, ValidationOptions } from '../validation.js';
import type { SchemaValidatorCache } from '../schema/cache.js';

/** The schema tag of every snapshot. */
export const CATALOG_SNAPSHOT_SCHEMA = 'toolCatalogSnapshot.v1';

/** Default snapshot lifetime after discovery start: 5 minutes. */
export const DEFAULT_SNAPSHOT_TTL_MS = 300_000;

/** What the server reported about itself in `initialize`. */
export interface ServerInfo {
  readonly name: string;
  readonly version: string;
  readonly [key: string]: unknown;
}

/** Who a catalog came from. Two identities are the same server only if every field is equal. */
export interface ServerIdentity {
  /** Configured server name (the key in `mcpServers`). */
  readonly name: string;
  /** {@link computeTransportDigest} of the transport settings (command, args, env, url, headers...). */
  readonly transportDigest: string;
  /** `serverInfo` from the initialize result. */
  readonly serverInfo?: ServerInfo;
  /** Negotiated MCP protocol version. */
  readonly protocolVersion?: string;
}

/**
 * How a tool may act, derived from the server's untrusted annotations:
 * - `read` only when `annotations.readOnlyHint === true`;
 * - otherwise `write` when `annotations.destructiveHint === false`;
 * - otherwise `destructive` (the MCP default for `destructiveHint` is true);
 * - `unknown` when the tool has no `annotations` object at all.
 *
 * These are hints: `read` never grants confirmation-free execution of an unproven catalog.
 */
export type EffectClass = 'read' | 'write' | 'destructive' | 'unknown';

/** Derive the {@link EffectClass} of a raw tool definition (see there for the rules). */
export function effectClassOf(tool: { readonly annotations?: unknown }): EffectClass {
  const a = tool.annotations;
  if (typeof a !== 'object' || a === null || Array.isArray(a)) return 'unknown';
  const hints = a as Record<string, unknown>;
  if (hints.readOnlyHint === true) return 'read';
  if (hints.destructiveHint === false) return 'write';
  return 'destructive';
}

/** One tool of a snapshot. Frozen; validators are compiled on first use and shared by digest. */
export interface ToolDescriptor {
  /** The MCP tool definition as served (deep-frozen at snapshot creation). */
  readonly raw: McpToolDefinition;
  /** Raw tool name. */
  readonly name: string;
  /** Model-facing name, unique within the snapshot (DESIGN §8). */
  readonly modelName: string;
  /** `digestOf(raw)`: sha256 of the canonical JSON of the definition. */
  readonly descriptorDigest: string;
  readonly inputSchemaDigest: string;
  readonly outputSchemaDigest: string | undefined;
  readonly effectClass: EffectClass;
  /**
   * Patterns of the input or output schema that stepbind does not enforce (no RE2 equivalent);
   * usually empty. The runtime reports a catalog that has any with a `patterns-unenforced` event.
   */
  readonly unenforcedPatterns: readonly UnenforcedPattern[];
  /** Validator for call arguments; compiles on its first `validate`. */
  inputValidator(): SchemaValidator;
  /** Validator for `structuredContent`, or `undefined` when the tool has no `outputSchema`. */
  outputValidator(): SchemaValidator | undefined;
}

/** A frozen, fully validated catalog of one server for one audience. */
export interface CatalogSnapshot {
  readonly schema: typeof CATALOG_SNAPSHOT_SCHEMA;
  readonly identity: ServerIdentity;
  /** Audience class this catalog was discovered for. */
  readonly audience: string;
  readonly policyEpoch: number;
  /** Assigned by the registry at publication; 0 for a candidate not yet published. */
  readonly generation: number;
  /** Source revision token, present only when proven on every page. */
  readonly sourceRevision: string | undefined;
  /** Epoch milliseconds when the successful traversal started. */
  readonly discoveryStartedAt: number;
  /** Epoch milliseconds after which the catalog should be re-listed. */
  readonly expiresAt: number;
  /** Number of tools on each page, in order. */
  readonly pageSizes: readonly number[];
  /** `sha256:` + sha256 of the concatenated hex page digests; page digest = `digestOf(page)`. */
  readonly pageRoot: string;
  /**
   * `SNAPSHOT_PROVEN` or `UNVERSIONED_OBSERVATION` for a candidate; `ELIGIBLE` or
   * `UNVERSIONED_OBSERVATION` once published. Retirement is tracked by the registry.
   */
  readonly state: CatalogState;
  readonly tools: readonly ToolDescriptor[];
  readonly toolsByName: ReadonlyMap<string, ToolDescriptor>;
}

/** Input of {@link createCatalogSnapshot}. */
export interface CreateCatalogSnapshotInput {
  readonly identity: ServerIdentity;
  readonly audience: string;
  readonly policyEpoch: number;
  /** @default 0 (a candidate, not yet published) */
  readonly generation?: number;
  /** The raw `tools` arrays of each page, in order. */
  readonly pages: readonly (readonly unknown[])[];
  /** Required when `revisionProof` is `'proven'`. */
  readonly sourceRevision?: string;
  /** `'proven'` gives `SNAPSHOT_PROVEN`; `'unversioned'` gives `UNVERSIONED_OBSERVATION`. */
  readonly revisionProof: 'proven' | 'unversioned';
  /** Epoch milliseconds. */
  readonly discoveryStartedAt: number;
  /** @default 300000 (5 minutes) */
  readonly ttlMs?: number;
  /** Validation options; `server` defaults to `identity.name`. */
  readonly validation?: Partial<ValidationOptions>;
  /** Cache for schema checks and compiled validators. @default a new cache */
  readonly validatorCache?: SchemaValidatorCache;
}

/** `digestOf(settings)`: the digest of transport settings (command, args, env, url, headers...). */
export function computeTransportDigest(settings: object): string {
  return digestOf(settings);
}

/** What {@link createSnapshotBuilder} needs before the first page: everything but the pages and proof. */
export type SnapshotBuilderOptions = Omit<
  CreateCatalogSnapshotInput,
  'pages' | 'sourceRevision' | 'revisionProof' | 'discoveryStartedAt'
>;

/** What {@link SnapshotBuilder.finish} needs once the traversal is complete. */
export type SnapshotFinishInput = Pick<
  CreateCatalogSnapshotInput,
  'sourceRevision' | 'revisionProof' | 'discoveryStartedAt'
>;

/**
 * Builds a {@link CatalogSnapshot} page by page, so validation and digests can run while the next
 * page is on the wire. `finish` gives exactly what {@link createCatalogSnapshot} gives for the same
 * pages: same digests, model names and errors.
 *
 * All or nothing: a page that fails leaves the builder failed (every later call rethrows that
 * error until `reset`), and nothing is frozen or published before `finish`. The raw tools of the
 * pages added must not be mutated until `finish`: their digests are taken when the page is added.
 */
export interface SnapshotBuilder {
  /** Number of pages added since creation or the last {@link SnapshotBuilder.reset}. */
  readonly pageCount: number;
  /**
   * The page root of the pages added so far: what {@link SnapshotBuilder.finish} would give as
   * {@link CatalogSnapshot.pageRoot}. It covers every added tool's canonical definition and the page
   * boundaries, so a re-list can be compared without hashing its pages again.
   */
  readonly pageRoot: string;
  /**
   * Validates and digests one page. `pageIndex` must be {@link SnapshotBuilder.pageCount}.
   *
   * @throws CatalogError any code of `createCatalogSnapshot` for this page.
   */
  addPage(tools: readonly unknown[], pageIndex: number): void;
  /** Forgets every page and any failure, for a traversal restarted from the first page. */
  reset(): void;
  /**
   * Freezes the pages added so far into a candidate snapshot; the builder is then spent.
   *
   * @throws CatalogError the builder's failure, or `INVALID_OPTIONS` for a proven catalog without
   *   `sourceRevision`.
   */
  finish(input: SnapshotFinishInput): CatalogSnapshot;
}

/**
 * A frozen copy of `snapshot` with a new generation and state, sharing the (frozen) tools: no
 * re-validation and no re-digesting. Used by the registry at publication.
 */
export function withGeneration(
  snapshot: CatalogSnapshot,
  generation: number,
  state: CatalogState,
): CatalogSnapshot {
  return Object.freeze({ ...snapshot, generation, state });
}
