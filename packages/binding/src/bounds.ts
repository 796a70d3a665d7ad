/**
 * Depth and size bounds on the JSON values of a tool call, checked by an iterative walk before
 * anything is validated or serialised: validators, `JSON.stringify` and the caller's own code
 * recurse per nesting level, so a value nested a few thousand levels deep would otherwise overflow
 * the stack, and a huge one would stall the event loop.
 *
 * @packageDocumentation
 */

/** Bounds on the JSON values of one tool call. A value at the limit passes. */
export interface CallLimits {
  /**
   * Deepest nesting of objects and arrays in the arguments; the arguments object is level 1.
   * @default 64
   */
  readonly maxArgumentDepth: number;
  /**
   * Largest arguments, in bytes of their JSON text (strings counted in UTF-8, escapes not counted).
   * @default 4194304 (4 MiB)
   */
  readonly maxArgumentBytes: number;
  /**
   * Deepest nesting in a tool result (`content`, `structuredContent`, `_meta`...); the result
   * object is level 1, so `structuredContent` is level 2.
   * @default 128
   */
  readonly maxOutputDepth: number;
  /**
   * Largest tool result, in bytes of its JSON text (strings counted in UTF-8, escapes not counted).
   * @default 16777216 (16 MiB)
   */
  readonly maxOutputBytes: number;
}

/** The default {@link CallLimits}. */
export const DEFAULT_CALL_LIMITS: CallLimits = Object.freeze({
  maxArgumentDepth: 64,
  maxArgumentBytes: 4 * 1024 * 1024,
  maxOutputDepth: 128,
  maxOutputBytes: 16 * 1024 * 1024,
});

/** Why a value is refused: too deep, too large, or not representable as JSON. */
export type ValueProblem =
  | { readonly kind: 'depth'; readonly limit: number }
  | { readonly kind: 'bytes'; readonly limit: number }
  | {
      readonly kind: 'not-json';
      /** JSON pointer to the offending value (`""` for the value itself). */
      readonly path: string;
      /** What it is: `bigint`, `function`, `symbol`, or `object with toJSON`. */
      readonly type: string;
    };

/**
 * @internal Checks that `value` is plain JSON no deeper than `maxDepth` and no larger than
 * `maxBytes`. The walk is iterative, stops at the first problem, and costs one step per value it
 * visits, so a cyclic or exponentially shared structure stops at a limit. Values JSON would
 * silently change are refused as `not-json`: bigints, functions, symbols and objects with a
 * `toJSON` method (what is validated must be exactly what is sent). An `undefined` member is
 * skipped, as `JSON.stringify` skips it.
 *
 * @returns `undefined` when the value is within bounds, else the problem.
 */
export function checkJsonValue(
  value: unknown,
  maxDepth: number,
  maxBytes: number,
): ValueProblem | undefined {
  // The stacks of the last walk, taken for this one (a walk that a getter of the value started
  // from inside this one finds none and makes its own); given back emptied, unless they grew large.
  const stacks = spareStacks ?? { values: [], depths: [] };
  spareStacks = undefined;
  let high = 1;
  try {
    const { values, depths } = stacks;
    values[0] = value;
    depths[0] = 1;
    let top = 1;
    let bytes = 0;
    while (top > 0) {
      top--;
      const v = values[top];
      const depth = depths[top] as number;
      switch (typeof v) {
        case 'string':
          bytes += utf8Length(v) + 2;
          break;
        case 'number':
          bytes += Number.isFinite(v) ? String(v).length : 4;
          break;
        case 'boolean':
          bytes += v ? 4 : 5;
          break;
        case 'undefined':
          // Only array items get here (object members are skipped below): they become null.
          bytes += 4;
          break;
        case 'object': {
          if (v === null) {
            bytes += 4;
            break;
          }
          if (depth > maxDepth) return { kind: 'depth', limit: maxDepth };
          if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return notJson(value);
          if (Array.isArray(v)) {
            bytes += v.length === 0 ? 2 : v.length + 1;
            for (let i = v.length - 1; i >= 0; i--) {
              values[top] = v[i];
              depths[top] = depth + 1;
              top++;
            }
          } else {
            const record = v as Record<string, unknown>;
            let members = 0;
            for (const key in record) {
              if (!Object.hasOwn(record, key)) continue;
              const member = record[key];
              if (member === undefined) continue;
              members++;
              bytes += utf8Length(key) + 3;
              values[top] = member;
              depths[top] = depth + 1;
              top++;
            }
            bytes += members === 0 ? 2 : members + 1;
          }
          if (top > high) high = top;
          break;
        }
        case 'bigint':
        case 'function':
        case 'symbol':
          return notJson(value);
      }
      if (bytes > maxBytes) return { kind: 'bytes', limit: maxBytes };
    }
    return undefined;
  } finally {
    if (high <= SPARE_STACK_MAX) {
      // No reference to the walked value outlives the walk.
      stacks.values.fill(undefined, 0, high);
      spareStacks = stacks;
    }
  }
}

/** The walk stacks {@link checkJsonValue} keeps for the next walk (none while one is in use). */
let spareStacks: { readonly values: unknown[]; readonly depths: number[] } | undefined = {
  values: [],
  depths: [],
};
/** Stacks that grew past this many entries are dropped after their walk, not kept. */
const SPARE_STACK_MAX = 1024;

/** The first value JSON cannot carry, found again with paths (only on the failure path). */
function notJson(root: unknown): ValueProblem {
  const stack: { readonly value: unknown; readonly path: string }[] = [{ value: root, path: '' }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: string };
    const type = typeof value;
    if (type === 'bigint' || type === 'function' || type === 'symbol')
      return { kind: 'not-json', path, type };
    if (type !== 'object' || value === null) continue;
    if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
      return { kind: 'not-json', path, type: 'object with toJSON' };
    }
    const entries = Array.isArray(value)
      ? value.map((item, i) => [String(i), item] as const)
      : Object.entries(value as Record<string, unknown>);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i] as readonly [string, unknown];
      stack.push({ value: item, path: `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}` });
    }
  }
  return { kind: 'not-json', path: '', type: typeof root };
}

/** UTF-8 length of a string (a lone surrogate counts 3, as its replacement character). */
function utf8Length(s: string): number {
  if (s.length > 64) return Buffer.byteLength(s, 'utf8');
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else {
      // Three bytes, or four for a surrogate pair (two units).
      n += 2;
      const d = s.charCodeAt(i + 1);
      if (c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) i++;
    }
  }
  return n;
}

/** Human text for a problem, completing "Arguments ..." / "The result ...". */
export function describeValueProblem(
  problem: ValueProblem,
  depthName: string,
  bytesName: string,
): string {
  switch (problem.kind) {
    case 'depth':
      return `nested deeper than ${problem.limit} levels (limit ${depthName})`;
    case 'bytes':
      return `larger than ${problem.limit} bytes of JSON (limit ${bytesName})`;
    case 'not-json':
      return `not plain JSON: ${problem.path === '' ? 'the value' : problem.path} is a ${problem.type}`;
  }
}
