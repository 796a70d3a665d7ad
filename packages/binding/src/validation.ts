/**
 * Validation of MCP tool definitions. All failures are typed {@link CatalogError}s; a catalog is
 * validated whole, and nothing partial is ever returned.
 *
 * @packageDocumentation
 */
import { sha256Hex } from './canonical.js';
import { canonicalJson, keyPrefix, lastCanonicalDepth, sortKeys } from './canonical.js';
import { CatalogError, ErrorCode } from './errors.js';
import {
  SchemaValidatorCache,
  type SchemaProblem,
  type UnenforcedSchemaPattern,
} from './schema/cache.js';
import { DEFAULT_SCHEMA_DIALECTS, dialectOf, type SchemaDialect } from './schema/dialects.js';
import { toPointer } from './schema/pointer.js';

/** The longest raw MCP tool name (UTF-16 code units), checked before any configured filter. */
export const MAX_TOOL_NAME_LENGTH = 128;

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

interface Resolved {
  readonly server: string;
  readonly maxSchemaBytes: number;
  readonly allowed: readonly SchemaDialect[];
  readonly compile: 'lazy' | 'eager';
  readonly cache: SchemaValidatorCache;
  readonly pageIndex: number | undefined;
}

/** @internal Validation options with every default applied. */
export type ResolvedValidationOptions = Resolved;

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
  return validatedOf(checkTool(raw, resolveValidationOptions(options), undefined, undefined));
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
  const names = new UniqueNames();
  const out: ValidatedTool[] = [];
  for (let i = 0; i < tools.length; i++)
    out.push(validatedOf(checkTool(tools[i], resolved, i, names)));
  return Object.freeze(out);
}

/**
 * @internal Where {@link checkTool} records the names of a catalog: `add` throws
 * {@link duplicateError} when the name was added before.
 */
export interface ToolNames {
  add(name: string, o: Pick<Resolved, 'server' | 'pageIndex'>): void;
}

/** The names of one catalog, for {@link validateCatalog}. */
class UniqueNames implements ToolNames {
  readonly #seen = new Map<string, number>();

  add(name: string, o: Pick<Resolved, 'server' | 'pageIndex'>): void {
    const index = this.#seen.size;
    const first = this.#seen.get(name);
    if (first !== undefined) throw duplicateError(name, first, index, o);
    this.#seen.set(name, index);
  }
}

