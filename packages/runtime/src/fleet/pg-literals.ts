/**
 * Values as SQL literals of the simple protocol, for the statements a group of the fleet store's
 * group commit sends in one string (`pg-group.ts`, DESIGN §21.6). `fleet/literals.pg.test.ts`
 * sends generated strings and numbers through a real PostgreSQL and gets each back exactly.
 */

/**
 * `text` with its `$n` parameters replaced by SQL literals, or undefined when a value cannot be
 * one (a NUL character, which the simple protocol cannot carry, or a value of another type).
 */
export function inlined(text: string, values: readonly unknown[]): string | undefined {
  const literals: string[] = [];
  for (const value of values) {
    const literal = sqlLiteral(value);
    if (literal === undefined) return undefined;
    literals.push(literal);
  }
  const { texts, params } = templateOf(text);
  let out = texts[0]!;
  for (let i = 0; i < params.length; i++) out += (literals[params[i]!] ?? 'NULL') + texts[i + 1]!;
  return out;
}

/** A statement's text split at its `$n` parameters: `texts` around them, `params` their 0-based indexes. */
interface Template {
  readonly texts: readonly string[];
  readonly params: readonly number[];
}

/** The templates of the statements seen (the store's are a few constants); bounded. */
const templates = new Map<string, Template>();
const MAX_TEMPLATES = 64;

/** `text` split as `text.replace(/\$(\d+)/g, …)` would match it, cached. */
function templateOf(text: string): Template {
  let template = templates.get(text);
  if (template === undefined) {
    const pieces = text.split(/\$(\d+)/);
    template = {
      texts: pieces.filter((_, i) => i % 2 === 0),
      params: pieces.filter((_, i) => i % 2 === 1).map((n) => Number(n) - 1),
    };
    if (templates.size < MAX_TEMPLATES) templates.set(text, template);
  }
  return template;
}

/**
 * `value` as an SQL literal of the simple protocol, or undefined when it cannot be one. A number
 * is parenthesized, so that a negative one after a `-` never opens a `--` comment.
 */
export function sqlLiteral(value: unknown): string | undefined {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number') return Number.isFinite(value) ? `(${String(value)})` : undefined;
  if (typeof value !== 'string' || value.includes('\u0000')) return undefined;
  // As pg's escapeLiteral: quotes doubled; with a backslash, an E'' string with it doubled.
  const escaped = value.replace(/'/g, "''");
  return value.includes('\\') ? ` E'${escaped.replace(/\\/g, '\\\\')}'` : `'${escaped}'`;
}
