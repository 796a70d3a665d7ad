/**
 * Validation of MCP tool definitions. All failures are typed {@link CatalogError}s; a catalog is
 * validated whole, and nothing partial is ever returned.
 *
 * @packageDocumentation
 */
import { sha256Hex } from './canonical.js';
import { canonicalJson as canonicalText, keyPrefix, lastCanonicalDepth, sortKeys } from './canonical.js';
import { CatalogError, ErrorCode } from './errors.js';
import { sanitizeNamePart } from './names.js';
import {
  DEFAULT_SCHEMA_DIALECTS,
  SchemaValidatorCache,
  dialectOf,
  toPointer,
  type SchemaDialect,
  type SchemaProblem,
  type UnenforcedSchemaPattern,
} from './schema.js';

/** The pattern every raw MCP tool name must match. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Deepest JSON nesting (objects and arrays) a schema may have. Real schemas stay far below it;
 * validators recurse per level, so a hostile schema of a few hundred levels would otherwise
 * overflow the stack long before it reaches the byte budget.
 */
export const MAX_SCHEMA_DEPTH = 128;

/** Default per-schema budget: 64 KiB of canonical JSON. */
export const DEFAULT_MAX_SCHEMA_BYTES = 65_536;

/** A JSON object schema, as MCP requires for `inputSchema` and `outputSchema`. */
export interface ObjectSchema {
  readonly type: 'object';
  readonly properties?: Readonly<Record<string, unknown>>;
  readonly required?: readonly string[];
  readonly [keyword: string]: unknown;
}

/** The untrusted behaviour hints an MCP server may attach to a tool. */
export interface ToolAnnotations {
  readonly title?: string;
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
  readonly [key: string]: unknown;
}

/** An MCP tool definition that passed validation. Unknown members are kept as served. */
export interface McpToolDefinition {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: ObjectSchema;
  readonly outputSchema?: ObjectSchema;
  readonly annotations?: ToolAnnotations;
  readonly [key: string]: unknown;
}

/** Options for {@link validateTool} and {@link validateCatalog}. */
export interface ValidationOptions {
  /** Configured server name, quoted in every error. */
  readonly server: string;
  /** Per-schema budget in bytes of canonical JSON (UTF-8). @default 65536 */
  readonly maxSchemaBytes?: number;
  /** Dialects a `$schema` may name; an absent `$schema` means 2020-12. @default ['2020-12', 'draft-07'] */
  readonly allowedDialects?: readonly SchemaDialect[];
  /**
   * `'lazy'` proves at validation time that every schema compiles (structural walk, meta-schema,
   * and an eager compile for the few features only Ajv can resolve) and compiles on first call;
   * `'eager'` compiles every distinct schema now. @default 'lazy'
   */
  readonly compile?: 'lazy' | 'eager';
  /** Cache for checks and compiled validators; share one across refreshes. @default a new cache */
  readonly validatorCache?: SchemaValidatorCache;
  /** Page index quoted in errors, when the caller knows it. */
  readonly pageIndex?: number;
}

/** A checked schema: its digest, dialect and size. */
export interface CheckedSchema {
  readonly schema: ObjectSchema;
  /** `sha256:` digest of the canonical JSON. */
  readonly digest: string;
  readonly dialect: SchemaDialect;
  /** Canonical JSON length in UTF-8 bytes. */
  readonly bytes: number;
}

/**
 * A schema pattern (`pattern`, a `patternProperties` key, a `propertyNames` pattern) that stepbind
 * does not enforce because it has no linear-time (RE2) equivalent: backreferences, lookaround,
 * some Unicode properties, counted repetitions over 1000, or a pattern too large. Validation
 * treats it as matching every string; the server is expected to enforce it itself.
 */
export interface UnenforcedPattern {
  /**
   * JSON pointer into the tool definition: to the `pattern` keyword
   * (`/inputSchema/properties/id/pattern`) or to the `patternProperties` key.
   */
  readonly pointer: string;
  /** The pattern as served. */
  readonly pattern: string;
  /** Why RE2 cannot run it. */
  readonly reason: string;
}

