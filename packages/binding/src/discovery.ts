import { CatalogError, ErrorCode, StepbindError, abortedError } from './errors.js';
import { classifyRevisions } from './states.js';

/** The `_meta` key under which a server or gateway may publish its catalog revision token. */
export const CATALOG_REVISION_META_KEY = 'io.stepbind/catalogRevision';

/** One `tools/list` request, as the discovery loop asks a {@link ToolListSource} to send it. */
export interface ListPageRequest {
  /** The cursor to send, exactly as received; `undefined` means "no cursor" (the first page). */
  readonly cursor: string | undefined;
  /** Aborted when the caller gives up, the request times out or the whole deadline passes. */
  readonly signal: AbortSignal;
  /** Time budget for this single request in milliseconds (already capped by the deadline). */
  readonly timeoutMs: number;
}

/**
 * The one thing discovery needs from a server: send `tools/list` and return the raw result.
 * Implementations map transport and protocol failures to {@link StepbindError}s (`TIMEOUT`,
 * `CONNECTION_CLOSED`, `ABORTED`, `SERVER_ERROR` with `detail.rpcCode`).
 */
export interface ToolListSource {
  /** Sends one `tools/list` request and resolves to its unvalidated result object. */
  listTools(request: ListPageRequest): Promise<unknown>;
}

/**
 * A counter of `notifications/tools/list_changed` received from one server. Discovery reads it
 * before the first page and after every page; a change means the discovery is stale.
 */
export interface ChangeFeed {
  /** Incremented once per `list_changed` notification. */
  readonly version: number;
}

/** Limits and hooks for one discovery. All limits are validated before any request is sent. */
export interface DiscoverOptions {
  /** Most pages to request in one traversal. @default 100 */
  readonly maxPages?: number;
  /** Most tools to accept in one traversal (exactly `maxTools` is allowed). @default 10000 */
  readonly maxTools?: number;
  /** Largest cursor, in UTF-8 bytes, that will be sent back. @default 65536 */
  readonly maxCursorBytes?: number;
  /** Budget for each `tools/list` request. @default 30000 */
  readonly requestTimeoutMs?: number;
  /** Wall-clock deadline for the whole discovery, restarts included. @default 60000 */
  readonly totalTimeoutMs?: number;
  /** How often a stale traversal (list_changed, changed revision) may restart. @default 3 */
  readonly maxRestarts?: number;
  /**
   * When every page carries a revision token, re-read the first page at the end to prove the token
   * still holds (needed for `SNAPSHOT_PROVEN`). @default true
   */
  readonly verifyRevision?: boolean;
  /** Server name used in error details and messages. @default "server" */
  readonly server?: string;
  /** `list_changed` counter for this server; a change during a traversal restarts it. */
  readonly changes?: ChangeFeed;
  /** Cancels the discovery; it then rejects with `ABORTED`. */
  readonly signal?: AbortSignal;
  /** Clock, for tests. @default Date.now */
  readonly now?: () => number;
  /**
   * Called once per page that passed the discovery's own checks, in order, with the page's tools
   * as they will appear in {@link ToolDiscovery.pages}. It runs synchronously after the request
   * for the next page (or the revision re-read) was sent, so CPU work on page k overlaps the
   * server's work on page k+1.
   *
   * An error it throws is held, no later page is handed to it, and the discovery rejects with
   * that error once the traversal ends without a restart or an error of its own: discovery
   * errors and restarts keep the precedence they have when the pages are judged afterwards.
   */
  readonly onPage?: (tools: readonly RawTool[], pageIndex: number) => void;
  /** Called before a stale traversal restarts from the first page (forget pages seen so far). */
  readonly onRestart?: () => void;
}

/** What the revision tokens of a traversal prove. */
export type RevisionProof =
  | { readonly kind: 'proven'; readonly revision: string }
  | { readonly kind: 'unversioned' }
  | { readonly kind: 'unverified'; readonly revision: string };

