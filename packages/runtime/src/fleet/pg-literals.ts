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
  return text.replace(/\$(\d+)/g, (_, n: string) => literals[Number(n) - 1] ?? 'NULL');
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