/** A tool that passed validation, with its checked schemas. */
export interface ValidatedTool {
  readonly raw: McpToolDefinition;
  readonly name: string;
  readonly inputSchema: CheckedSchema;
  readonly outputSchema: CheckedSchema | undefined;
  /** Patterns of either schema that stepbind does not enforce; usually empty. */
  readonly unenforcedPatterns: readonly UnenforcedPattern[];
}

/** @internal A validated tool plus the canonical JSON of its schemas, for digest composition. */
export interface ValidatedToolInternal extends ValidatedTool {
  readonly inputCanonical: string;
  readonly outputCanonical: string | undefined;
}

interface Resolved {
  readonly server: string;
  readonly maxSchemaBytes: number;
  readonly allowed: readonly SchemaDialect[];
  readonly compile: 'lazy' | 'eager';
  readonly cache: SchemaValidatorCache;
  readonly pageIndex: number | undefined;
}

/** @internal */
export function resolveValidationOptions(options: ValidationOptions): Resolved {
  const maxSchemaBytes = options.maxSchemaBytes ?? DEFAULT_MAX_SCHEMA_BYTES;
  if (!Number.isInteger(maxSchemaBytes) || maxSchemaBytes <= 0) {
    throw new CatalogError(
      ErrorCode.INVALID_OPTIONS,
      `maxSchemaBytes must be a positive integer, got ${String(maxSchemaBytes)}`,
      { detail: { server: options.server, option: 'maxSchemaBytes' } },
    );
  }
  return {
    server: options.server,
    maxSchemaBytes,
    allowed: options.allowedDialects ?? DEFAULT_SCHEMA_DIALECTS,
    compile: options.compile ?? 'lazy',
    cache: options.validatorCache ?? new SchemaValidatorCache(),
    pageIndex: options.pageIndex,
  };
}

/**
 * Validate one raw MCP tool definition.
 *
 * @throws CatalogError `INVALID_TOOL` (not an object, name not a string, no `inputSchema`, not
 *   representable as JSON), `INVALID_TOOL_NAME`, `INVALID_INPUT_SCHEMA`, `INVALID_OUTPUT_SCHEMA`,
 *   `UNKNOWN_SCHEMA_DIALECT`, `REMOTE_REF`, `UNRESOLVED_REF`, `SCHEMA_TOO_LARGE`, `SCHEMA_INVALID`.
 *   `detail` carries `server`, `tool`, `path` (a JSON pointer into the tool definition) and, when
 *   known, `pageIndex` and `toolIndex`.
 */
export function validateTool(raw: unknown, options: ValidationOptions): ValidatedTool {
  return checkTool(raw, resolveValidationOptions(options), undefined);
}

/**
 * Validate a whole catalog: every tool, then that names are unique. All or nothing: the first
 * failure is thrown and nothing is returned.
 *
 * @throws CatalogError any code of {@link validateTool}, or `DUPLICATE_TOOL_NAME`.
 */
export function validateCatalog(
  tools: readonly unknown[],
  options: ValidationOptions,
): readonly ValidatedTool[] {
  const resolved = resolveValidationOptions(options);
  const seen = new Map<string, number>();
  const out: ValidatedTool[] = [];
  for (let i = 0; i < tools.length; i++) {
    const tool = checkTool(tools[i], resolved, i);
    checkUnique(seen, tool.name, i, resolved);
    out.push(tool);
  }
  return Object.freeze(out);
}

/** @internal Throw `DUPLICATE_TOOL_NAME` when `name` was seen before. */
export function checkUnique(
  seen: Map<string, number>,
  name: string,
  index: number,
  o: Pick<Resolved, 'server' | 'pageIndex'>,
): void {
  const first = seen.get(name);
  if (first !== undefined) throw duplicateError(name, first, index, o);
  seen.set(name, index);
}

function duplicateError(
  name: string,
  first: number,
  index: number,
  o: Pick<Resolved, 'server' | 'pageIndex'>,
): CatalogError {
  return new CatalogError(
    ErrorCode.DUPLICATE_TOOL_NAME,
    `Server "${o.server}" lists tool "${name}" twice (tools #${first} and #${index}). ` +
      `Fix the tool definitions on server "${o.server}" so every tool name is unique.`,
    { detail: withPage({ server: o.server, tool: name, firstIndex: first, index }, o.pageIndex) },
  );
}