/** A complete, frozen discovery: every page was read and every check passed. */
export interface ToolDiscovery {
  /** Every tool, in server order, as raw (structurally checked) MCP tool objects. */
  readonly tools: readonly RawTool[];
  /** The pages as served, in order (empty pages included). */
  readonly pages: readonly (readonly RawTool[])[];
  /** Number of tools on each page. */
  readonly pageSizes: readonly number[];
  /** What the `_meta` revision tokens prove about this traversal. */
  readonly revision: RevisionProof;
  /** How many stale traversals were discarded before this one. */
  readonly restarts: number;
  /** Epoch milliseconds when the successful traversal started. */
  readonly startedAt: number;
  /** Number of `tools/list` requests sent, restarts and the revision re-read included. */
  readonly requests: number;
}

/** A tool object as received: at least a string `name`; everything else is checked later. */
export interface RawTool {
  readonly name: string;
  readonly [key: string]: unknown;
}

interface ResolvedLimits {
  readonly maxPages: number;
  readonly maxTools: number;
  readonly maxCursorBytes: number;
  readonly requestTimeoutMs: number;
  readonly totalTimeoutMs: number;
  readonly maxRestarts: number;
}

/** Default discovery limits (DESIGN §4). */
export const DEFAULT_DISCOVERY_LIMITS: ResolvedLimits = Object.freeze({
  maxPages: 100,
  maxTools: 10_000,
  maxCursorBytes: 65_536,
  requestTimeoutMs: 30_000,
  totalTimeoutMs: 60_000,
  maxRestarts: 3,
});

/**
 * @internal The longest timer delay, in milliseconds: Node clamps larger delays to 1 ms, which
 * would turn a generous budget into an instant one. The upper bound of every timeout option.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * @internal The smallest value each discovery limit accepts (0 is meaningful for `maxTools` and
 * `maxRestarts`). The one home of these minimums: configuration parsing imports them.
 */
export const DISCOVERY_LIMIT_MINIMUMS: Readonly<Record<keyof ResolvedLimits, number>> =
  Object.freeze({
    maxPages: 1,
    maxTools: 0,
    maxCursorBytes: 1,
    requestTimeoutMs: 1,
    totalTimeoutMs: 1,
    maxRestarts: 0,
  });

/**
 * Checks the numeric limits of an {@link DiscoverOptions} bag and returns them with defaults
 * applied. Rejects 0 (except `maxTools` and `maxRestarts`, where 0 is meaningful), negative,
 * fractional, non-number (booleans, strings) and non-finite values.
 *
 * @throws CatalogError `INVALID_OPTIONS` naming the option and the value.
 */
export function resolveDiscoveryLimits(options: DiscoverOptions = {}): ResolvedLimits {
  const server = options.server ?? 'server';
  const pick = (key: keyof ResolvedLimits, max = Number.MAX_SAFE_INTEGER): number => {
    const min = DISCOVERY_LIMIT_MINIMUMS[key];
    const value: unknown = options[key];
    if (value === undefined) return DEFAULT_DISCOVERY_LIMITS[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      throw new CatalogError(
        ErrorCode.INVALID_OPTIONS,
        `Invalid discovery option ${key}=${JSON.stringify(describe(value))} for server "${server}": expected an integer from ${min} to ${max}. Fix the option; no request was sent.`,
        { detail: { server, option: key, value: describe(value) } },
      );
    }
    return value;
  };
  const limits: ResolvedLimits = {
    maxPages: pick('maxPages'),
    maxTools: pick('maxTools'),
    maxCursorBytes: pick('maxCursorBytes'),
    requestTimeoutMs: pick('requestTimeoutMs', MAX_TIMER_MS),
    totalTimeoutMs: pick('totalTimeoutMs', MAX_TIMER_MS),
    maxRestarts: pick('maxRestarts'),
  };
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new CatalogError(
      ErrorCode.INVALID_OPTIONS,
      `Invalid discovery option signal for server "${server}": expected an AbortSignal.`,
      { detail: { server, option: 'signal' } },
    );
  }
  return limits;
}

