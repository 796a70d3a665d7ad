/**
 * The structural walk of a tool schema (the full path): local `$ref` resolution and cycles,
 * regular expressions, anchors, and the keyword forms Ajv cannot compile. Ajv's meta-schema
 * (`cache.ts`) then proves the keyword values.
 *
 * @packageDocumentation
 */
import { planPattern } from '../regex/plan.js';
import type { SchemaDialect } from './dialects.js';
import {
  ANCHOR,
  EAGER_KEYWORDS,
  IN_PLACE,
  JSON_TYPES,
  SCHEMA_ARRAYS,
  SCHEMA_MAPS,
  SCHEMA_VALUED,
  isProtoSkipped,
  regexProblem,
} from './keywords.js';
import { pointerSegments } from './pointer.js';
import type { SchemaProblem, UnenforcedSchemaPattern } from './types.js';

interface PendingRef {
  readonly ref: string;
  readonly site: object;
  readonly resource: object;
  readonly path: readonly string[];
}

/** @internal */
export type WalkResult =
  | {
      readonly ok: true;
      readonly needsCompile: boolean;
      readonly hasIds: boolean;
      /** Patterns RE2 cannot run, in walk order. */
      readonly unenforced: UnenforcedSchemaPattern[];
      /** True when a property map has an own `__proto__` key that Ajv would skip. */
      readonly protoKeys: boolean;
    }
  | { readonly ok: false; readonly problem: SchemaProblem };

class Fail extends Error {
  constructor(readonly problem: SchemaProblem) {
    super(problem.message);
  }
}

/**
 * @internal Walk every subschema in a schema position: reject remote and unresolvable `$ref`s,
 * invalid regular expressions and the `nullable`/`$async` forms Ajv cannot compile; report whether
 * the schema needs eager compilation to prove its references, which patterns RE2 cannot run, and
 * whether a property map has a `__proto__` key. A `$ref` target outside every schema position is
 * walked too, since Ajv compiles it as a schema.
 */
