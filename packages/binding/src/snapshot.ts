/**
 * Immutable tool catalog snapshots (DESIGN §5, after `toolCatalogSnapshot.v1`).
 *
 * @packageDocumentation
 */
import { digestOf, sha256Hex } from './canonical.js';
import { CatalogError, ErrorCode } from './errors.js';
import { modelNamesOf } from './names.js';
import { SchemaValidatorCache, type SchemaValidator } from './schema.js';
import type { CatalogState } from './states.js';
import {
  ToolNameIndex,
  checkSnapshotTool,
  resolveValidationOptions,
  type McpToolDefinition,
  type UnenforcedPattern,
  type ValidationOptions,
} from './validation.js';

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

class Descriptor implements ToolDescriptor {
  readonly raw: McpToolDefinition;
  readonly name: string;
  readonly modelName: string;
  readonly descriptorDigest: string;
  readonly inputSchemaDigest: string;
  readonly outputSchemaDigest: string | undefined;
  readonly effectClass: EffectClass;
  readonly unenforcedPatterns: readonly UnenforcedPattern[];
  readonly #cache: SchemaValidatorCache;

  constructor(
    raw: McpToolDefinition,
    modelName: string,
    descriptorDigest: string,
    inputSchemaDigest: string,
    outputSchemaDigest: string | undefined,
    unenforcedPatterns: readonly UnenforcedPattern[],
    cache: SchemaValidatorCache,
  ) {
    this.raw = raw;
    this.name = raw.name;
    this.modelName = modelName;
    this.descriptorDigest = descriptorDigest;
    this.inputSchemaDigest = inputSchemaDigest;
    this.outputSchemaDigest = outputSchemaDigest;
    this.effectClass = effectClassOf(raw);
    this.unenforcedPatterns = unenforcedPatterns;
    this.#cache = cache;
    Object.freeze(this);
  }

  inputValidator(): SchemaValidator {
    return this.#cache.getValidator(this.inputSchemaDigest);
  }

  outputValidator(): SchemaValidator | undefined {
    return this.outputSchemaDigest === undefined
      ? undefined
      : this.#cache.getValidator(this.outputSchemaDigest);
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      modelName: this.modelName,
      descriptorDigest: this.descriptorDigest,
      inputSchemaDigest: this.inputSchemaDigest,
      outputSchemaDigest: this.outputSchemaDigest,
      effectClass: this.effectClass,
      ...(this.unenforcedPatterns.length === 0
        ? {}
        : { unenforcedPatterns: this.unenforcedPatterns }),
      raw: this.raw,
    };
  }
}

/**
 * A `ReadonlyMap` from tool name to descriptor, in catalog order, with no mutators at all, so a
 * frozen snapshot stays immutable. It reuses the name index of the duplicate check.
 */
