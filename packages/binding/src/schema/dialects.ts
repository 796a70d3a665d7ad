/**
 * The JSON Schema dialects a tool schema may use, and how a `$schema` names them.
 *
 * @packageDocumentation
 */
/** The JSON Schema dialects stepbind can validate: 2020-12 (the MCP default) and draft-07. */
export type SchemaDialect = '2020-12' | 'draft-07';

/** Canonical `$schema` URI of each supported dialect. */
export const SCHEMA_DIALECT_URIS: Readonly<Record<SchemaDialect, string>> = Object.freeze({
  '2020-12': 'https://json-schema.org/draft/2020-12/schema',
  'draft-07': 'http://json-schema.org/draft-07/schema#',
});

/** Both supported dialects, the default allowlist. */
export const DEFAULT_SCHEMA_DIALECTS: readonly SchemaDialect[] = Object.freeze([
  '2020-12',
  'draft-07',
]);

/**
 * The dialect a `$schema` value names, or `undefined` when it names none stepbind supports.
 * An absent `$schema` (`undefined`) means 2020-12. `http`/`https` and a trailing empty fragment
 * (`#`) are accepted for both dialects.
 */
export function dialectOf(schemaUri: unknown): SchemaDialect | undefined {
  if (schemaUri === undefined) return '2020-12';
  if (typeof schemaUri !== 'string') return undefined;
  const bare = schemaUri.replace(/^https?:\/\//, '').replace(/#$/, '');
  if (bare === 'json-schema.org/draft/2020-12/schema') return '2020-12';
  if (bare === 'json-schema.org/draft-07/schema') return 'draft-07';
  return undefined;
}