export function inspectSchema(root: object, dialect: SchemaDialect): WalkResult {
  const anchors = new Map<object, Map<string, unknown>>();
  const schemaNodes = new Set<object>();
  const pending: PendingRef[] = [];
  const path: string[] = [];
  // Schema nodes on the way from the root to the node being visited, and every node that is an
  // ancestor of some $ref: a $ref into one of those is recursive, which only Ajv can prove.
  const stack: object[] = [];
  const refAncestors = new Set<object>();
  let needsCompile = false;
  let hasIds = false;
  let protoKeys = false;
  const unenforced: UnenforcedSchemaPattern[] = [];

  const notePattern = (source: string): void => {
    const plan = planPattern(source);
    if (!plan.enforced) unenforced.push({ path: [...path], pattern: source, reason: plan.reason });
  };

  const fail = (code: SchemaProblem['code'], message: string, ref?: string): never => {
    throw new Fail({ code, path: [...path], message, ...(ref === undefined ? {} : { ref }) });
  };

  // Edges between schemas that apply to the same instance (in-place applicators and $ref).
  const edges = new Map<object, object[]>();
  const addEdge = (from: object, to: object): void => {
    const list = edges.get(from);
    if (list === undefined) edges.set(from, [to]);
    else list.push(to);
  };

  const visit = (node: unknown, resource: object, isRoot: boolean, inPlaceFrom?: object): void => {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return;
    if (inPlaceFrom !== undefined) addEdge(inPlaceFrom, node);
    if (schemaNodes.has(node)) return;
    schemaNodes.add(node);
    const s = node as Record<string, unknown>;
    let scope = resource;
    if (s.$id !== undefined) {
      hasIds = true;
      if (!isRoot) needsCompile = true;
      if (typeof s.$id === 'string' && s.$id.startsWith('#')) {
        const name = s.$id.slice(1);
        path.push('$id');
        if (!ANCHOR.test(name)) fail('SCHEMA_INVALID', `has an invalid anchor "${s.$id}"`);
        path.pop();
        anchorsOf(anchors, resource).set(name, node);
      } else if (!isRoot) {
        scope = node;
      }
    }
    if (!isRoot && s.$schema !== undefined) needsCompile = true;
    for (const keyword of EAGER_KEYWORDS) {
      if (s[keyword] !== undefined) needsCompile = true;
    }
    if (typeof s.$anchor === 'string') anchorsOf(anchors, scope).set(s.$anchor, node);
    if (typeof s.$dynamicAnchor === 'string') anchorsOf(anchors, scope).set(s.$dynamicAnchor, node);
    for (const keyword of ['$ref', '$dynamicRef', '$recursiveRef']) {
      const ref = s[keyword];
      if (typeof ref !== 'string') continue;
      path.push(keyword);
      if (!ref.startsWith('#')) {
        fail(
          'REMOTE_REF',
          `has a non-local $ref "${ref}"; only references inside the schema ("#...") are allowed`,
          ref,
        );
      }
      if (keyword === '$ref') {
        pending.push({ ref, site: node, resource: scope, path: [...path] });
        refAncestors.add(node);
        for (const ancestor of stack) refAncestors.add(ancestor);
      }
      path.pop();
    }
    if (s.$async !== undefined) {
      path.push('$async');
      fail('SCHEMA_INVALID', 'uses $async, which tool schemas cannot use');
    }
    checkNullable(s, path, fail);
    if (typeof s.pattern === 'string') {
      path.push('pattern');
      checkRegExp(s.pattern, fail);
      notePattern(s.pattern);
      path.pop();
    }
    stack.push(node);
    for (const key of Object.keys(s)) {
      const value = s[key];
      if (typeof value !== 'object' || value === null) continue;
      const from = IN_PLACE.has(key) ? node : undefined;
      path.push(key);
      if (Array.isArray(value)) {
        if (SCHEMA_ARRAYS.has(key)) {
          for (let i = 0; i < value.length; i++) {
            path.push(String(i));
            visit(value[i], scope, false, from);
            path.pop();
          }
        }
      } else if (SCHEMA_MAPS.has(key)) {
        if (key === '$defs' && dialect === 'draft-07') needsCompile = true;
        for (const member of Object.keys(value)) {
          path.push(member);
          if (isProtoSkipped(key, member)) protoKeys = true;
          if (key === 'patternProperties') {
            checkRegExp(member, fail);
            notePattern(member);
          }
          visit((value as Record<string, unknown>)[member], scope, false, from);
          path.pop();
        }
      } else if (SCHEMA_VALUED.has(key)) {
        visit(value, scope, false, from);
      }
      path.pop();
    }
    stack.pop();
  };

  try {
    visit(root, root, true);
    // Visiting an outside target can add references: the loop sees them as they are pushed.
    for (const { ref, site, resource, path: refPath } of pending) {
      const target = resolveLocal(ref, resource, anchors);
      if (target === NOT_FOUND) {
        path.length = 0;
        path.push(...refPath);
        fail('UNRESOLVED_REF', `has a $ref "${ref}" that points to nothing in the schema`, ref);
      }
      if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
        // A target outside any schema position was not meta-validated, and a recursive target
        // can loop forever in Ajv: let Ajv prove both.
        if (!schemaNodes.has(target) || refAncestors.has(target)) needsCompile = true;
        addEdge(site, target);
        if (!schemaNodes.has(target)) {
          // Ajv compiles it as a schema: walk it for its patterns (and the other checks), at its
          // own pointer when it is one into the root resource.
          path.length = 0;
          path.push(...(resource === root ? (refPointer(ref) ?? refPath) : refPath));
          visit(target, resource, false);
        }
      } else if (typeof target !== 'boolean') {
        path.length = 0;
        path.push(...refPath);
        fail('UNRESOLVED_REF', `has a $ref "${ref}" that does not point to a schema`, ref);
      }
    }
    if (pending.length > 0) {
      const cycle = findCycle(edges);
      if (cycle !== undefined) {
        const at = pending.find((p) => cycle.has(p.site));
        path.length = 0;
        path.push(...(at?.path ?? []));
        fail(
          'SCHEMA_INVALID',
          `has a $ref cycle that applies to the same value forever${at === undefined ? '' : ` ("${at.ref}")`}`,
          at?.ref,
        );
      }
    }
  } catch (error) {
    if (error instanceof Fail) return { ok: false, problem: error.problem };
    throw error;
  }
  return { ok: true, needsCompile, hasIds, unenforced, protoKeys };
}