function describe(value: unknown): string | number | boolean | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : value;
  return typeof value;
}

/** Thrown inside one traversal when it must be discarded and restarted from the first page. */
class StaleTraversal extends Error {
  constructor(
    readonly code: typeof ErrorCode.CATALOG_CHANGED | typeof ErrorCode.REVISION_CHANGED,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/**
 * Discovers every tool of one server by following `nextCursor` until it is absent. The empty
 * string is a cursor and is sent. Resolves only when the last page was read and every check passed;
 * otherwise rejects with a {@link CatalogError} and returns nothing partial.
 *
 * Checks, in order, per page: the page shape (`INVALID_PAGE`), each tool's shape (`INVALID_TOOL`),
 * duplicate names across all pages (`DUPLICATE_TOOL_NAME`), the tool budget (`TOOL_LIMIT`); then the
 * next cursor's size (`CURSOR_TOO_LARGE`), whether it was seen before in this traversal
 * (`CURSOR_REPEATED`, catching A→A and A→B→A) and the page budget (`PAGE_LIMIT`). Each request has
 * its own timeout and the whole discovery a wall-clock deadline (`TIMEOUT`, `detail.scope`).
 * A `list_changed` observed through `options.changes`, or a revision token that changes between
 * pages, discards the traversal and restarts from the first page, at most `maxRestarts` times
 * (`CATALOG_CHANGED` / `REVISION_CHANGED` after that). Server errors keep their JSON-RPC code
 * (`SERVER_ERROR`, `detail.rpcCode`) and are not retried.
 */
export async function discoverToolPages(
  source: ToolListSource,
  options: DiscoverOptions = {},
): Promise<ToolDiscovery> {
  const limits = resolveDiscoveryLimits(options);
  const server = options.server ?? 'server';
  const now = options.now ?? Date.now;
  const deadline = now() + limits.totalTimeoutMs;
  const ctx: TraversalContext = {
    source,
    server,
    limits,
    deadline,
    now,
    signal: options.signal,
    verifyRevision: options.verifyRevision ?? true,
    onPage: options.onPage,
    requests: 0,
  };
  for (let restarts = 0; ; restarts++) {
    if (restarts > 0) options.onRestart?.();
    const changeVersion = options.changes?.version;
    const startedAt = now();
    try {
      const result = await traverse(ctx, options.changes, changeVersion);
      return Object.freeze({ ...result, restarts, startedAt, requests: ctx.requests });
    } catch (error) {
      if (!(error instanceof StaleTraversal)) throw error;
      if (restarts >= limits.maxRestarts) {
        throw new CatalogError(
          error.code,
          `The tool catalog of server "${server}" kept changing during discovery (${error.reason}); gave up after ${restarts} restart(s). Retry later or raise maxRestarts.`,
          { detail: { server, restarts, reason: error.reason } },
        );
      }
    }
  }
}

interface TraversalContext {
  readonly source: ToolListSource;
  readonly server: string;
  readonly limits: ResolvedLimits;
  readonly deadline: number;
  readonly now: () => number;
  readonly signal: AbortSignal | undefined;
  readonly verifyRevision: boolean;
  readonly onPage: ((tools: readonly RawTool[], pageIndex: number) => void) | undefined;
  requests: number;
}

async function traverse(
  ctx: TraversalContext,
  changes: ChangeFeed | undefined,
  changeVersion: number | undefined,
): Promise<Omit<ToolDiscovery, 'restarts' | 'startedAt' | 'requests'>> {
  const { server, limits } = ctx;
  const names = new Set<string>();
  const seenCursors = new Set<string>();
  const tools: RawTool[] = [];
  const pages: (readonly RawTool[])[] = [];
  const revisions: (string | undefined)[] = [];
  // The page handed to onPage once the next request is on the wire, and onPage's held error.
  let handOver: { readonly tools: readonly RawTool[]; readonly pageIndex: number } | undefined;
  let held: { readonly error: unknown } | undefined;
  const runHandOver = (): void => {
    if (handOver === undefined || ctx.onPage === undefined) return;
    const { tools: pageTools, pageIndex } = handOver;
    handOver = undefined;
    if (held !== undefined) return;
    try {
      ctx.onPage(pageTools, pageIndex);
    } catch (error) {
      held = { error };
    }
  };
  const checkChanges = (): void => {
    if (changes !== undefined && changes.version !== changeVersion) {
      throw new StaleTraversal(ErrorCode.CATALOG_CHANGED, 'tools/list_changed received');
    }
  };
  let cursor: string | undefined = undefined;
  let pending = requestPage(ctx, cursor, 0);
  for (let pageIndex = 0; ; pageIndex++) {
    let result: unknown;
    // Synchronous between sending the request and awaiting it: no rejection can go unhandled.
    runHandOver();
    try {
      result = await pending;
    } catch (error) {
      // A request that failed after a list_changed arrived (typically a cursor of the old catalog
      // that the server no longer knows) belongs to a stale traversal: restart, do not fail.
      checkChanges();
      throw error;
    }
    checkChanges();
    const page = readPage(result, server, pageIndex, cursor);
    revisions.push(page.revision);
    // A page of another revision is not part of this traversal: restart before judging its tools.
    if (revisions.length > 1 && revisions[0] !== page.revision) {
      throw new StaleTraversal(
        ErrorCode.REVISION_CHANGED,
        `catalog revision changed from ${String(revisions[0])} to ${String(page.revision)} on page ${pageIndex + 1}`,
      );
    }
    const pageTools: RawTool[] = [];
    for (let i = 0; i < page.tools.length; i++) {
      const tool = checkToolShape(page.tools[i], server, pageIndex, i);
      if (names.has(tool.name)) {
        throw new CatalogError(
          ErrorCode.DUPLICATE_TOOL_NAME,
          `Server "${server}" listed tool "${tool.name}" twice (again on page ${pageIndex + 1}). Tool names must be unique across all pages; fix the server's catalog.`,
          { detail: { server, tool: tool.name, page: pageIndex } },
        );
      }
      names.add(tool.name);
      pageTools.push(tool);
      tools.push(tool);
      if (tools.length > limits.maxTools) {
        throw new CatalogError(
          ErrorCode.TOOL_LIMIT,
          `Server "${server}" listed more than ${limits.maxTools} tools (limit reached on page ${pageIndex + 1}). Raise maxTools if this server is trusted.`,
          { detail: { server, limit: limits.maxTools, page: pageIndex } },
        );
      }
    }
    const frozen = Object.freeze(pageTools);
    pages.push(frozen);
    handOver = { tools: frozen, pageIndex };
    const next = page.nextCursor;
    if (next === undefined) break;
    const bytes = Buffer.byteLength(next, 'utf8');
    if (bytes > limits.maxCursorBytes) {
      throw new CatalogError(
        ErrorCode.CURSOR_TOO_LARGE,
        `Server "${server}" returned a ${bytes}-byte cursor on page ${pageIndex + 1}, over the ${limits.maxCursorBytes}-byte budget. Raise maxCursorBytes if this server is trusted.`,
        { detail: { server, bytes, limit: limits.maxCursorBytes, page: pageIndex } },
      );
    }
    if (seenCursors.has(next)) {
      throw new CatalogError(
        ErrorCode.CURSOR_REPEATED,
        `Server "${server}" returned cursor ${preview(next)} again on page ${pageIndex + 1}: its pagination loops. The catalog was not accepted; report the server bug.`,
        { detail: { server, cursor: preview(next), page: pageIndex } },
      );
    }
    if (pageIndex + 1 >= limits.maxPages) {
      throw new CatalogError(
        ErrorCode.PAGE_LIMIT,
        `Server "${server}" still had more pages after ${limits.maxPages}. Raise maxPages if this server is trusted.`,
        { detail: { server, limit: limits.maxPages } },
      );
    }
    seenCursors.add(next);
    cursor = next;
    pending = requestPage(ctx, cursor, pageIndex + 1);
  }
  const revision = await proveRevision(ctx, revisions, checkChanges, runHandOver);
  runHandOver();
  if (held !== undefined) throw held.error;
  return {
    tools: Object.freeze(tools),
    pages: Object.freeze(pages),
    pageSizes: Object.freeze(pages.map((p) => p.length)),
    revision,
  };
}

async function proveRevision(
  ctx: TraversalContext,
  revisions: readonly (string | undefined)[],
  checkChanges: () => void,
  whileWaiting: () => void,
): Promise<RevisionProof> {
  const first = revisions[0];
  if (first === undefined) return { kind: 'unversioned' };
  // One response is atomic: a single page needs no re-read to prove its revision.
  let reread: string | undefined = 'not-read';
  if (ctx.verifyRevision && revisions.length > 1) {
    const pending = requestPage(ctx, undefined, 0);
    whileWaiting();
    reread = readPage(await pending, ctx.server, 0, undefined).revision;
    checkChanges();
  }
  const verdict = classifyRevisions(revisions, reread);
  switch (verdict.state) {
    case 'SNAPSHOT_PROVEN':
      return { kind: 'proven', revision: verdict.revision };
    case 'UNVERSIONED_OBSERVATION':
      return ctx.verifyRevision ? { kind: 'unversioned' } : { kind: 'unverified', revision: first };
    case 'INCOMPLETE':
      throw new StaleTraversal(
        ErrorCode.REVISION_CHANGED,
        `catalog revision ${first} did not hold (${verdict.reason}${verdict.pageIndex >= 0 ? ` at page ${verdict.pageIndex + 1}` : ' on the final re-read of page 1'})`,
      );
  }
}

function preview(cursor: string): string {
  const shown = cursor.length > 40 ? `${cursor.slice(0, 40)}…` : cursor;
  return JSON.stringify(shown);
}

interface Page {
  readonly tools: readonly unknown[];
  readonly nextCursor: string | undefined;
  readonly revision: string | undefined;
}

function readPage(
  result: unknown,
  server: string,
  pageIndex: number,
  cursor: string | undefined,
): Page {
  const invalid = (why: string): CatalogError =>
    new CatalogError(
      ErrorCode.INVALID_PAGE,
      `Server "${server}" answered tools/list page ${pageIndex + 1} with an invalid result: ${why}. The catalog was not accepted; fix the server.`,
      {
        detail: { server, page: pageIndex, cursor: cursor === undefined ? null : preview(cursor) },
      },
    );
  if (typeof result !== 'object' || result === null || Array.isArray(result)) {
    throw invalid('not an object');
  }
  const record = result as Record<string, unknown>;
  const tools = record['tools'];
  if (!Array.isArray(tools)) throw invalid('"tools" is not an array');
  const next = record['nextCursor'];
  if (next !== undefined && typeof next !== 'string') {
    throw invalid(
      `"nextCursor" is ${next === null ? 'null' : typeof next}, not a string or absent`,
    );
  }
  let revision: string | undefined;
  const meta = record['_meta'];
  if (typeof meta === 'object' && meta !== null && !Array.isArray(meta)) {
    const token = (meta as Record<string, unknown>)[CATALOG_REVISION_META_KEY];
    if (token !== undefined && typeof token !== 'string') {
      throw invalid(`_meta["${CATALOG_REVISION_META_KEY}"] is not a string`);
    }
    revision = token;
  }
  return { tools, nextCursor: next, revision };
}

function checkToolShape(value: unknown, server: string, pageIndex: number, index: number): RawTool {
  const fail = (why: string, tool?: string): CatalogError =>
    new CatalogError(
      ErrorCode.INVALID_TOOL,
      `Server "${server}" listed an invalid tool${tool === undefined ? '' : ` "${tool}"`} (page ${pageIndex + 1}, item ${index + 1}): ${why}. The catalog was not accepted; fix the tool definition.`,
      { detail: { server, page: pageIndex, index, ...(tool === undefined ? {} : { tool }) } },
    );
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw fail('not an object');
  }
  const name = (value as Record<string, unknown>)['name'];
  if (typeof name !== 'string') throw fail('"name" is not a string');
  const schema = (value as Record<string, unknown>)['inputSchema'];
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    throw fail('"inputSchema" is missing or not an object', name);
  }
  return value as RawTool;
}