/** @internal */
export function checkTool(
  raw: unknown,
  o: Resolved,
  toolIndex: number | undefined,
): ValidatedToolInternal {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    const where = toolIndex === undefined ? 'a tool' : `tool #${toolIndex}`;
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Server "${o.server}" sent ${where} that is not a JSON object. Fix the tool definition on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, undefined, '') },
    );
  }
  const tool = raw as Record<string, unknown>;
  if (typeof tool.name !== 'string') {
    const where = toolIndex === undefined ? 'a tool' : `tool #${toolIndex}`;
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Server "${o.server}" sent ${where} whose "name" is not a string. Fix the tool definition on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, undefined, '/name') },
    );
  }
  const name = tool.name;
  if (!TOOL_NAME_PATTERN.test(name)) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL_NAME,
      `Server "${o.server}" sent a tool named ${JSON.stringify(name)}, which does not match ` +
        `${String(TOOL_NAME_PATTERN)}. Rename the tool on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, name, '/name') },
    );
  }
  if (tool.inputSchema === undefined) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Tool "${name}" on server "${o.server}" has no inputSchema. Fix the tool definition on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, name, '/inputSchema') },
    );
  }
  const input = checkSchema(tool.inputSchema, 'inputSchema', name, o, toolIndex);
  const output =
    tool.outputSchema === undefined
      ? undefined
      : checkSchema(tool.outputSchema, 'outputSchema', name, o, toolIndex);
  return {
    raw: tool as McpToolDefinition,
    name,
    inputSchema: input,
    outputSchema: output,
    unenforcedPatterns: unenforcedOf(o.cache, input.digest, output?.digest),
    inputCanonical: input.canonical,
    outputCanonical: output?.canonical,
  };
}

const NO_UNENFORCED: readonly UnenforcedPattern[] = Object.freeze([]);

/** @internal The unenforced patterns of a tool's checked schemas, as pointers into the tool. */
export function unenforcedOf(
  cache: SchemaValidatorCache,
  inputDigest: string,
  outputDigest: string | undefined,
): readonly UnenforcedPattern[] {
  const input = cache.unenforcedPatterns(inputDigest);
  const output: readonly UnenforcedSchemaPattern[] =
    outputDigest === undefined ? [] : cache.unenforcedPatterns(outputDigest);
  if (input.length === 0 && output.length === 0) return NO_UNENFORCED;
  const out: UnenforcedPattern[] = [];
  const add = (field: string, list: readonly UnenforcedSchemaPattern[]): void => {
    for (const p of list) {
      out.push(
        Object.freeze({
          pointer: `/${field}${toPointer(p.path)}`,
          pattern: p.pattern,
          reason: p.reason,
        }),
      );
    }
  };
  add('inputSchema', input);
  add('outputSchema', output);
  return Object.freeze(out);
}

/** The error detail of a tool check; built only when something is thrown. */
function detailOf(
  o: Resolved,
  toolIndex: number | undefined,
  tool: string | undefined,
  path: string,
): Record<string, unknown> {
  return withPage(
    {
      server: o.server,
      ...(tool === undefined ? {} : { tool }),
      path,
      ...(toolIndex === undefined ? {} : { toolIndex }),
    },
    o.pageIndex,
  );
}

/** A checked schema that also carries its canonical text (not enumerable: never serialised). */
class Checked implements CheckedSchema {
  readonly schema: ObjectSchema;
  readonly digest: string;
  readonly dialect: SchemaDialect;
  readonly bytes: number;
  readonly #canonical: string;

  constructor(
    schema: ObjectSchema,
    digest: string,
    dialect: SchemaDialect,
    bytes: number,
    canonical: string,
  ) {
    this.schema = schema;
    this.digest = digest;
    this.dialect = dialect;
    this.bytes = bytes;
    this.#canonical = canonical;
  }

  get canonical(): string {
    return this.#canonical;
  }
}

function checkSchema(
  schema: unknown,
  field: 'inputSchema' | 'outputSchema',
  tool: string,
  o: Resolved,
  toolIndex: number | undefined,
): Checked {
  if (
    typeof schema !== 'object' ||
    schema === null ||
    Array.isArray(schema) ||
    (schema as Record<string, unknown>).type !== 'object'
  ) {
    throw new CatalogError(
      field === 'inputSchema' ? ErrorCode.INVALID_INPUT_SCHEMA : ErrorCode.INVALID_OUTPUT_SCHEMA,
      `Tool "${tool}" on server "${o.server}" has an ${field} that is not an object schema ` +
        `(a JSON object with "type": "object"). ${fixOf(o)}`,
      { detail: detailOf(o, toolIndex, tool, `/${field}`) },
    );
  }
  const s = schema as Record<string, unknown>;
  const dialect = dialectOf(s.$schema);
  if (dialect === undefined || !o.allowed.includes(dialect)) {
    throw new CatalogError(
      ErrorCode.UNKNOWN_SCHEMA_DIALECT,
      `Tool "${tool}" on server "${o.server}" declares "$schema": ${JSON.stringify(s.$schema) ?? 'undefined'}, ` +
        `which is not an allowed dialect (${o.allowed.join(', ')}). ${fixOf(o)}`,
      { detail: { ...detailOf(o, toolIndex, tool, `/${field}/$schema`), dialect: s.$schema } },
    );
  }
  let canonical: string;
  try {
    canonical = canonicalText(s);
  } catch (error) {
    if (error instanceof RangeError) {
      throw new CatalogError(
        ErrorCode.SCHEMA_TOO_LARGE,
        `Tool "${tool}" on server "${o.server}" has an ${field} nested more than ${MAX_SCHEMA_DEPTH} ` +
          `levels deep. Flatten the schema on server "${o.server}" (use $defs and $ref).`,
        {
          detail: { ...detailOf(o, toolIndex, tool, `/${field}`), limit: MAX_SCHEMA_DEPTH },
          cause: error,
        },
      );
    }
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Tool "${tool}" on server "${o.server}" has an ${field} that is not plain JSON. ${fixOf(o)}`,
      { detail: detailOf(o, toolIndex, tool, `/${field}`), cause: error },
    );
  }
  const depth = lastCanonicalDepth();
  if (depth > MAX_SCHEMA_DEPTH) {
    throw new CatalogError(
      ErrorCode.SCHEMA_TOO_LARGE,
      `Tool "${tool}" on server "${o.server}" has an ${field} nested ${depth} levels deep, over the ` +
        `limit of ${MAX_SCHEMA_DEPTH}. Flatten the schema on server "${o.server}" (use $defs and $ref).`,
      { detail: { ...detailOf(o, toolIndex, tool, `/${field}`), depth, limit: MAX_SCHEMA_DEPTH } },
    );
  }
  const bytes = Buffer.byteLength(canonical, 'utf8');
  if (bytes > o.maxSchemaBytes) {
    throw new CatalogError(
      ErrorCode.SCHEMA_TOO_LARGE,
      `Tool "${tool}" on server "${o.server}" has an ${field} of ${bytes} bytes, over the ` +
        `${o.maxSchemaBytes}-byte budget. Shrink the schema on server "${o.server}" or raise maxSchemaBytes.`,
      { detail: { ...detailOf(o, toolIndex, tool, `/${field}`), bytes, limit: o.maxSchemaBytes } },
    );
  }
  const digest = `sha256:${sha256Hex(canonical)}`;
  const problem = o.cache.check(s, digest, dialect, o.compile);
  if (problem !== undefined) throw schemaProblemError(problem, field, tool, o, toolIndex);
  return new Checked(s as ObjectSchema, digest, dialect, bytes, canonical);
}

