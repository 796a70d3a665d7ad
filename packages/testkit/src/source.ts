/**
 * Tiny in-process {@link ToolListSource}s for property tests of `discoverToolPages`: no SDK, no
 * transport, no timers, so thousands of discoveries run per second.
 *
 * @packageDocumentation
 */
import {
  CATALOG_REVISION_META_KEY,
  CatalogError,
  ErrorCode,
  type ListPageRequest,
  type ToolListSource,
} from '@stepbind/binding/internal';

/** The JSON-RPC code a scripted source answers for a cursor it cannot resolve (`InvalidParams`). */
const INVALID_PARAMS = -32602;

/** How the pages of one catalog generation link together. */
export interface PagedCatalogOptions {
  /**
   * The `nextCursor` each page carries, by page index; a missing or `undefined` entry ends the
   * listing at that page. A cursor string that appears on several pages leads where its first
   * occurrence leads, so an entry that repeats an earlier one scripts a cursor cycle.
   * @default "c1", "c2", … on every page but the last
   */
  readonly cursors?: readonly (string | undefined)[];
  /**
   * The page each page's cursor leads to, by page index.
   * @default the next page (`index + 1`)
   */
  readonly targets?: readonly number[];
  /**
   * Revision token sent on every page as `_meta["io.stepbind/catalogRevision"]`.
   * @default no `_meta`
   */
  readonly revision?: string;
}

/** One request a {@link PagedSource} received, as its `onRequest` hook sees it. */
export interface PagedSourceRequest {
  /** 0-based arrival number across the source's whole life (restarts included). */
  readonly index: number;
  /** The cursor sent; `undefined` when none was sent. */
  readonly cursor: string | undefined;
  /** The source itself, so the hook can {@link PagedSource.replace} the catalog. */
  readonly source: PagedSource;
}

/** Options of {@link pagedSource}. */
export interface PagedSourceOptions extends PagedCatalogOptions {
  /**
   * Runs on every request before it is answered; the answer is computed from the catalog in force
   * once the hook returns (or its promise resolves). Use it to replace the catalog, bump a
   * `ChangeFeed` or delay. A throw or rejection becomes the request's failure.
   */
  readonly onRequest?: (request: PagedSourceRequest) => void | Promise<void>;
}

/** A scripted in-process `tools/list` endpoint. */
export interface PagedSource extends ToolListSource {
  /** The cursors received so far, in order (`undefined` = no cursor). Live view. */
  readonly requests: readonly (string | undefined)[];
  /** 0 for the initial catalog, +1 per {@link PagedSource.replace}. */
  readonly generation: number;
  /**
   * Replaces the catalog from the next answer on. Cursors of the previous generation stay valid
   * only if the new generation issues the same strings (a server that reuses positional cursors);
   * any other cursor is answered with a `SERVER_ERROR` carrying JSON-RPC code -32602.
   *
   * @throws {RangeError} when the cursors or targets are inconsistent (see {@link pagedSource}).
   */
  replace(pages: readonly (readonly unknown[])[], options?: PagedCatalogOptions): void;
}

interface Generation {
  readonly pages: readonly (readonly unknown[])[];
  readonly cursors: readonly (string | undefined)[];
  readonly targets: ReadonlyMap<string, number>;
  readonly revision: string | undefined;
}

function buildGeneration(
  pages: readonly (readonly unknown[])[],
  options: PagedCatalogOptions,
): Generation {
  if (pages.length === 0) throw new RangeError('a paged catalog needs at least one page');
  const cursors =
    options.cursors ?? pages.map((_, i) => (i + 1 < pages.length ? `c${i + 1}` : undefined));
  const targets = new Map<string, number>();
  cursors.forEach((cursor, i) => {
    if (cursor === undefined) return;
    const known = targets.get(cursor);
    const explicit = options.targets?.[i];
    // A repeated cursor without an explicit target leads where it first led (a cycle).
    if (known !== undefined && explicit === undefined) return;
    const target = explicit ?? i + 1;
    if (!Number.isInteger(target) || target < 0 || target >= pages.length) {
      throw new RangeError(`page ${i}'s cursor leads to page ${target}, which does not exist`);
    }
    if (known === undefined) targets.set(cursor, target);
    else if (known !== target) {
      throw new RangeError(
        `cursor ${JSON.stringify(cursor)} leads to page ${known} and to page ${target}`,
      );
    }
  });
  return { pages, cursors, targets, revision: options.revision };
}

