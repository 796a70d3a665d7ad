/**
 * The one canonical JSON encoder and the digests built on it.
 *
 * @packageDocumentation
 */
import * as crypto from 'node:crypto';

/** Characters `JSON.stringify` escapes in a string: `"`, `\`, C0 controls and lone surrogates. */
// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** `"key":` and `,"key":` for keys seen before: one string per member instead of three. */
const keyPrefixes = new Map<string, string>();
const keyPrefixesComma = new Map<string, string>();

/** Bound of each prefix cache: keys in tool schemas repeat heavily; unusual keys are not cached. */
const MAX_CACHED_KEYS = 4096;

/** @internal `"key":`, or `,"key":` when `comma`: the text before a member's value. */
export function keyPrefix(key: string, comma: boolean): string {
  const cache = comma ? keyPrefixesComma : keyPrefixes;
  let prefix = cache.get(key);
  if (prefix === undefined) {
    prefix = `${comma ? ',' : ''}${JSON.stringify(key)}:`;
    if (cache.size < MAX_CACHED_KEYS) cache.set(key, prefix);
  }
  return prefix;
}

/**
 * Canonical JSON (RFC 8785 style): object keys sorted by UTF-16 code unit order, no insignificant
 * whitespace, `undefined` members dropped (`undefined` array items become `null`), strings escaped
 * as `JSON.stringify` does, numbers in ECMAScript shortest form. Equal for reordered keys and
 * stable across processes, so its sha256 is a content digest. The text is built by string
 * concatenation (far less garbage than a token array on 10k-tool catalogs): this is the one
 * canonicaliser, used by the snapshot hot path, receipts and digests alike.
 *
 * @throws TypeError for values JSON cannot represent (functions, symbols, bigint, non-finite
 *   numbers); RangeError for cycles and values nested more than 5,000 levels deep.
 */
export function canonicalJson(value: unknown): string {
  deepest = 0;
  return write(value, 0);
}

/** Deepest object/array nesting met by the last {@link canonicalJson} call (0 for a scalar). */
let deepest = 0;

/** @internal The nesting depth of the value the last {@link canonicalJson} call encoded. */
export function lastCanonicalDepth(): number {
  return deepest;
}

function write(value: unknown, depth: number): string {
  switch (typeof value) {
    case 'string':
      // Most strings need no escaping: skipping the JSON.stringify call is measurably faster.
      return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite number');
      // Number-to-string is the same ECMAScript shortest form JSON.stringify uses (-0 gives "0").
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      break;
    case 'bigint':
    case 'function':
    case 'symbol':
    case 'undefined':
      throw new TypeError(`canonicalJson: cannot encode a ${typeof value}`);
  }
  if (value === null) return 'null';
  if (depth > 5000) throw new RangeError('canonicalJson: value too deep or cyclic');
  if (depth >= deepest) deepest = depth + 1;
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      const item: unknown = value[i];
      out += item === undefined ? 'null' : write(item, depth + 1);
    }
    return out + ']';
  }
  const record = value as Record<string, unknown>;
  const keys = sortKeys(Object.keys(record));
  let out = '{';
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    const member = record[key];
    if (member === undefined) continue;
    out += keyPrefix(key, !first) + write(member, depth + 1);
    first = false;
  }
  return out + '}';
}

/**
 * @internal Sort keys in place by UTF-16 code units (the order of `Array.prototype.sort`). Schema
 * objects have a handful of keys; for those an insertion sort is an order of magnitude cheaper
 * than the generic, comparator-less `sort` (which compares through `ToString`).
 */
export function sortKeys(keys: string[]): string[] {
  const n = keys.length;
  if (n > 16) return keys.sort();
  for (let i = 1; i < n; i++) {
    const key = keys[i] as string;
    let j = i - 1;
    if ((keys[j] as string) <= key) continue;
    while (j >= 0 && (keys[j] as string) > key) {
      keys[j + 1] = keys[j] as string;
      j--;
    }
    keys[j + 1] = key;
  }
  return keys;
}

/** Lower-case hex sha256 of a UTF-8 string. */
export function sha256Hex(text: string): string {
  return oneShot(text);
}

// `crypto.hash` (Node >= 20.12) skips the Hash object: about twice as fast on the small texts of
// tool definitions. Same UTF-8 encoding and digest as `createHash`.
const oneShot: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text, 'utf8').digest('hex');

/** `sha256:` + hex sha256 of the canonical JSON of `value`. */
export function digestOf(value: unknown): string {
  return `sha256:${sha256Hex(canonicalJson(value))}`;
}