function schemaProblemError(
  problem: SchemaProblem,
  field: 'inputSchema' | 'outputSchema',
  tool: string,
  o: Resolved,
  toolIndex: number | undefined,
): CatalogError {
  const path = `/${field}${toPointer(problem.path)}`;
  return new CatalogError(
    ErrorCode[problem.code],
    `Tool "${tool}" on server "${o.server}": ${field} at ${path || '/'} ${problem.message}. ${fixOf(o)}`,
    {
      detail: {
        ...detailOf(o, toolIndex, tool, path),
        ...(problem.ref === undefined ? {} : { ref: problem.ref }),
      },
      cause: problem.cause,
    },
  );
}

function fixOf(o: Resolved): string {
  return `Fix the tool definition on server "${o.server}".`;
}

function withPage(
  detail: Record<string, unknown>,
  pageIndex: number | undefined,
): Record<string, unknown> {
  return pageIndex === undefined ? detail : { ...detail, pageIndex };
}

// ---------------------------------------------------------------------------------------------
// Snapshot hot path

/**
 * @internal The names of a catalog, indexed for the duplicate check, for `toolsByName` and for
 * model names in one map. Keys are sanitised names (what model names are built from); a raw name
 * whose sanitised form is taken by another raw name is kept in a second, usually empty, map.
 */
