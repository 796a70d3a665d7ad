/**
 * @internal A faster equivalent of `canonicalJson` for the snapshot hot path: it builds the text by
 * string concatenation instead of a token array (far less garbage on 10k-tool catalogs). Its output
 * is identical to `canonicalJson` for every JSON value (pinned by a property test and the golden
 * vectors); values JSON cannot represent throw `TypeError`, and cycles throw `RangeError`.
 *
 * @packageDocumentation
 */

const quotedKeys = new Map<string, string>();

function quoteKey(key: string): string {
  let quoted = quotedKeys.get(key);
  if (quoted === undefined) {
    quoted = JSON.stringify(key);
    // Bounded: object keys in tool schemas repeat heavily; unusual keys are not cached.
    if (quotedKeys.size < 4096) quotedKeys.set(key, quoted);
  }
  return quoted;
}

/** @internal Canonical JSON (sorted keys, no whitespace), identical to `canonicalJson`. */
export function canonicalText(value: unknown): string {
  return write(value, 0);
}

function write(value: unknown, depth: number): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite number');
      return JSON.stringify(value);
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
  const keys = Object.keys(record);
  if (keys.length > 1) keys.sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const member = record[key];
    if (member === undefined) continue;
    if (first) first = false;
    else out += ',';
    out += quoteKey(key) + ':' + write(member, depth + 1);
  }
  return out + '}';
}