class ToolsByName implements ReadonlyMap<string, ToolDescriptor> {
  readonly #index: ToolNameIndex;
  readonly #tools: readonly ToolDescriptor[];
  constructor(index: ToolNameIndex, tools: readonly ToolDescriptor[]) {
    this.#index = index;
    this.#tools = tools;
    Object.freeze(this);
  }
  get size(): number {
    return this.#tools.length;
  }
  get(key: string): ToolDescriptor | undefined {
    const i = this.#index.get(key);
    return i === undefined ? undefined : this.#tools[i];
  }
  has(key: string): boolean {
    return this.#index.get(key) !== undefined;
  }
  forEach(
    fn: (value: ToolDescriptor, key: string, map: ReadonlyMap<string, ToolDescriptor>) => void,
    thisArg?: unknown,
  ): void {
    for (const d of this.#tools) fn.call(thisArg, d, d.name, this);
  }
  *entries(): MapIterator<[string, ToolDescriptor]> {
    for (const d of this.#tools) yield [d.name, d];
  }
  *keys(): MapIterator<string> {
    for (const d of this.#tools) yield d.name;
  }
  *values(): MapIterator<ToolDescriptor> {
    yield* this.#tools;
  }
  [Symbol.iterator](): MapIterator<[string, ToolDescriptor]> {
    return this.entries();
  }
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
 * A {@link SnapshotBuilder} for one server's catalog. The generation and ttl are checked here, before
 * any page.
 *
 * @throws CatalogError `INVALID_OPTIONS` for a bad generation or ttl.
 */
export function createSnapshotBuilder(options: SnapshotBuilderOptions): SnapshotBuilder {
  return new Builder(options);
}

function checkProof(server: string, input: SnapshotFinishInput): void {
  if (input.revisionProof === 'proven' && typeof input.sourceRevision !== 'string') {
    throw new CatalogError(
      ErrorCode.INVALID_OPTIONS,
      `A proven catalog of server "${server}" needs its sourceRevision.`,
      { detail: { server, option: 'sourceRevision' } },
    );
  }
}

class Builder implements SnapshotBuilder {
  readonly #options: SnapshotBuilderOptions;
  readonly #server: string;
  readonly #generation: number;
  readonly #ttlMs: number;
  readonly #cache: SchemaValidatorCache;
  readonly #base: ValidationOptions;
  // Parallel arrays rather than one record per tool: the canonical texts die young, and the
  // little that lives until the descriptors exist is copied by as few scavenges as possible.
  #raws: McpToolDefinition[] = [];
  #digests: string[] = [];
  #inputDigests: string[] = [];
  #outputDigests: (string | undefined)[] = [];
  #unenforced: (readonly UnenforcedPattern[])[] = [];
  #index = new ToolNameIndex();
  #pageDigests: string[] = [];
  #pageSizes: number[] = [];
  #failure: { readonly error: unknown } | undefined;
  #spent = false;

  constructor(options: SnapshotBuilderOptions) {
    const server = options.identity.name;
    const generation = options.generation ?? 0;
    const ttlMs = options.ttlMs ?? DEFAULT_SNAPSHOT_TTL_MS;
    if (!Number.isSafeInteger(generation) || generation < 0 || !(ttlMs >= 0)) {
      throw new CatalogError(
        ErrorCode.INVALID_OPTIONS,
        `Invalid generation or ttlMs for the catalog of server "${server}".`,
        { detail: { server, generation, ttlMs } },
      );
    }
    this.#options = options;
    this.#server = server;
    this.#generation = generation;
    this.#ttlMs = ttlMs;
    this.#cache =
      options.validatorCache ?? options.validation?.validatorCache ?? new SchemaValidatorCache();
    this.#base = {
      ...options.validation,
      server: options.validation?.server ?? server,
      validatorCache: this.#cache,
    };
  }

  get pageCount(): number {
    return this.#pageSizes.length;
  }

  addPage(page: readonly unknown[], pageIndex: number): void {
    this.#usable();
    if (pageIndex !== this.#pageSizes.length) {
      throw new CatalogError(
        ErrorCode.INVALID_OPTIONS,
        `Pages of the catalog of server "${this.#server}" must be added in order: got page ${pageIndex + 1}, expected page ${this.#pageSizes.length + 1}.`,
        { detail: { server: this.#server, page: pageIndex } },
      );
    }
    try {
      const o = resolveValidationOptions({ ...this.#base, pageIndex });
      let pageText = '[';
      for (let i = 0; i < page.length; i++) {
        const tool = checkSnapshotTool(page[i], o, i, this.#index);
        if (i > 0) pageText += ',';
        pageText += tool.text;
        this.#raws.push(tool.raw);
        this.#digests.push(tool.digest);
        this.#inputDigests.push(tool.inputSchemaDigest);
        this.#outputDigests.push(tool.outputSchemaDigest);
        this.#unenforced.push(tool.unenforcedPatterns);
      }
      this.#pageDigests.push(sha256Hex(pageText + ']'));
      this.#pageSizes.push(page.length);
    } catch (error) {
      this.#failure = { error };
      throw error;
    }
  }

  reset(): void {
    this.#raws = [];
    this.#digests = [];
    this.#inputDigests = [];
    this.#outputDigests = [];
    this.#unenforced = [];
    this.#index = new ToolNameIndex();
    this.#pageDigests = [];
    this.#pageSizes = [];
    this.#failure = undefined;
    this.#spent = false;
  }

  finish(input: SnapshotFinishInput): CatalogSnapshot {
    checkProof(this.#server, input);
    this.#usable();
    this.#spent = true;
    const raws = this.#raws;
    const cache = this.#cache;
    // Frozen only once the whole catalog is valid: a refused catalog leaves its input untouched.
    for (let i = 0; i < raws.length; i++) deepFreeze(raws[i]);
    const index = this.#index;
    const names = modelNamesOf(this.#server, index.names, index.parts, index.clashes);
    const tools: ToolDescriptor[] = new Array<ToolDescriptor>(raws.length);
    for (let i = 0; i < raws.length; i++) {
      tools[i] = new Descriptor(
        raws[i] as McpToolDefinition,
        names[i] as string,
        this.#digests[i] as string,
        this.#inputDigests[i] as string,
        this.#outputDigests[i],
        this.#unenforced[i] as readonly UnenforcedPattern[],
        cache,
      );
    }
    const options = this.#options;
    return Object.freeze({
      schema: CATALOG_SNAPSHOT_SCHEMA,
      identity: freezeIdentity(options.identity),
      audience: options.audience,
      policyEpoch: options.policyEpoch,
      generation: this.#generation,
      sourceRevision: input.revisionProof === 'proven' ? input.sourceRevision : undefined,
      discoveryStartedAt: input.discoveryStartedAt,
      expiresAt: input.discoveryStartedAt + this.#ttlMs,
      pageSizes: Object.freeze(this.#pageSizes),
      pageRoot: `sha256:${sha256Hex(this.#pageDigests.join(''))}`,
      state: input.revisionProof === 'proven' ? 'SNAPSHOT_PROVEN' : 'UNVERSIONED_OBSERVATION',
      tools: Object.freeze(tools),
      toolsByName: new ToolsByName(index, tools),
    });
  }

  #usable(): void {
    if (this.#failure !== undefined) throw this.#failure.error;
    if (this.#spent) {
      throw new CatalogError(
        ErrorCode.INVALID_OPTIONS,
        `The snapshot builder of server "${this.#server}" already finished; reset it or create another.`,
        { detail: { server: this.#server } },
      );
    }
  }
}

/**
 * Validate every page and build a frozen candidate snapshot: descriptor, schema and page digests,
 * model names and effect classes. All or nothing. The same code path as
 * {@link createSnapshotBuilder}, with every page added at once.
 *
 * Raw tool definitions are deep-frozen once here, after the whole catalog passed (a refused catalog
 * leaves its input untouched), so digests can never drift from the objects the snapshot hands out.
 *
 * Cost: one canonical-JSON pass per tool (schema digests hash slices of the tool's canonical text),
 * cached schema checks by digest, one name index shared by the duplicate check, `toolsByName` and
 * the model names. `bench/snapshot.ts` measures it against `JSON.parse` of the same payload.
 *
 * @throws CatalogError any validation code (see `validateTool`), `DUPLICATE_TOOL_NAME` across pages,
 *   or `INVALID_OPTIONS` for a proven snapshot without `sourceRevision` or a bad generation/ttl.
 */
export function createCatalogSnapshot(input: CreateCatalogSnapshotInput): CatalogSnapshot {
  checkProof(input.identity.name, input);
  const builder = createSnapshotBuilder(input);
  for (let p = 0; p < input.pages.length; p++) builder.addPage(input.pages[p] ?? [], p);
  return builder.finish(input);
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

function freezeIdentity(identity: ServerIdentity): ServerIdentity {
  return Object.freeze({
    name: identity.name,
    transportDigest: identity.transportDigest,
    ...(identity.serverInfo === undefined
      ? {}
      : { serverInfo: deepFreeze({ ...identity.serverInfo }) }),
    ...(identity.protocolVersion === undefined
      ? {}
      : { protocolVersion: identity.protocolVersion }),
  });
}

/**
 * Freeze `value` and everything reachable through own enumerable string keys. `for...in` with an
 * own-key test walks the same keys as `Object.keys` without allocating an array per object.
 */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  Object.freeze(value);
  const record = value as Record<string, unknown>;
  for (const key in record) {
    if (Object.hasOwn(record, key)) deepFreeze(record[key]);
  }
  return value;
}