/** @internal The `DUPLICATE_TOOL_NAME` error: tool #`index` repeats the name of tool #`first`. */
export function duplicateError(
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

/** @internal A tool that passed {@link checkTool}: what the snapshot keeps of it. */
export interface CheckedTool {
  readonly raw: McpToolDefinition;
  readonly name: string;
  /** The canonical JSON of the whole definition (for the page digest). */
  readonly text: string;
  /** `sha256:` digest of {@link text}. */
  readonly digest: string;
  readonly input: SchemaText;
  readonly output: SchemaText | undefined;
  readonly unenforcedPatterns: readonly UnenforcedPattern[];
}

/** @internal One checked schema of a {@link CheckedTool}. */
export interface SchemaText {
  readonly schema: ObjectSchema;
  /** Its canonical JSON (a slice of the tool's text when the schema is an own member). */
  readonly text: string;
  readonly digest: string;
  readonly dialect: SchemaDialect;
}

/**
 * @internal The one tool check (DESIGN §4), for {@link validateTool}, {@link validateCatalog} and
 * the snapshot builder. The canonical text of the whole definition is built in one pass, and the
 * schema digests hash slices of it, so no schema text is materialised on its own. The checks run
 * in this order, and the first failure is thrown: the definition is an object with a valid
 * `name` and an `inputSchema`; the input schema's shape, dialect, depth, size and meta-schema
 * (cache); the same for the output schema; the duplicate check (`names`); every other member is
 * plain JSON.
 */
export function checkTool(
  raw: unknown,
  o: Resolved,
  toolIndex: number | undefined,
  names: ToolNames | undefined,
): CheckedTool {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    const where = toolIndex === undefined ? 'a tool' : `tool #${toolIndex}`;
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Server "${o.server}" sent ${where} that is not a JSON object. Fix the tool definition on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, undefined, '') },
    );
  }
  const tool = raw as Record<string, unknown>;
  const name = tool.name;
  if (typeof name !== 'string') {
    const where = toolIndex === undefined ? 'a tool' : `tool #${toolIndex}`;
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Server "${o.server}" sent ${where} whose "name" is not a string. Fix the tool definition on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, undefined, '/name') },
    );
  }
  if (!TOOL_NAME_PATTERN.test(name)) {
    // A name too long to be one (a hostile one can be megabytes) is clipped in message and detail.
    const clipped = name.slice(0, MAX_TOOL_NAME_LENGTH);
    const shown =
      JSON.stringify(clipped) + (clipped === name ? '' : `… (${name.length} characters)`);
    throw new CatalogError(
      ErrorCode.INVALID_TOOL_NAME,
      `Server "${o.server}" sent a tool named ${shown}, which does not match ` +
        `${String(TOOL_NAME_PATTERN)}. Rename the tool on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, clipped, '/name') },
    );
  }
  const input = tool.inputSchema;
  if (input === undefined) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Tool "${name}" on server "${o.server}" has no inputSchema. Fix the tool definition on server "${o.server}".`,
      { detail: detailOf(o, toolIndex, name, '/inputSchema') },
    );
  }
  const where: Where = { o, tool: name, toolIndex };
  const inputDialect = schemaDialect(input, 'inputSchema', where);
  const output = tool.outputSchema;
  // The output schema's failures come after every check of the input schema: kept until then.
  let outputFailure: CatalogError | undefined;
  let outputDialect: SchemaDialect = '2020-12';
  if (output !== undefined) {
    try {
      outputDialect = schemaDialect(output, 'outputSchema', where);
    } catch (error) {
      outputFailure = error as CatalogError;
    }
  }
  let memberFailure: unknown;
  const keys = sortKeys(Object.keys(tool));
  let text = '{';
  let first = true;
  let inputStart = -1;
  let inputEnd = -1;
  let outputStart = -1;
  let outputEnd = -1;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    const member = key === 'inputSchema' ? input : key === 'outputSchema' ? output : tool[key];
    if (member === undefined) continue;
    const prefix = keyPrefix(key, !first);
    if (key === 'inputSchema') {
      const schema = schemaText(member, 'inputSchema', where);
      text += prefix;
      inputStart = text.length;
      text += schema;
      inputEnd = text.length;
    } else if (key === 'outputSchema') {
      if (outputFailure !== undefined) continue;
      try {
        const schema = schemaText(member, 'outputSchema', where);
        text += prefix;
        outputStart = text.length;
        text += schema;
        outputEnd = text.length;
      } catch (error) {
        outputFailure = error as CatalogError;
        continue;
      }
    } else {
      try {
        text += prefix + canonicalJson(member);
      } catch (error) {
        memberFailure ??= { error };
        continue;
      }
    }
    first = false;
  }
  text += '}';
  // Hashing the whole text first flattens it once; the schema digests then hash slices of it.
  const digest = `sha256:${sha256Hex(text)}`;
  // A schema that is not an own member (inherited) is not in the text: encoded on its own.
  const inputText =
    inputStart < 0 ? schemaText(input, 'inputSchema', where) : text.slice(inputStart, inputEnd);
  const inputChecked = cacheCheck(input, inputText, inputDialect, 'inputSchema', where);
  let outputChecked: SchemaText | undefined;
  if (outputFailure !== undefined) throw outputFailure;
  if (output !== undefined) {
    const outputText =
      outputStart < 0
        ? schemaText(output, 'outputSchema', where)
        : text.slice(outputStart, outputEnd);
    outputChecked = cacheCheck(output, outputText, outputDialect, 'outputSchema', where);
  }
  names?.add(name, o);
  if (memberFailure !== undefined) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Tool "${name}" on server "${o.server}" is not plain JSON (or is nested thousands of levels deep). Fix the tool definition on server "${o.server}".`,
      {
        detail: { server: o.server, tool: name },
        cause: (memberFailure as { error: unknown }).error,
      },
    );
  }
  return {
    raw: tool as McpToolDefinition,
    name,
    text,
    digest,
    input: inputChecked,
    output: outputChecked,
    unenforcedPatterns: unenforcedOf(o.cache, inputChecked.digest, outputChecked?.digest),
  };
}

/** The tool a check is about, for its errors. */
interface Where {
  readonly o: Resolved;
  readonly tool: string;
  readonly toolIndex: number | undefined;
}

/** The dialect of an object schema; `INVALID_*_SCHEMA` or `UNKNOWN_SCHEMA_DIALECT` otherwise. */
function schemaDialect(
  schema: unknown,
  field: 'inputSchema' | 'outputSchema',
  { o, tool, toolIndex }: Where,
): SchemaDialect {
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
  const declared = (schema as Record<string, unknown>).$schema;
  const dialect = dialectOf(declared);
  if (dialect === undefined || !o.allowed.includes(dialect)) {
    throw new CatalogError(
      ErrorCode.UNKNOWN_SCHEMA_DIALECT,
      `Tool "${tool}" on server "${o.server}" declares "$schema": ${JSON.stringify(declared) ?? 'undefined'}, ` +
        `which is not an allowed dialect (${o.allowed.join(', ')}). ${fixOf(o)}`,
      { detail: { ...detailOf(o, toolIndex, tool, `/${field}/$schema`), dialect: declared } },
    );
  }
  return dialect;
}

/**
 * The canonical JSON of a schema within the depth and byte budgets: `INVALID_TOOL` when it is not
 * plain JSON, `SCHEMA_TOO_LARGE` when it is too deep or too large.
 */
function schemaText(
  schema: unknown,
  field: 'inputSchema' | 'outputSchema',
  { o, tool, toolIndex }: Where,
): string {
  let text: string;
  try {
    text = canonicalJson(schema);
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
  // The budget in UTF-8 bytes: at most 3 bytes per UTF-16 unit, so short texts need no count.
  if (text.length * 3 > o.maxSchemaBytes) {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > o.maxSchemaBytes) {
      throw new CatalogError(
        ErrorCode.SCHEMA_TOO_LARGE,
        `Tool "${tool}" on server "${o.server}" has an ${field} of ${bytes} bytes, over the ` +
          `${o.maxSchemaBytes}-byte budget. Shrink the schema on server "${o.server}" or raise maxSchemaBytes.`,
        {
          detail: { ...detailOf(o, toolIndex, tool, `/${field}`), bytes, limit: o.maxSchemaBytes },
        },
      );
    }
  }
  return text;
}

/** Digest the schema text and prove the schema valid (meta-schema, `$ref`s, patterns; cached). */
function cacheCheck(
  schema: unknown,
  text: string,
  dialect: SchemaDialect,
  field: 'inputSchema' | 'outputSchema',
  { o, tool, toolIndex }: Where,
): SchemaText {
  const digest = `sha256:${sha256Hex(text)}`;
  const problem = o.cache.check(schema as object, digest, dialect, o.compile);
  if (problem !== undefined) throw schemaProblemError(problem, field, tool, o, toolIndex);
  return { schema: schema as ObjectSchema, text, digest, dialect };
}

/** The public view of a checked tool. */
function validatedOf(tool: CheckedTool): ValidatedTool {
  return {
    raw: tool.raw,
    name: tool.name,
    inputSchema: checkedSchemaOf(tool.input),
    outputSchema: tool.output === undefined ? undefined : checkedSchemaOf(tool.output),
    unenforcedPatterns: tool.unenforcedPatterns,
  };
}

function checkedSchemaOf(s: SchemaText): CheckedSchema {
  return {
    schema: s.schema,
    digest: s.digest,
    dialect: s.dialect,
    bytes: Buffer.byteLength(s.text, 'utf8'),
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