async function requestPage(
  ctx: TraversalContext,
  cursor: string | undefined,
  pageIndex: number,
): Promise<unknown> {
  const { server, limits } = ctx;
  if (ctx.signal !== undefined) checkAborted(ctx.signal, server);
  const remaining = ctx.deadline - ctx.now();
  if (remaining <= 0) throw deadlineError(server, limits.totalTimeoutMs, pageIndex);
  const scope = remaining < limits.requestTimeoutMs ? 'total' : 'request';
  const timeoutMs = Math.max(1, Math.min(limits.requestTimeoutMs, remaining));
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  // The race guarantees no hang even if a source ignores its signal.
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error =
        scope === 'total'
          ? deadlineError(server, limits.totalTimeoutMs, pageIndex)
          : new CatalogError(
              ErrorCode.TIMEOUT,
              `Server "${server}" did not answer tools/list page ${pageIndex + 1} within ${limits.requestTimeoutMs} ms. Check the server or raise requestTimeoutMs.`,
              {
                detail: {
                  server,
                  scope: 'request',
                  timeoutMs: limits.requestTimeoutMs,
                  page: pageIndex,
                },
              },
            );
      controller.abort(error);
      reject(error);
    }, timeoutMs);
    if (ctx.signal !== undefined) {
      onAbort = () => {
        const error = discoveryAborted(server, ctx.signal?.reason);
        controller.abort(error);
        reject(error);
      };
      ctx.signal.addEventListener('abort', onAbort, { once: true });
    }
  });
  ctx.requests++;
  try {
    return await Promise.race([
      ctx.source.listTools({ cursor, signal: controller.signal, timeoutMs }),
      guard,
    ]);
  } catch (error) {
    if (controller.signal.aborted && controller.signal.reason instanceof CatalogError) {
      throw controller.signal.reason;
    }
    throw toCatalogError(error, server, pageIndex);
  } finally {
    clearTimeout(timer);
    if (onAbort !== undefined) ctx.signal?.removeEventListener('abort', onAbort);
    guard.catch(() => undefined);
  }
}

