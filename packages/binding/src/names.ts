/**
 * Model-facing tool names (DESIGN §8). The model tools themselves are built in `tools/view.ts`.
 *
 * @packageDocumentation
 */
import { sha256Hex } from './canonical.js';

/** Longest model-facing name. OpenAI and Anthropic both accept `^[A-Za-z0-9_-]{1,64}$`. */
export const MAX_MODEL_NAME_LENGTH = 64;

/** Hex characters of the hash suffix used on overflow or collision (lengthened if still colliding). */
export const MODEL_NAME_HASH_LENGTH = 8;

/** A (configured server, raw tool name) pair. */
export interface QualifiedToolName {
  readonly server: string;
  readonly tool: string;
}

/** One row of a {@link ModelNameTable}. */
export interface ModelNameEntry extends QualifiedToolName {
  readonly modelName: string;
}

/** An injective mapping between (server, tool) pairs and model-facing names. */
export interface ModelNameTable {
  /** The model-facing name of a pair, or `undefined` when the pair is not in the table. */
  forward(server: string, tool: string): string | undefined;
  /** The pair a model-facing name stands for, or `undefined` for an unknown name. */
  reverse(modelName: string): QualifiedToolName | undefined;
  /** Every row, sorted by model name. */
  readonly entries: readonly ModelNameEntry[];
}

/** Replace every character outside `[A-Za-z0-9_-]` with `_` (per code point). */
export function sanitizeNamePart(part: string): string {
  if (SAFE_PART.test(part)) return part;
  // Valid MCP tool names only add '.', which a plain replaceAll handles without a unicode regex.
  if (DOTTED_PART.test(part)) return part.replaceAll('.', '_');
  return part.replace(/[^A-Za-z0-9_-]/gu, '_');
}

const SAFE_PART = /^[A-Za-z0-9_-]*$/;
const DOTTED_PART = /^[A-Za-z0-9._-]*$/;

const pairKey = (server: string, tool: string): string => `${server}\u0000${tool}`;

/**
 * Assign model-facing names: `${sanitize(server)}__${sanitize(tool)}` when that base is at most 64
 * characters and no other pair has the same base; otherwise the base, truncated, plus `_` and the
 * first 8 hex characters of sha256(server + "\u0000" + tool), lengthened one character at a time
 * while it still collides. Plain names are assigned first, then suffixed ones in order of their
 * hash, so the table depends only on the set of pairs (not their order) and is identical in every
 * process. Duplicate pairs are folded.
 */
export function assignModelNames(pairs: readonly QualifiedToolName[]): ModelNameTable {
  const unique = new Map<string, QualifiedToolName & { base: string }>();
  for (const { server, tool } of pairs) {
    const key = pairKey(server, tool);
    if (!unique.has(key)) {
      unique.set(key, {
        server,
        tool,
        base: `${sanitizeNamePart(server)}__${sanitizeNamePart(tool)}`,
      });
    }
  }
  const baseCount = new Map<string, number>();
  for (const p of unique.values()) baseCount.set(p.base, (baseCount.get(p.base) ?? 0) + 1);

  const forward = new Map<string, string>();
  const reverse = new Map<string, QualifiedToolName>();
  const suffixed: { key: string; pair: QualifiedToolName & { base: string }; hash: string }[] = [];
  for (const [key, pair] of unique) {
    if (pair.base.length <= MAX_MODEL_NAME_LENGTH && baseCount.get(pair.base) === 1) {
      forward.set(key, pair.base);
      reverse.set(pair.base, Object.freeze({ server: pair.server, tool: pair.tool }));
    } else {
      suffixed.push({ key, pair, hash: sha256Hex(key) });
    }
  }
  suffixed.sort((a, b) => compare(a.hash, b.hash) || compare(a.key, b.key));
  for (const { key, pair, hash } of suffixed) {
    let name: string | undefined;
    for (let n = MODEL_NAME_HASH_LENGTH; n <= hash.length; n++) {
      const candidate = `${pair.base.slice(0, MAX_MODEL_NAME_LENGTH - 1 - n)}_${hash.slice(0, n)}`;
      if (!reverse.has(candidate)) {
        name = candidate;
        break;
      }
    }
    // A full 64-hex collision would be a sha256 collision; fail loudly rather than alias.
    if (name === undefined) throw new Error(`stepbind: cannot name ${pair.server}/${pair.tool}`);
    forward.set(key, name);
    reverse.set(name, Object.freeze({ server: pair.server, tool: pair.tool }));
  }
  return new NameTable(forward, reverse);
}

/**
 * @internal The model-facing names of the tools of one server, in catalog order: exactly
 * `assignModelNames(tools.map((tool) => ({ server, tool }))).forward(server, tool)` for each tool.
 * `parts[i]` is `sanitizeNamePart(tools[i])`; `clashes` says whether two distinct tools share a
 * part. Without clashes every plain name is unique, so this is one pass (the usual case);
 * otherwise, or when a plain name is too long, it defers to {@link assignModelNames}.
 */
export function modelNamesOf(
  server: string,
  tools: readonly string[],
  parts: readonly string[],
  clashes: boolean,
): string[] {
  if (!clashes) {
    const prefix = `${sanitizeNamePart(server)}__`;
    const room = MAX_MODEL_NAME_LENGTH - prefix.length;
    const names = new Array<string>(tools.length);
    let i = 0;
    while (i < tools.length && (parts[i] as string).length <= room) {
      names[i] = prefix + (parts[i] as string);
      i++;
    }
    if (i === tools.length) return names;
  }
  const table = assignModelNames(tools.map((tool) => ({ server, tool })));
  return tools.map((tool) => table.forward(server, tool) as string);
}

class NameTable implements ModelNameTable {
  readonly #forward: ReadonlyMap<string, string>;
  readonly #reverse: ReadonlyMap<string, QualifiedToolName>;
  #entries: readonly ModelNameEntry[] | undefined;

  constructor(
    forward: ReadonlyMap<string, string>,
    reverse: ReadonlyMap<string, QualifiedToolName>,
  ) {
    this.#forward = forward;
    this.#reverse = reverse;
    Object.freeze(this);
  }

  forward(server: string, tool: string): string | undefined {
    return this.#forward.get(pairKey(server, tool));
  }

  reverse(modelName: string): QualifiedToolName | undefined {
    return this.#reverse.get(modelName);
  }

  /** Built on first access (sorting is not free on 10k-tool catalogs). */
  get entries(): readonly ModelNameEntry[] {
    this.#entries ??= Object.freeze(
      [...this.#reverse]
        .map(([modelName, p]) => Object.freeze({ server: p.server, tool: p.tool, modelName }))
        .sort((a, b) => compare(a.modelName, b.modelName)),
    );
    return this.#entries;
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
