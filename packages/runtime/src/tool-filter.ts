import { MAX_TOOL_NAME_LENGTH } from '@stepbind/binding/internal';

/** Per-server tool selection from the configuration: `tools: { allow, deny }` globs. */
export interface ToolFilterConfig {
  /** When given, only tools matching at least one of these globs are kept. */
  readonly allow?: readonly string[];
  /** Tools matching any of these globs are dropped (deny wins over allow). */
  readonly deny?: readonly string[];
}

/** Counts the work of a {@link GlobMatcher}: one step per character compared or scanned. */
export interface GlobMeter {
  steps: number;
}

/** A compiled glob: whether `name` matches it. */
export type GlobMatcher = (name: string, meter?: GlobMeter) => boolean;

/**
 * One run of literal characters and `?` between two `*`s, compiled for a bit-parallel (Shift-And)
 * search: bit `i` of `masks.get(c)` is set when position `i` is `c` or `?`; `any` has the `?`s only.
 */
interface Segment {
  readonly text: string;
  readonly masks: ReadonlyMap<number, Uint32Array>;
  readonly any: Uint32Array;
}

function segmentOf(text: string): Segment {
  const any = new Uint32Array(Math.ceil(text.length / 32));
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '?') any[i >>> 5]! |= 1 << (i & 31);
  }
  const masks = new Map<number, Uint32Array>();
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '?') continue;
    const code = text.charCodeAt(i);
    let mask = masks.get(code);
    if (mask === undefined) {
      mask = any.slice();
      masks.set(code, mask);
    }
    mask[i >>> 5]! |= 1 << (i & 31);
  }
  return { text, masks, any };
}

/** Whether `segment` matches `name` exactly at `at` (the caller checked it fits). */
function matchesAt(
  segment: Segment,
  name: string,
  at: number,
  meter: GlobMeter | undefined,
): boolean {
  const { text } = segment;
  if (meter !== undefined) meter.steps += text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c !== '?' && c !== name[at + i]) return false;
  }
  return true;
}

/**
 * The end of the leftmost match of `segment` in `name[from, limit)`, or -1. Shift-And reads each
 * character of the range once, whatever the segment: no backtracking.
 */
function searchFrom(
  segment: Segment,
  name: string,
  from: number,
  limit: number,
  meter: GlobMeter | undefined,
): number {
  const { masks, any, text } = segment;
  const state = new Uint32Array(any.length);
  const last = text.length - 1;
  const lastWord = last >>> 5;
  const lastBit = 1 << (last & 31);
  for (let p = from; p < limit; p++) {
    if (meter !== undefined) meter.steps++;
    const mask = masks.get(name.charCodeAt(p)) ?? any;
    let carry = 1;
    for (let w = 0; w < state.length; w++) {
      const s = state[w]!;
      state[w] = ((s << 1) | carry) & mask[w]!;
      carry = s >>> 31;
    }
    if ((state[lastWord]! & lastBit) !== 0) return p + 1;
  }
  return -1;
}

/**
 * Compiles `glob`, where `*` matches any run of characters (also empty) and `?` any one character
 * (UTF-16 code unit); everything else is literal. The matcher runs in time linear in the name and
 * the glob: it compares or scans at most `name.length + glob.length` characters (the steps a
 * {@link GlobMeter} counts), because the parts between `*`s have a fixed length, so the leftmost
 * place of each is the right one and each is searched once from where the previous one ended.
 */
export function compileGlob(glob: string): GlobMatcher {
  const parts = glob.split('*');
  const first = segmentOf(parts[0] ?? '');
  if (parts.length === 1) {
    return (name, meter) => name.length === first.text.length && matchesAt(first, name, 0, meter);
  }
  const lastPart = segmentOf(parts[parts.length - 1] ?? '');
  const middle = parts
    .slice(1, -1)
    .filter((part) => part !== '')
    .map(segmentOf);
  const fixed = first.text.length + lastPart.text.length;
  return (name, meter) => {
    if (name.length < fixed) return false;
    const limit = name.length - lastPart.text.length;
    if (!matchesAt(first, name, 0, meter) || !matchesAt(lastPart, name, limit, meter)) {
      return false;
    }
    let at = first.text.length;
    for (const segment of middle) {
      at = searchFrom(segment, name, at, limit, meter);
      if (at < 0) return false;
    }
    return true;
  };
}

/** Whether `name` matches `glob` ({@link compileGlob}; compile once to match many names). */
export function globMatch(glob: string, name: string): boolean {
  return compileGlob(glob)(name);
}

/**
 * The predicate a server's `tools` filter defines, or `undefined` when it keeps every tool.
 *
 * A name longer than any tool name may be ({@link MAX_TOOL_NAME_LENGTH}) is kept without being
 * matched: validation then refuses it with `INVALID_TOOL_NAME`, so a server cannot hide a
 * multi-megabyte name behind a filter, and the globs only ever see names of a bounded length.
 */
export function toolFilterOf(
  filter: ToolFilterConfig | undefined,
): ((name: string) => boolean) | undefined {
  if (filter === undefined || (filter.allow === undefined && filter.deny === undefined)) {
    return undefined;
  }
  const allow = filter.allow?.map(compileGlob);
  const deny = (filter.deny ?? []).map(compileGlob);
  return (name) =>
    name.length > MAX_TOOL_NAME_LENGTH ||
    ((allow === undefined || allow.some((match) => match(name))) &&
      !deny.some((match) => match(name)));
}
