/**
 * Names near a mistyped one: the did-you-mean of option checks, of the command line and of
 * `UNKNOWN_TOOL` (DESIGN §17.5).
 *
 * @packageDocumentation
 */

/** The largest edit distance at which a name still counts as near another. */
export const NEAR_DISTANCE = 2;

/**
 * Levenshtein distance of `a` and `b`, or `limit + 1` as soon as it is known to exceed `limit`
 * (names longer than 256 characters are never near anything), so a long list costs little.
 */
export function editDistance(a: string, b: string, limit = NEAR_DISTANCE): number {
  if (Math.abs(a.length - b.length) > limit || a.length > 256 || b.length > 256) return limit + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const value = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      current[j] = value;
      if (value < best) best = value;
    }
    if (best > limit) return limit + 1;
    previous = current;
  }
  return Math.min(previous[b.length] ?? 0, limit + 1);
}

/** The name of `known` nearest to `name` (case-insensitive, within {@link NEAR_DISTANCE}), if any. */
export function nearestName(name: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = NEAR_DISTANCE + 1;
  for (const candidate of known) {
    const d = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** The most model names an `UNKNOWN_TOOL` detail lists in `matches`. */
export const MAX_TOOL_MATCHES = 10;

/**
 * The model names of `tools` a developer may have meant by `asked`: those whose tool part (the
 * server's own name for it) or whole model name is `asked` or within {@link NEAR_DISTANCE} of it,
 * nearest first, at most {@link MAX_TOOL_MATCHES}. `read_text_file` finds `files__read_text_file`.
 */
export function toolNameMatches(
  asked: string,
  tools: Iterable<{ readonly modelName: string; readonly tool: string }>,
): readonly string[] {
  const found: { readonly name: string; readonly distance: number }[] = [];
  for (const { modelName, tool } of tools) {
    if (modelName === asked) continue;
    const distance = Math.min(editDistance(asked, tool), editDistance(asked, modelName));
    if (distance <= NEAR_DISTANCE) found.push({ name: modelName, distance });
  }
  return found
    .sort((x, y) => x.distance - y.distance)
    .slice(0, MAX_TOOL_MATCHES)
    .map((m) => m.name);
}