/**
 * A {@link ToolListSource} that serves `pages` (raw tool arrays, served as-is) in process. The
 * first request (no cursor) gets page 0; each page carries `cursors[i]` as `nextCursor`, and that
 * cursor leads to `targets[i]` (default `i + 1`). `""` is a cursor like any other. An unknown
 * cursor is answered with a `SERVER_ERROR` (`detail.rpcCode` -32602), like a real server.
 *
 * It honours the request signal only through the discovery loop's own race: an `onRequest` hook
 * that never resolves makes the request hang until the loop's timeout, which is the point.
 *
 * @example
 * ```ts
 * const source = pagedSource([[toolA], [], [toolB]], { cursors: ['', 'x'] });
 * const result = await discoverToolPages(source);
 * // source.requests → [undefined, '', 'x']
 * ```
 * @throws {RangeError} when there are no pages, a target page does not exist, or one cursor string
 *   is given two different explicit targets.
 */
export function pagedSource(
  pages: readonly (readonly unknown[])[],
  options: PagedSourceOptions = {},
): PagedSource {
  let current = buildGeneration(pages, options);
  let generation = 0;
  const requests: (string | undefined)[] = [];
  const source: PagedSource = {
    requests,
    get generation() {
      return generation;
    },
    replace(nextPages, nextOptions = {}) {
      current = buildGeneration(nextPages, nextOptions);
      generation++;
    },
    async listTools(request: ListPageRequest): Promise<unknown> {
      const index = requests.length;
      requests.push(request.cursor);
      await options.onRequest?.({ index, cursor: request.cursor, source });
      const gen = current;
      let page = 0;
      if (request.cursor !== undefined) {
        const target = gen.targets.get(request.cursor);
        if (target === undefined) {
          throw new CatalogError(
            ErrorCode.SERVER_ERROR,
            `tools/list failed with JSON-RPC error ${INVALID_PARAMS}: unknown cursor ${JSON.stringify(request.cursor.slice(0, 40))} in catalog generation ${generation}`,
            { detail: { rpcCode: INVALID_PARAMS, generation } },
          );
        }
        page = target;
      }
      const result: Record<string, unknown> = { tools: [...(gen.pages[page] ?? [])] };
      const next = gen.cursors[page];
      if (next !== undefined) result['nextCursor'] = next;
      if (gen.revision !== undefined) {
        result['_meta'] = { [CATALOG_REVISION_META_KEY]: gen.revision };
      }
      return result;
    },
  };
  return source;
}

/** What a {@link sequenceSource} does for one request. */
export type SequenceStep =
  /** Answer with this value as the raw `tools/list` result (any JSON, valid or not). */
  | { readonly kind: 'result'; readonly value: unknown }
  /** Never answer (the discovery loop's timeout must end the wait). */
  | { readonly kind: 'hang' }
  /** Reject with this value (a non-stepbind error, as a misbehaving source would). */
  | { readonly kind: 'throw'; readonly value: unknown };

/** Options of {@link sequenceSource}. */
export interface SequenceSourceOptions {
  /** Runs on every request before it is answered, with its 0-based index and cursor. */
  readonly onRequest?: (request: {
    readonly index: number;
    readonly cursor: string | undefined;
  }) => void;
}

/**
 * A {@link ToolListSource} that ignores cursors and answers the nth request with `steps[n]`: a raw
 * result, a hang, or a thrown value. Requests past the end get `{ tools: [] }` (the last page).
 * Made for fuzzing: whatever the steps are, `discoverToolPages` must settle with a complete listing
 * or a `StepbindError`.
 *
 * The returned `requests` array records the cursors received (`undefined` = none).
 */
export function sequenceSource(
  steps: readonly SequenceStep[],
  options: SequenceSourceOptions = {},
): ToolListSource & { readonly requests: readonly (string | undefined)[] } {
  const requests: (string | undefined)[] = [];
  return {
    requests,
    listTools(request: ListPageRequest): Promise<unknown> {
      const index = requests.length;
      requests.push(request.cursor);
      options.onRequest?.({ index, cursor: request.cursor });
      const step = steps[index] ?? { kind: 'result', value: { tools: [] } };
      switch (step.kind) {
        case 'result':
          return Promise.resolve(step.value);
        case 'hang':
          // Settles only when the loop gives up, so no promise is left pending after the test.
          return new Promise<unknown>((_, reject) => {
            const stop = (): void =>
              reject(
                new Error('abandoned by the discovery loop', { cause: request.signal.reason }),
              );
            if (request.signal.aborted) stop();
            else request.signal.addEventListener('abort', stop, { once: true });
          });
        case 'throw':
          // A misbehaving source may reject with anything, not only an Error: that is the test.
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          return Promise.reject(step.value);
      }
    },
  };
}
