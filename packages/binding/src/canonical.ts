import * as crypto from 'node:crypto';

/**
 * Canonical JSON: object keys sorted by UTF-16 code unit order, no insignificant whitespace,
 * `undefined` members dropped, numbers in ECMAScript shortest form. Equal for reordered keys and
 * stable across processes, so its sha256 is a content digest.
 *
 * @throws TypeError for values JSON cannot represent (functions, symbols, bigint, non-finite numbers,
 *   cycles).
 */
export function canonicalJson(value: unknown): string {
  const seen = new Set<object>();
  const out: string[] = [];
  write(value, out, seen);
  return out.join('');
}

function write(value: unknown, out: string[], seen: Set<object>): void {
  if (value === null) {
    out.push('null');
    return;
  }
  switch (typeof value) {
    case 'string':
      out.push(JSON.stringify(value));
      return;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite number');
      out.push(JSON.stringify(value));
      return;
    case 'object':
      break;
    case 'bigint':
    case 'function':
    case 'symbol':
    case 'undefined':
      throw new TypeError(`canonicalJson: cannot encode a ${typeof value}`);
  }
  const obj = value;
  if (seen.has(obj)) throw new TypeError('canonicalJson: cyclic value');
  seen.add(obj);
  if (Array.isArray(obj)) {
    out.push('[');
    for (let i = 0; i < obj.length; i++) {
      if (i > 0) out.push(',');
      const item: unknown = obj[i];
      write(item === undefined ? null : item, out, seen);
    }
    out.push(']');
  } else {
    const record = obj as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    out.push('{');
    let first = true;
    for (const key of keys) {
      const member = record[key];
      if (member === undefined) continue;
      if (!first) out.push(',');
      first = false;
      out.push(JSON.stringify(key), ':');
      write(member, out, seen);
    }
    out.push('}');
  }
  seen.delete(obj);
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
