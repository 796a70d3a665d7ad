/** The annotations of a write tool (not read-only, not destructive). */
export const WRITE = Object.freeze({ readOnlyHint: false, destructiveHint: false });

/** The annotations of a read tool. */
export const READ = Object.freeze({ readOnlyHint: true });

/**
 * A fixture tool `name` taking an optional string `input`, with `annotations` when given (see
 * {@link WRITE}, {@link READ}).
 */
export function fixtureTool(
  name: string,
  annotations?: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  return {
    name,
    inputSchema: { type: 'object', properties: { input: { type: 'string' } } },
    ...(annotations === undefined ? {} : { annotations }),
  };
}