export class ToolNameIndex {
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
   * `DUPLICATE_TOOL_NAME` exactly like {@link checkUnique}.
   */
  add(name: string, o: Pick<Resolved, 'server' | 'pageIndex'>): void {
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

/** @internal What a snapshot keeps of a validated tool. */
export interface SnapshotTool {
  readonly raw: McpToolDefinition;
  readonly name: string;
  /** `sha256:` digest of the canonical JSON of the whole definition. */
  readonly digest: string;
  /** The canonical JSON of the whole definition (for the page digest). */
  readonly text: string;
  readonly inputSchemaDigest: string;
  readonly outputSchemaDigest: string | undefined;
  readonly unenforcedPatterns: readonly UnenforcedPattern[];
}

/**
 * @internal {@link checkTool}, the duplicate check and the descriptor's canonical text in one pass,
 * for `createCatalogSnapshot`: the canonical text of the whole definition is built once, and the
 * schema digests hash slices of it, so no schema text is materialised on its own.
 *
 * Same result and same error as `checkTool` + `names.add` + `toolCanonical`: the pure checks run
 * first (and any failure among them re-runs that exact sequence, which throws the error the
 * original order gives); the cache checks and the duplicate check then run in the original order
 * with the original error constructors.
 */
export function checkSnapshotTool(
  raw: unknown,
  o: Resolved,
  toolIndex: number,
  names: ToolNameIndex,
): SnapshotTool {
  const fast = composeTool(raw, o);
  if (fast === undefined) return checkToolInOrder(raw, o, toolIndex, names);
  const tool = fast.raw as McpToolDefinition;
  const text = fast.text;
  // Hashing the whole text first flattens it once; the schema digests then hash slices of it.
  const digest = `sha256:${sha256Hex(text)}`;
  const inputSchemaDigest = `sha256:${sha256Hex(text.slice(fast.inputStart, fast.inputEnd))}`;
  let problem = o.cache.check(fast.input, inputSchemaDigest, fast.inputDialect, o.compile);
  if (problem !== undefined)
    throw schemaProblemError(problem, 'inputSchema', tool.name, o, toolIndex);
  let outputSchemaDigest: string | undefined;
  if (fast.output !== undefined) {
    outputSchemaDigest = `sha256:${sha256Hex(text.slice(fast.outputStart, fast.outputEnd))}`;
    problem = o.cache.check(fast.output, outputSchemaDigest, fast.outputDialect, o.compile);
    if (problem !== undefined) {
      throw schemaProblemError(problem, 'outputSchema', tool.name, o, toolIndex);
    }
  }
  names.add(tool.name, o);
  return {
    raw: tool,
    name: tool.name,
    digest,
    text,
    inputSchemaDigest,
    outputSchemaDigest,
    unenforcedPatterns: unenforcedOf(o.cache, inputSchemaDigest, outputSchemaDigest),
  };
}

/** The original order: checkTool, then the duplicate check, then the descriptor's text. */
function checkToolInOrder(
  raw: unknown,
  o: Resolved,
  toolIndex: number,
  names: ToolNameIndex,
): SnapshotTool {
  const tool = checkTool(raw, o, toolIndex);
  names.add(tool.name, o);
  const text = toolCanonical(tool, o.server);
  return {
    raw: tool.raw,
    name: tool.name,
    digest: `sha256:${sha256Hex(text)}`,
    text,
    inputSchemaDigest: tool.inputSchema.digest,
    outputSchemaDigest: tool.outputSchema?.digest,
    unenforcedPatterns: tool.unenforcedPatterns,
  };
}

/**
 * @internal Canonical JSON of a validated tool, reusing the canonical text of its schemas; equal to
 * `canonicalJson(tool.raw)` (a golden test pins this).
 */
export function toolCanonical(tool: ValidatedToolInternal, server: string): string {
  const raw = tool.raw as Record<string, unknown>;
  const keys = sortKeys(Object.keys(raw));
  let out = '{';
  let first = true;
  try {
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const member = raw[key];
      if (member === undefined) continue;
      out += keyPrefix(key, !first);
      first = false;
      if (key === 'inputSchema') out += tool.inputCanonical;
      else if (key === 'outputSchema' && tool.outputCanonical !== undefined)
        out += tool.outputCanonical;
      else out += canonicalText(member);
    }
  } catch (error) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Tool "${tool.name}" on server "${server}" is not plain JSON (or is nested thousands of levels deep). Fix the tool definition on server "${server}".`,
      { detail: { server, tool: tool.name }, cause: error },
    );
  }
  return out + '}';
}

interface Composed {
  readonly raw: Record<string, unknown>;
  readonly text: string;
  readonly input: object;
  readonly inputDialect: SchemaDialect;
  readonly inputStart: number;
  readonly inputEnd: number;
  readonly output: object | undefined;
  readonly outputDialect: SchemaDialect;
  readonly outputStart: number;
  readonly outputEnd: number;
}

/**
 * Every check of {@link checkTool} that needs no cache, and the canonical text of the definition
 * with the position of each schema in it; `undefined` when any check fails or any member is not
 * plain JSON (the caller then takes the original path, which throws the right error).
 */
function composeTool(raw: unknown, o: Resolved): Composed | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const tool = raw as Record<string, unknown>;
  const name = tool.name;
  if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name)) return undefined;
  const input = tool.inputSchema;
  const inputDialect = plainSchemaDialect(input, o);
  if (inputDialect === undefined) return undefined;
  const output = tool.outputSchema;
  const outputDialect = output === undefined ? '2020-12' : plainSchemaDialect(output, o);
  if (outputDialect === undefined) return undefined;
  const keys = sortKeys(Object.keys(tool));
  let out = '{';
  let first = true;
  let inputStart = -1;
  let inputEnd = -1;
  let outputStart = -1;
  let outputEnd = -1;
  try {
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const member = key === 'inputSchema' ? input : key === 'outputSchema' ? output : tool[key];
      if (member === undefined) continue;
      out += keyPrefix(key, !first);
      first = false;
      if (key === 'inputSchema' || key === 'outputSchema') {
        const start = out.length;
        const schema = canonicalText(member);
        // Too deep: the in-order path reports it with its proper error.
        if (lastCanonicalDepth() > MAX_SCHEMA_DEPTH) return undefined;
        // The budget in UTF-8 bytes: at most 3 bytes per UTF-16 unit, so short texts need no count.
        if (schema.length * 3 > o.maxSchemaBytes && utf8Bytes(schema) > o.maxSchemaBytes) {
          return undefined;
        }
        out += schema;
        if (key === 'inputSchema') {
          inputStart = start;
          inputEnd = out.length;
        } else {
          outputStart = start;
          outputEnd = out.length;
        }
      } else {
        out += canonicalText(member);
      }
    }
  } catch {
    return undefined;
  }
  // A schema that is not an own member (inherited) is not in the text: take the original path.
  if (inputStart < 0 || (output !== undefined && outputStart < 0)) return undefined;
  return {
    raw: tool,
    text: out + '}',
    input: input as object,
    inputDialect,
    inputStart,
    inputEnd,
    output: output as object | undefined,
    outputDialect,
    outputStart,
    outputEnd,
  };
}

/** The dialect of an object schema that checkSchema's first checks accept, else `undefined`. */
function plainSchemaDialect(schema: unknown, o: Resolved): SchemaDialect | undefined {
  if (
    typeof schema !== 'object' ||
    schema === null ||
    Array.isArray(schema) ||
    (schema as Record<string, unknown>).type !== 'object'
  ) {
    return undefined;
  }
  const dialect = dialectOf((schema as Record<string, unknown>).$schema);
  return dialect !== undefined && o.allowed.includes(dialect) ? dialect : undefined;
}

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
