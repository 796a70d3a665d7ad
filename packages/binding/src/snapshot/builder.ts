/**
 * The snapshot builder: the hot path of discovery. Each page is checked tool by tool (one
 * canonical-JSON pass per tool, `validation.ts`), and the catalog is frozen into a
 * {@link CatalogSnapshot} once every page passed.
 *
 * @packageDocumentation
 */
import { sha256Hex } from '../canonical.js';
import { CatalogError, ErrorCode } from '../errors.js';
import { modelNamesOf, sanitizeNamePart } from '../names.js';
import { SchemaValidatorCache, type SchemaValidator } from '../schema/cache.js';
import {
  checkTool,
  duplicateError,
  resolveValidationOptions,
  type McpToolDefinition,
  type ResolvedValidationOptions,
  type ToolNames,
  type UnenforcedPattern,
  type ValidationOptions,
} from '../validation.js';
import {
  CATALOG_SNAPSHOT_SCHEMA,
  DEFAULT_SNAPSHOT_TTL_MS,
  effectClassOf,
  type CatalogSnapshot,
  type CreateCatalogSnapshotInput,
  type EffectClass,
  type ServerIdentity,
  type SnapshotBuilder,
  type SnapshotBuilderOptions,
  type SnapshotFinishInput,
  type ToolDescriptor,
} from './snapshot.js';

/**
 * @internal The names of a catalog, indexed for the duplicate check, for `toolsByName` and for
 * model names in one map. Keys are sanitised names (what model names are built from); a raw name
 * whose sanitised form is taken by another raw name is kept in a second, usually empty, map.
 */
export class ToolNameIndex implements ToolNames {
  /** Raw names by catalog index. */
  readonly names: string[] = [];
  /** Sanitised names by catalog index (`sanitizeNamePart`). */
  readonly parts: string[] = [];
  /** Sanitised name to the catalog index of the first tool with that sanitised name. */
  readonly #byPart = new Map<string, number>();
  /** Raw name to catalog index, for tools whose sanitised name another raw name took first. */
  #others: Map<string, number> | undefined;

  /** True when two raw names sanitise to the same model-facing part. */
  get clashes(): boolean {
    return this.#others !== undefined;
  }

  /** The catalog index of a raw name. */
  get(name: string): number | undefined {
    const i = this.#byPart.get(sanitizeNamePart(name));
    if (i !== undefined && this.names[i] === name) return i;
    return this.#others?.get(name);
  }

  /**
   * Add the next tool's name, which matches {@link TOOL_NAME_PATTERN}; throws
   * `DUPLICATE_TOOL_NAME` ({@link duplicateError}).
   */
  add(name: string, o: Pick<ResolvedValidationOptions, 'server' | 'pageIndex'>): void {
    const index = this.names.length;
    // sanitizeNamePart for a valid tool name: '.' is the only character it replaces.
    const part = name.includes('.') ? name.replaceAll('.', '_') : name;
    const holder = this.#byPart.get(part);
    if (holder === undefined) {
      this.#byPart.set(part, index);
    } else {
      if (this.names[holder] === name) throw duplicateError(name, holder, index, o);
      this.#others ??= new Map();
      const first = this.#others.get(name);
      if (first !== undefined) throw duplicateError(name, first, index, o);
      this.#others.set(name, index);
    }
    this.names.push(name);
    this.parts.push(part);
  }
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

  get pageRoot(): string {
    return `sha256:${sha256Hex(this.#pageDigests.join(''))}`;
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
        const tool = checkTool(page[i], o, i, this.#index);
        if (i > 0) pageText += ',';
        pageText += tool.text;
        this.#raws.push(tool.raw);
        this.#digests.push(tool.digest);
        this.#inputDigests.push(tool.input.digest);
        this.#outputDigests.push(tool.output?.digest);
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
      pageRoot: this.pageRoot,
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
 * Freeze `value` and every object reachable from it: through the items of arrays and the own
 * enumerable string keys of other objects (what a JSON value holds). `for...in` with an own-key
 * test walks the same keys as `Object.keys` without allocating an array per object; arrays are
 * walked by index (a `for...in` over an array makes a string of every index); primitives are
 * skipped before the call.
 */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) freezeObject(value);
  return value;
}

function freezeObject(value: object): void {
  Object.freeze(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item === 'object' && item !== null) freezeObject(item);
    }
    return;
  }
  const record = value as Record<string, unknown>;
  for (const key in record) {
    const member = record[key];
    if (typeof member === 'object' && member !== null && Object.hasOwn(record, key)) {
      freezeObject(member);
    }
  }
}
