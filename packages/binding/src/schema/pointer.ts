/**
 * JSON pointers (RFC 6901) as segment lists.
 *
 * @packageDocumentation
 */

/** @internal The segments of a JSON pointer (`/a/b~1c` → `['a', 'b/c']`). */
export function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Encode JSON pointer segments as a pointer string (`/a/b~1c`). */
export function toPointer(segments: readonly string[]): string {
  let out = '';
  for (const s of segments) out += '/' + s.replace(/~/g, '~0').replace(/\//g, '~1');
  return out;
}
