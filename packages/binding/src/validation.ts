/**
 * Validation of MCP tool definitions. All failures are typed {@link CatalogError}s; a catalog is
 * validated whole, and nothing partial is ever returned.
 *
 * @packageDocumentation
 */
import { sha256Hex } from './canonical.js';
import { canonicalText } from './fastcanonical.js';
import { CatalogError, ErrorCode } from './errors.js';
import {
  DEFAULT_SCHEMA_DIALECTS,
  SchemaValidatorCache,
  dialectOf,
  toPointer,
  type SchemaDialect,
} from './schema.js';

/** The pattern every raw MCP tool name must match. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

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

/** A tool that passed validation, with its checked schemas. */
export interface ValidatedTool {
  readonly raw: McpToolDefinition;
  readonly name: string;
  readonly inputSchema: CheckedSchema;
  readonly outputSchema: CheckedSchema | undefined;
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
  if (first !== undefined) {
    throw new CatalogError(
      ErrorCode.DUPLICATE_TOOL_NAME,
      `Server "${o.server}" lists tool "${name}" twice (tools #${first} and #${index}). ` +
        `Fix the tool definitions on server "${o.server}" so every tool name is unique.`,
      { detail: withPage({ server: o.server, tool: name, firstIndex: first, index }, o.pageIndex) },
    );
  }
  seen.set(name, index);
}

/** @internal */
export function checkTool(
  raw: unknown,
  o: Resolved,
  toolIndex: number | undefined,
): ValidatedToolInternal {
  const where = toolIndex === undefined ? 'a tool' : `tool #${toolIndex}`;
  const base = (tool: string | undefined, path: string): Record<string, unknown> =>
    withPage(
      {
        server: o.server,
        ...(tool === undefined ? {} : { tool }),
        path,
        ...(toolIndex === undefined ? {} : { toolIndex }),
      },
      o.pageIndex,
    );
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Server "${o.server}" sent ${where} that is not a JSON object. Fix the tool definition on server "${o.server}".`,
      { detail: base(undefined, '') },
    );
  }
  const tool = raw as Record<string, unknown>;
  if (typeof tool.name !== 'string') {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Server "${o.server}" sent ${where} whose "name" is not a string. Fix the tool definition on server "${o.server}".`,
      { detail: base(undefined, '/name') },
    );
  }
  const name = tool.name;
  if (!TOOL_NAME_PATTERN.test(name)) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL_NAME,
      `Server "${o.server}" sent a tool named ${JSON.stringify(name)}, which does not match ` +
        `${String(TOOL_NAME_PATTERN)}. Rename the tool on server "${o.server}".`,
      { detail: base(name, '/name') },
    );
  }
  if (tool.inputSchema === undefined) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Tool "${name}" on server "${o.server}" has no inputSchema. Fix the tool definition on server "${o.server}".`,
      { detail: base(name, '/inputSchema') },
    );
  }
  const input = checkSchema(tool.inputSchema, 'inputSchema', name, o, base);
  const output =
    tool.outputSchema === undefined
      ? undefined
      : checkSchema(tool.outputSchema, 'outputSchema', name, o, base);
  return {
    raw: tool as McpToolDefinition,
    name,
    inputSchema: input.checked,
    outputSchema: output?.checked,
    inputCanonical: input.canonical,
    outputCanonical: output?.canonical,
  };
}

function checkSchema(
  schema: unknown,
  field: 'inputSchema' | 'outputSchema',
  tool: string,
  o: Resolved,
  base: (tool: string | undefined, path: string) => Record<string, unknown>,
): { checked: CheckedSchema; canonical: string } {
  const fix = `Fix the tool definition on server "${o.server}".`;
  if (
    typeof schema !== 'object' ||
    schema === null ||
    Array.isArray(schema) ||
    (schema as Record<string, unknown>).type !== 'object'
  ) {
    throw new CatalogError(
      field === 'inputSchema' ? ErrorCode.INVALID_INPUT_SCHEMA : ErrorCode.INVALID_OUTPUT_SCHEMA,
      `Tool "${tool}" on server "${o.server}" has an ${field} that is not an object schema ` +
        `(a JSON object with "type": "object"). ${fix}`,
      { detail: base(tool, `/${field}`) },
    );
  }
  const s = schema as Record<string, unknown>;
  const dialect = dialectOf(s.$schema);
  if (dialect === undefined || !o.allowed.includes(dialect)) {
    throw new CatalogError(
      ErrorCode.UNKNOWN_SCHEMA_DIALECT,
      `Tool "${tool}" on server "${o.server}" declares "$schema": ${JSON.stringify(s.$schema) ?? 'undefined'}, ` +
        `which is not an allowed dialect (${o.allowed.join(', ')}). ${fix}`,
      { detail: { ...base(tool, `/${field}/$schema`), dialect: s.$schema } },
    );
  }
  let canonical: string;
  try {
    canonical = canonicalText(s);
  } catch (error) {
    throw new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Tool "${tool}" on server "${o.server}" has an ${field} that is not plain JSON. ${fix}`,
      { detail: base(tool, `/${field}`), cause: error },
    );
  }
  const bytes = utf8Length(canonical);
  if (bytes > o.maxSchemaBytes) {
    throw new CatalogError(
      ErrorCode.SCHEMA_TOO_LARGE,
      `Tool "${tool}" on server "${o.server}" has an ${field} of ${bytes} bytes, over the ` +
        `${o.maxSchemaBytes}-byte budget. Shrink the schema on server "${o.server}" or raise maxSchemaBytes.`,
      { detail: { ...base(tool, `/${field}`), bytes, limit: o.maxSchemaBytes } },
    );
  }
  const digest = `sha256:${sha256Hex(canonical)}`;
  const problem = o.cache.check(s, digest, dialect, o.compile);
  if (problem !== undefined) {
    const path = `/${field}${toPointer(problem.path)}`;
    throw new CatalogError(
      ErrorCode[problem.code],
      `Tool "${tool}" on server "${o.server}": ${field} at ${path || '/'} ${problem.message}. ${fix}`,
      {
        detail: { ...base(tool, path), ...(problem.ref === undefined ? {} : { ref: problem.ref }) },
        cause: problem.cause,
      },
    );
  }
  return { checked: { schema: s as ObjectSchema, digest, dialect, bytes }, canonical };
}

function withPage(
  detail: Record<string, unknown>,
  pageIndex: number | undefined,
): Record<string, unknown> {
  return pageIndex === undefined ? detail : { ...detail, pageIndex };
}

/** UTF-8 byte length without allocating a buffer for ASCII-only text. */
function utf8Length(text: string): number {
  // eslint-disable-next-line no-control-regex
  return /^[\x00-\x7f]*$/.test(text) ? text.length : Buffer.byteLength(text, 'utf8');
}
