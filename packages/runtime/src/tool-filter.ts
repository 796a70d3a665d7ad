/** Per-server tool selection from the configuration: `tools: { allow, deny }` globs. */
export interface ToolFilterConfig {
  /** When given, only tools matching at least one of these globs are kept. */
  readonly allow?: readonly string[];
  /** Tools matching any of these globs are dropped (deny wins over allow). */
  readonly deny?: readonly string[];
}

/**
 * Whether `name` matches `glob`, where `*` matches any run of characters (also empty) and `?` any one
 * character; everything else is literal. Iterative, O(name × glob) at worst: no backtracking blow-up.
 */
export function globMatch(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    const c = glob[g];
    if (c === '?' || (c !== undefined && c !== '*' && c === name[n])) {
      g++;
      n++;
    } else if (c === '*') {
      star = g++;
      resume = n;
    } else if (star >= 0) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (glob[g] === '*') g++;
  return g === glob.length;
}

/** The predicate a server's `tools` filter defines, or `undefined` when it keeps every tool. */
export function toolFilterOf(
  filter: ToolFilterConfig | undefined,
): ((name: string) => boolean) | undefined {
  if (filter === undefined || (filter.allow === undefined && filter.deny === undefined)) {
    return undefined;
  }
  const { allow, deny = [] } = filter;
  return (name) =>
    (allow === undefined || allow.some((glob) => globMatch(glob, name))) &&
    !deny.some((glob) => globMatch(glob, name));
}