/** The JSON pointer segments of a `#/...` reference, or `undefined` for an anchor. */
function refPointer(ref: string): string[] | undefined {
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  return fragment.startsWith('/') || fragment === '' ? pointerSegments(fragment) : undefined;
}

/** The nodes of one cycle in a directed graph, or `undefined` when it is acyclic. */
function findCycle(edges: Map<object, object[]>): Set<object> | undefined {
  const done = new Set<object>();
  for (const start of edges.keys()) {
    if (done.has(start)) continue;
    const onPath = new Set<object>([start]);
    const frames: { node: object; next: number }[] = [{ node: start, next: 0 }];
    while (frames.length > 0) {
      const frame = frames[frames.length - 1] as { node: object; next: number };
      const out = edges.get(frame.node) ?? [];
      if (frame.next >= out.length) {
        frames.pop();
        onPath.delete(frame.node);
        done.add(frame.node);
        continue;
      }
      const to = out[frame.next++] as object;
      if (onPath.has(to)) {
        const cycle = new Set<object>();
        for (let i = frames.length - 1; i >= 0; i--) {
          const n = (frames[i] as { node: object }).node;
          cycle.add(n);
          if (n === to) break;
        }
        return cycle;
      }
      if (!done.has(to)) {
        onPath.add(to);
        frames.push({ node: to, next: 0 });
      }
    }
  }
  return undefined;
}

function checkNullable(
  s: Record<string, unknown>,
  path: string[],
  fail: (code: SchemaProblem['code'], message: string) => never,
): void {
  if (s.nullable === undefined) return;
  path.push('nullable');
  if (typeof s.nullable !== 'boolean') fail('SCHEMA_INVALID', '"nullable" must be a boolean');
  const types = Array.isArray(s.type)
    ? (s.type as unknown[])
    : s.type === undefined
      ? []
      : [s.type];
  if (types.length === 0 || !types.every((t) => typeof t === 'string' && JSON_TYPES.has(t))) {
    fail('SCHEMA_INVALID', '"nullable" cannot be used without a valid "type"');
  }
  if (types.includes('null') && s.nullable === false) {
    fail('SCHEMA_INVALID', 'type "null" contradicts "nullable": false');
  }
  path.pop();
}

function checkRegExp(
  source: string,
  fail: (code: SchemaProblem['code'], message: string) => never,
): void {
  const problem = regexProblem(source);
  if (problem !== undefined) fail('SCHEMA_INVALID', problem);
}

function anchorsOf(all: Map<object, Map<string, unknown>>, resource: object): Map<string, unknown> {
  let map = all.get(resource);
  if (map === undefined) {
    map = new Map();
    all.set(resource, map);
  }
  return map;
}

const NOT_FOUND = Symbol('not found');

function resolveLocal(
  ref: string,
  resource: object,
  anchors: Map<object, Map<string, unknown>>,
): unknown {
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return NOT_FOUND;
  }
  if (fragment === '') return resource;
  if (!fragment.startsWith('/')) {
    const map = anchors.get(resource);
    return map?.has(fragment) === true ? map.get(fragment) : NOT_FOUND;
  }
  let node: unknown = resource;
  for (const raw of fragment.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null) return NOT_FOUND;
    if (Array.isArray(node)) {
      if (!/^(0|[1-9][0-9]*)$/.test(key) || Number(key) >= node.length) return NOT_FOUND;
      node = node[Number(key)];
    } else {
      if (!Object.prototype.hasOwnProperty.call(node, key)) return NOT_FOUND;
      node = (node as Record<string, unknown>)[key];
    }
  }
  return node;
}
