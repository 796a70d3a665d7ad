/**
 * Translation of schema patterns from ECMAScript to RE2 (DESIGN §7.1).
 *
 * JSON Schema `pattern` and `patternProperties` are ECMAScript regular expressions, and a tool
 * schema comes from an untrusted server: run by a backtracking engine, `^(a+)+$` against 28 `a`s
 * and a `!` blocks the event loop for seconds. stepbind never runs a server's pattern with
 * `RegExp`. {@link planPattern} translates the pattern (already proven valid ECMAScript with the
 * `u` flag) into RE2 syntax with the same meaning, which `re2js` (pure JavaScript, RE2 semantics)
 * matches in time linear in the input (`budget.ts`). A pattern that has no RE2 equivalent
 * (backreferences, lookaround, some Unicode properties) or that is too large is not enforced: its
 * plan says why.
 *
 * @packageDocumentation
 */
import { RE2JS } from 're2js';

/** Longest pattern (UTF-16 code units) stepbind enforces. */
export const MAX_PATTERN_LENGTH = 4096;

/** Deepest group nesting stepbind enforces. */
export const MAX_PATTERN_NESTING = 100;

/** Largest estimated RE2 program (instructions) stepbind enforces. */
export const MAX_PATTERN_SIZE = 10_000;

/** RE2's own limit on a counted repetition, nested counts multiplied (`(a{10}){100}` is 1000). */
const MAX_REPEAT = 1000;

/** How stepbind runs one schema pattern. */
export type PatternPlan =
  | {
      readonly enforced: true;
      /** The ECMAScript source, as served. */
      readonly source: string;
      /** The same language in RE2 syntax. */
      readonly re2: string;
      /** Estimated RE2 program size (instructions), the unit of the regex budget. */
      readonly size: number;
    }
  | {
      readonly enforced: false;
      readonly source: string;
      /** Why the pattern is not enforced, for humans. */
      readonly reason: string;
    };

class Unsupported extends Error {}

// ---------------------------------------------------------------------------------------------
// Translation

/**
 * ECMAScript `\s` (WhiteSpace and LineTerminator): tab, LF, VT, FF, CR, space, NBSP, the Unicode
 * space separators (Zs), LS, PS and the BOM. A test pins this list against `/\s/u`.
 */
const WHITE_SPACE: readonly (readonly [number, number])[] = [
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
];
const MAX_CODE_POINT = 0x10ffff;

function hex(cp: number): string {
  return `\\x{${cp.toString(16)}}`;
}

function rangesText(ranges: readonly (readonly [number, number])[]): string {
  let out = '';
  for (const [a, b] of ranges) out += a === b ? hex(a) : `${hex(a)}-${hex(b)}`;
  return out;
}

