/**
 * Undoing a strict conversion on the model's arguments: the `null`s the conversion introduced
 * for optional properties are removed again before the arguments are validated and sent.
 *
 * @packageDocumentation
 */

/** @internal Restores one value: `undefined` means "nothing to undo below here". Object plans list the
 * properties whose `null` the conversion introduced.
 */
export type Plan =
  | {
      readonly kind: 'object';
      readonly nulled: ReadonlySet<string>;
      readonly props: ReadonlyMap<string, Plan>;
    }
  | { readonly kind: 'array'; readonly items: Plan }
  | { readonly kind: 'ref'; readonly target: string }
  | undefined;

/** @internal True when undoing `plan` can change a value. */
export function needsRestore(
  plan: Plan,
  defs: ReadonlyMap<string, Plan>,
  seen: Set<string>,
): boolean {
  if (plan === undefined) return false;
  switch (plan.kind) {
    case 'object':
      return (
        plan.nulled.size > 0 || [...plan.props.values()].some((p) => needsRestore(p, defs, seen))
      );
    case 'array':
      return needsRestore(plan.items, defs, seen);
    case 'ref':
      if (seen.has(plan.target)) return false;
      seen.add(plan.target);
      return needsRestore(defs.get(plan.target), defs, seen);
  }
}

/** Deepest value `StrictSchema.restore` walks into (recursive `$ref`s follow the data). */
const MAX_RESTORE_DEPTH = 256;

/** @internal The value with the `null`s `plan` introduced removed. */
export function restoreValue(
  value: unknown,
  plan: Plan,
  defs: ReadonlyMap<string, Plan>,
  depth: number,
): unknown {
  if (plan === undefined || value === null || typeof value !== 'object') return value;
  if (depth > MAX_RESTORE_DEPTH) throw new RangeError('arguments nest too deeply');
  switch (plan.kind) {
    case 'ref':
      return restoreValue(value, defs.get(plan.target), defs, depth + 1);
    case 'array':
      return Array.isArray(value)
        ? value.map((v) => restoreValue(v, plan.items, defs, depth + 1))
        : value;
    case 'object': {
      if (Array.isArray(value)) return value;
      const out: Record<string, unknown> = {};
      for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
        if (v === null && plan.nulled.has(key)) continue;
        const child = plan.props.get(key);
        out[key] = child === undefined ? v : restoreValue(v, child, defs, depth + 1);
      }
      return out;
    }
  }
}