function checkAborted(signal: AbortSignal, server: string): void {
  if (signal.aborted) throw discoveryAborted(server, signal.reason);
}

function discoveryAborted(server: string, reason: unknown): CatalogError {
  return abortedError(
    `Discovery of server "${server}" was cancelled by the caller; nothing was published.`,
    reason,
    { detail: { server }, as: CatalogError },
  );
}

function deadlineError(server: string, totalTimeoutMs: number, pageIndex: number): CatalogError {
  return new CatalogError(
    ErrorCode.TIMEOUT,
    `Discovery of server "${server}" missed its ${totalTimeoutMs} ms deadline at page ${pageIndex + 1}. Check the server or raise totalTimeoutMs.`,
    { detail: { server, scope: 'total', timeoutMs: totalTimeoutMs, page: pageIndex } },
  );
}

function toCatalogError(error: unknown, server: string, pageIndex: number): CatalogError {
  if (error instanceof CatalogError) return error;
  if (error instanceof StepbindError) {
    return new CatalogError(error.code, error.message, {
      detail: { ...error.detail, server, page: pageIndex },
      cause: error,
    });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CatalogError(
    ErrorCode.SERVER_ERROR,
    `tools/list page ${pageIndex + 1} failed on server "${server}": ${message}`,
    { detail: { server, page: pageIndex }, cause: error },
  );
}