function complement(
  ranges: readonly (readonly [number, number])[],
): readonly (readonly [number, number])[] {
  const out: [number, number][] = [];
  let next = 0;
  for (const [a, b] of ranges) {
    if (a > next) out.push([next, a - 1]);
    next = b + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

const SPACE_ITEMS = rangesText(WHITE_SPACE);
const NON_SPACE_ITEMS = rangesText(complement(WHITE_SPACE));
const ANY_ITEMS = `${hex(0)}-${hex(MAX_CODE_POINT)}`;
/** A class that matches nothing, and one that matches every code point. */
const NOTHING = `[^${ANY_ITEMS}]`;
const ANYTHING = `[${ANY_ITEMS}]`;
/** ECMAScript `.` without the `s` flag: anything but a line terminator. */
const DOT = `[^${hex(0x0a)}${hex(0x0d)}${hex(0x2028)}${hex(0x2029)}]`;

/** General categories whose RE2 (Go) meaning equals ECMAScript's, by every ECMAScript name. */
const GENERAL_CATEGORIES: ReadonlyMap<string, string> = (() => {
  const pairs: [string, string][] = [
    ['Cc', 'Control'],
    ['Cf', 'Format'],
    ['Co', 'Private_Use'],
    ['Cs', 'Surrogate'],
    ['L', 'Letter'],
    ['Ll', 'Lowercase_Letter'],
    ['Lm', 'Modifier_Letter'],
    ['Lo', 'Other_Letter'],
    ['Lt', 'Titlecase_Letter'],
    ['Lu', 'Uppercase_Letter'],
    ['M', 'Mark'],
    ['Mc', 'Spacing_Mark'],
    ['Me', 'Enclosing_Mark'],
    ['Mn', 'Nonspacing_Mark'],
    ['N', 'Number'],
    ['Nd', 'Decimal_Number'],
    ['Nl', 'Letter_Number'],
    ['No', 'Other_Number'],
    ['P', 'Punctuation'],
    ['Pc', 'Connector_Punctuation'],
    ['Pd', 'Dash_Punctuation'],
    ['Pe', 'Close_Punctuation'],
    ['Pf', 'Final_Punctuation'],
    ['Pi', 'Initial_Punctuation'],
    ['Po', 'Other_Punctuation'],
    ['Ps', 'Open_Punctuation'],
    ['S', 'Symbol'],
    ['Sc', 'Currency_Symbol'],
    ['Sk', 'Modifier_Symbol'],
    ['Sm', 'Math_Symbol'],
    ['So', 'Other_Symbol'],
    ['Z', 'Separator'],
    ['Zl', 'Line_Separator'],
    ['Zp', 'Paragraph_Separator'],
    ['Zs', 'Space_Separator'],
  ];
  const map = new Map<string, string>();
  for (const [short, long] of pairs) {
    map.set(short, short);
    map.set(long, short);
  }
  // Alias names ECMAScript accepts for the same categories.
  map.set('digit', 'Nd');
  map.set('punct', 'P');
  map.set('cntrl', 'Cc');
  map.set('Combining_Mark', 'M');
  return map;
})();

/** Scripts re2js knows, checked once per name (its Unicode version may lag the engine's). */
const knownScripts = new Map<string, boolean>();

function scriptKnown(name: string): boolean {
  let known = knownScripts.get(name);
  if (known === undefined) {
    try {
      RE2JS.compile(`\\p{${name}}`);
      known = true;
    } catch {
      known = false;
    }
    if (knownScripts.size < 1024) knownScripts.set(name, known);
  }
  return known;
}

/**
 * Class items (text that goes between `[` and `]`) for `\p{...}` (`negated` false) or `\P{...}`.
 */
function propertyItems(body: string, negated: boolean): string {
  const eq = body.indexOf('=');
  const key = eq < 0 ? undefined : body.slice(0, eq);
  const value = eq < 0 ? body : body.slice(eq + 1);
  if (key === undefined || key === 'General_Category' || key === 'gc') {
    const gc = GENERAL_CATEGORIES.get(value);
    if (gc !== undefined) return negated ? `\\P{${gc}}` : `\\p{${gc}}`;
    if (key === undefined && value === 'Any') return negated ? '' : ANY_ITEMS;
    if (key === undefined && value === 'ASCII') {
      return negated ? `${hex(0x80)}-${hex(MAX_CODE_POINT)}` : `${hex(0)}-${hex(0x7f)}`;
    }
    throw new Unsupported(`the Unicode property \\p{${body}} has no RE2 equivalent`);
  }
  if (
    (key === 'Script' || key === 'sc') &&
    /^[A-Z][A-Za-z_]*$/.test(value) &&
    value !== 'Unknown' &&
    !GENERAL_CATEGORIES.has(value) &&
    scriptKnown(value)
  ) {
    return negated ? `\\P{${value}}` : `\\p{${value}}`;
  }
  throw new Unsupported(`the Unicode property \\p{${body}} has no RE2 equivalent`);
}

interface Piece {
  readonly text: string;
  /** Estimated RE2 program size. */
  readonly size: number;
  /** Largest product of nested counted repetitions inside (1 when there are none). */
  readonly nest: number;
}

const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
};

/**
 * A recursive-descent reader of ECMAScript patterns (`u` flag) that writes RE2 syntax. It only ever
 * sees patterns `new RegExp(source, 'u')` accepted, so it does not re-check ECMAScript's grammar;
 * anything it does not recognise is left unenforced rather than guessed at.
 */
class Translator {
  readonly #src: string;
  #pos = 0;

  constructor(source: string) {
    this.#src = source;
  }

  translate(): Piece {
    const piece = this.#disjunction(0);
    if (this.#pos !== this.#src.length) throw new Unsupported('unexpected ")"');
    return piece;
  }

  #peek(offset = 0): string | undefined {
    return this.#src[this.#pos + offset];
  }

  #startsWith(text: string): boolean {
    return this.#src.startsWith(text, this.#pos);
  }

  #disjunction(depth: number): Piece {
    if (depth > MAX_PATTERN_NESTING) {
      throw new Unsupported(`groups nested more than ${MAX_PATTERN_NESTING} deep`);
    }
    let text = '';
    let size = 0;
    let nest = 1;
    let first = true;
    for (;;) {
      const alt = this.#alternative(depth);
      text += first ? alt.text : `|${alt.text}`;
      size += alt.size + (first ? 0 : 1);
      nest = Math.max(nest, alt.nest);
      first = false;
      if (this.#peek() !== '|') break;
      this.#pos++;
    }
    return { text, size, nest };
  }

  #alternative(depth: number): Piece {
    let text = '';
    let size = 0;
    let nest = 1;
    for (;;) {
      const c = this.#peek();
      if (c === undefined || c === '|' || c === ')') return { text, size, nest };
      const term = this.#term(depth);
      text += term.text;
      size += term.size;
      nest = Math.max(nest, term.nest);
      if (size > MAX_PATTERN_SIZE) throw tooLarge();
    }
  }

  #term(depth: number): Piece {
    const c = this.#peek() as string;
    if (c === '^' || c === '$') {
      this.#pos++;
      return { text: c, size: 1, nest: 1 };
    }
    if (c === '\\' && this.#peek(1) === 'B') {
      // V8 also finds a non-boundary between the two halves of an astral character (seed
      // 1796114424161: /\B/u matches "a😀a"); RE2 walks code points and cannot say the same.
      throw new Unsupported('\\B differs from RE2 around characters outside the BMP');
    }
    if (c === '\\' && this.#peek(1) === 'b') {
      this.#pos += 2;
      return { text: '\\b', size: 1, nest: 1 };
    }
    if (this.#startsWith('(?=') || this.#startsWith('(?!')) {
      throw new Unsupported('lookahead has no RE2 equivalent');
    }
    if (this.#startsWith('(?<=') || this.#startsWith('(?<!')) {
      throw new Unsupported('lookbehind has no RE2 equivalent');
    }
    const atom = this.#atom(depth);
    const q = this.#quantifier();
    if (q === undefined) return atom;
    let size: number;
    let nest = atom.nest;
    if (!q.counted) {
      size = atom.size + 1;
    } else {
      // RE2 refuses a counted repetition whose nested counts multiply past 1000.
      nest = Math.max(1, q.max ?? q.min) * atom.nest;
      if (nest > MAX_REPEAT) {
        throw new Unsupported(`a counted repetition over ${MAX_REPEAT} (nested counts multiply)`);
      }
      size =
        q.max === undefined ? atom.size * (q.min + 1) + 1 : atom.size * q.max + (q.max - q.min);
    }
    if (size > MAX_PATTERN_SIZE) throw tooLarge();
    return { text: `${atom.text}${q.text}`, size, nest };
  }

  #quantifier():
    | {
        readonly text: string;
        readonly counted: boolean;
        readonly min: number;
        readonly max: number | undefined;
      }
    | undefined {
    const c = this.#peek();
    let result: { text: string; counted: boolean; min: number; max: number | undefined };
    if (c === '*' || c === '+' || c === '?') {
      this.#pos++;
      result = { text: c, counted: false, min: 0, max: undefined };
    } else if (c === '{') {
      const m = /^\{(\d{1,9})(,(\d{0,9}))?\}/.exec(this.#src.slice(this.#pos, this.#pos + 24));
      if (m === null) throw new Unsupported('a counted repetition RE2 cannot read');
      this.#pos += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === '' ? undefined : Number(m[3]);
      if (min > MAX_REPEAT || (max !== undefined && max > MAX_REPEAT)) {
        throw new Unsupported(`a counted repetition over ${MAX_REPEAT}`);
      }
      const text = m[2] === undefined ? `{${min}}` : `{${min},${max ?? ''}}`;
      result = { text, counted: true, min, max };
    } else {
      return undefined;
    }
    // Lazy and greedy quantifiers accept the same strings; RE2 gets the greedy form.
    if (this.#peek() === '?') this.#pos++;
    return result;
  }

  #atom(depth: number): Piece {
    const c = this.#peek() as string;
    if (c === '(') {
      if (this.#startsWith('(?:')) this.#pos += 3;
      else if (this.#startsWith('(?<')) {
        const close = this.#src.indexOf('>', this.#pos);
        if (close < 0) throw new Unsupported('unexpected group syntax');
        this.#pos = close + 1;
      } else if (this.#startsWith('(?')) {
        throw new Unsupported('group modifiers have no RE2 equivalent');
      } else this.#pos++;
      const inner = this.#disjunction(depth + 1);
      if (this.#peek() !== ')') throw new Unsupported('unbalanced parenthesis');
      this.#pos++;
      // Captures do not change what matches; RE2 gets non-capturing groups.
      return { text: `(?:${inner.text})`, size: inner.size, nest: inner.nest };
    }
    if (c === '.') {
      this.#pos++;
      return { text: DOT, size: 1, nest: 1 };
    }
    if (c === '[') return this.#characterClass();
    if (c === '\\') {
      this.#pos++;
      const items = this.#classEscape();
      if (items !== undefined) {
        return { text: items === '' ? NOTHING : `[${items}]`, size: 1, nest: 1 };
      }
      return { text: literal(this.#escapeCodePoint()), size: 1, nest: 1 };
    }
    if ('*+?{}])|'.includes(c)) throw new Unsupported(`unexpected "${c}"`);
    return { text: literal(this.#codePoint()), size: 1, nest: 1 };
  }

  #codePoint(): number {
    const cp = this.#src.codePointAt(this.#pos) as number;
    this.#pos += cp > 0xffff ? 2 : 1;
    return cp;
  }

  #characterClass(): Piece {
    this.#pos++;
    let negated = false;
    if (this.#peek() === '^') {
      negated = true;
      this.#pos++;
    }
    let items = '';
    for (;;) {
      const c = this.#peek();
      if (c === undefined) throw new Unsupported('unterminated character class');
      if (c === ']') {
        this.#pos++;
        break;
      }
      const first = this.#classAtom();
      if (typeof first === 'string') {
        items += first;
        continue;
      }
      if (this.#peek() === '-' && this.#peek(1) !== ']' && this.#peek(1) !== undefined) {
        this.#pos++;
        const last = this.#classAtom();
        if (typeof last === 'string' || last < first) {
          throw new Unsupported('unexpected class range');
        }
        items += `${hex(first)}-${hex(last)}`;
      } else {
        items += hex(first);
      }
    }
    // An empty RE2 class is a syntax error (and "[]a]" means something else there).
    if (items === '') return { text: negated ? ANYTHING : NOTHING, size: 1, nest: 1 };
    return { text: negated ? `[^${items}]` : `[${items}]`, size: 1, nest: 1 };
  }

  /** One class member: a code point, or class items (a string) for a class escape. */
  #classAtom(): number | string {
    if (this.#peek() !== '\\') return this.#codePoint();
    this.#pos++;
    const c = this.#peek();
    if (c === 'b' || c === '-') {
      this.#pos++;
      return c === 'b' ? 0x08 : 0x2d;
    }
    return this.#classEscape() ?? this.#escapeCodePoint();
  }

  /** Class items for `\d \D \w \W \s \S \p{} \P{}` (after the backslash), else `undefined`. */
  #classEscape(): string | undefined {
    const c = this.#peek();
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
        // RE2's Perl classes are ASCII, exactly ECMAScript's without the `i` flag.
        this.#pos++;
        return `\\${c}`;
      case 's':
        this.#pos++;
        return SPACE_ITEMS;
      case 'S':
        this.#pos++;
        return NON_SPACE_ITEMS;
      case 'p':
      case 'P': {
        const close = this.#src.indexOf('}', this.#pos);
        if (this.#peek(1) !== '{' || close < 0) throw new Unsupported('unexpected \\p syntax');
        const body = this.#src.slice(this.#pos + 2, close);
        this.#pos = close + 1;
        return propertyItems(body, c === 'P');
      }
      case undefined:
      default:
        return undefined;
    }
  }

  /** The code point of a character escape (after the backslash). */
  #escapeCodePoint(): number {
    const c = this.#peek();
    if (c === undefined) throw new Unsupported('a trailing backslash');
    const simple = SIMPLE_ESCAPES[c];
    if (simple !== undefined) {
      this.#pos++;
      return simple;
    }
    if (c === '0' && !/[0-9]/.test(this.#peek(1) ?? '')) {
      this.#pos++;
      return 0;
    }
    if (/[1-9]/.test(c) || c === 'k') {
      throw new Unsupported('backreferences have no RE2 equivalent');
    }
    if (c === 'c') {
      const letter = this.#peek(1) ?? '';
      if (!/^[A-Za-z]$/.test(letter)) throw new Unsupported('unexpected \\c escape');
      this.#pos += 2;
      return letter.charCodeAt(0) % 32;
    }
    if (c === 'x') {
      const digits = this.#src.slice(this.#pos + 1, this.#pos + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(digits)) throw new Unsupported('unexpected \\x escape');
      this.#pos += 3;
      return parseInt(digits, 16);
    }
    if (c === 'u') return this.#unicodeEscape();
    if ('^$\\.*+?()[]{}|/'.includes(c)) {
      this.#pos++;
      return c.charCodeAt(0);
    }
    throw new Unsupported(`unexpected escape \\${c}`);
  }

  /** `\uXXXX` (under `u`, a surrogate pair of two is one code point) or `\u{X...}`. */
  #unicodeEscape(): number {
    const braced = /^u\{([0-9A-Fa-f]{1,8})\}/.exec(this.#src.slice(this.#pos, this.#pos + 11));
    if (braced !== null) {
      this.#pos += braced[0].length;
      const cp = parseInt(braced[1] as string, 16);
      if (!(cp <= MAX_CODE_POINT)) throw new Unsupported('a code point over U+10FFFF');
      return cp;
    }
    const four = /^u([0-9A-Fa-f]{4})/.exec(this.#src.slice(this.#pos, this.#pos + 5));
    if (four === null) throw new Unsupported('unexpected \\u escape');
    this.#pos += 5;
    const lead = parseInt(four[1] as string, 16);
    if (lead >= 0xd800 && lead <= 0xdbff) {
      const trail = /^\\u([0-9A-Fa-f]{4})/.exec(this.#src.slice(this.#pos, this.#pos + 6));
      const low = trail === null ? -1 : parseInt(trail[1] as string, 16);
      if (low >= 0xdc00 && low <= 0xdfff) {
        this.#pos += 6;
        return 0x10000 + ((lead - 0xd800) << 10) + (low - 0xdc00);
      }
    }
    return lead;
  }
}

function tooLarge(): Unsupported {
  return new Unsupported(`its RE2 program would exceed ${MAX_PATTERN_SIZE} instructions`);
}

/** RE2 text for one literal code point: ASCII letters and digits as is, the rest escaped. */
function literal(cp: number): string {
  if ((cp >= 0x30 && cp <= 0x39) || (cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a)) {
    return String.fromCharCode(cp);
  }
  return hex(cp);
}

/**
 * How stepbind runs one schema pattern, which must be a valid ECMAScript regular expression with
 * the `u` flag (the schema checks prove that first). Pure and linear in the pattern's length.
 */
export function planPattern(source: string): PatternPlan {
  if (source.length > MAX_PATTERN_LENGTH) {
    return {
      enforced: false,
      source,
      reason: `longer than ${MAX_PATTERN_LENGTH} characters`,
    };
  }
  try {
    const { text, size } = new Translator(source).translate();
    return { enforced: true, source, re2: text, size: size + 2 };
  } catch (error) {
    if (error instanceof Unsupported) return { enforced: false, source, reason: error.message };
    throw error;
  }
}
