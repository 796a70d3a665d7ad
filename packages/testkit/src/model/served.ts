/**
 * Served catalogs as the model writes them: pages of tools, a tool being its name or
 * `name~variant` (the same name with another definition).
 *
 * @packageDocumentation
 */

/**
 * The pages a server serves: tools per page, in order. Content equality is page equality. A tool is
 * its name, or `name~variant` for the same name with another definition (another description).
 */
export type ServedPages = readonly (readonly string[])[];

/** The model-facing tool name of a served tool (`beta~1` is tool `beta`). */
export const toolNameOf = (tool: string): string => tool.split('~')[0] ?? tool;

/** True when two catalogs are the same pages of the same tools. */
export const samePages = (a: ServedPages, b: ServedPages): boolean =>
  JSON.stringify(a) === JSON.stringify(b);

/** The model-facing tool names of a catalog, in order. */
export const flat = (pages: ServedPages): string[] => pages.flat().map(toolNameOf);

/** The definition of tool `name` in `pages`, or `undefined` when it is not there. */
export const definitionOf = (pages: ServedPages, name: string): string | undefined =>
  pages.flat().find((t) => toolNameOf(t) === name);
