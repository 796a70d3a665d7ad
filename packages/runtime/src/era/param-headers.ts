/**
 * SEP-2243 parameter headers of the 2026-07-28 era over HTTP: a tool's `inputSchema` may mark
 * top-level properties with `"x-mcp-header": "Name"`, and a client mirrors each such argument of a
 * `tools/call` into an `Mcp-Param-Name` header. A tool whose annotations are invalid (an empty or
 * non-token name, a name used twice ignoring case, a property that is not a string, integer or
 * boolean) must not be called: {@link paramHeadersOf} says why, and the transport leaves it out of
 * the listing.
 */

/** A header value as is when it is safe visible ASCII, else `=?base64?<utf-8 base64>?=`. */
export function headerValue(value: string): string {
  return /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value)
    ? value
    : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

/** An RFC 9110 token: the characters a header name may have. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PRIMITIVE = new Set(['string', 'integer', 'boolean']);
/** At most this many annotated properties per tool (a bound on headers per request). */
const MAX_PARAM_HEADERS = 32;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The annotated properties of a tool (property → header name), or why the tool is refused. */
export type ParamHeaders =
  | { readonly ok: true; readonly headers: ReadonlyMap<string, string> }
  | { readonly ok: false; readonly reason: string };

/** Reads the `x-mcp-header` annotations of one tool's `inputSchema`. */
export function paramHeadersOf(inputSchema: unknown): ParamHeaders {
  const properties = isRecord(inputSchema) ? inputSchema['properties'] : undefined;
  const headers = new Map<string, string>();
  if (!isRecord(properties)) return { ok: true, headers };
  const seen = new Set<string>();
  for (const [property, schema] of Object.entries(properties)) {
    if (!isRecord(schema) || !('x-mcp-header' in schema)) continue;
    const name = schema['x-mcp-header'];
    const at = `property "${property.slice(0, 64)}"`;
    if (typeof name !== 'string' || name === '') {
      return { ok: false, reason: `${at} has an empty or non-string x-mcp-header` };
    }
    if (!TOKEN.test(name)) {
      return {
        ok: false,
        reason: `${at} has x-mcp-header ${JSON.stringify(name.slice(0, 64))}, not a header token`,
      };
    }
    if (typeof schema['type'] !== 'string' || !PRIMITIVE.has(schema['type'])) {
      return {
        ok: false,
        reason: `${at} has x-mcp-header but is not a string, integer or boolean`,
      };
    }
    if (seen.has(name.toLowerCase())) {
      return { ok: false, reason: `x-mcp-header "${name}" is used twice (names ignore case)` };
    }
    if (seen.size >= MAX_PARAM_HEADERS) {
      return { ok: false, reason: `more than ${MAX_PARAM_HEADERS} x-mcp-header parameters` };
    }
    seen.add(name.toLowerCase());
    headers.set(property, name);
  }
  return { ok: true, headers };
}

/**
 * The `Mcp-Param-*` headers of one `tools/call`: each annotated argument that is present and not
 * null; integers in decimal, booleans as `true`/`false`, strings as is unless they need Base64.
 */
export function paramHeaderValues(
  annotated: ReadonlyMap<string, string>,
  args: unknown,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isRecord(args)) return out;
  for (const [property, name] of annotated) {
    const value = args[property];
    if (value === undefined || value === null) continue;
    const text =
      typeof value === 'string'
        ? value === ''
          ? ''
          : headerValue(value)
        : typeof value === 'number' || typeof value === 'boolean'
          ? String(value)
          : undefined;
    if (text !== undefined) out[`mcp-param-${name.toLowerCase()}`] = text;
  }
  return out;
}
