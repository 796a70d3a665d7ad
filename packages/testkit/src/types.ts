import type { ServerFixture } from './fixture.js';

/**
 * The scripted catalogs a server can play. Each is deterministic apart from its random cursors.
 *
 * - `normal`: three pages `alpha` | (empty) | `beta`, `gamma`.
 * - `single`: one page `alpha`, `beta`. `empty`: one page, no tools, no `nextCursor`.
 * - `empty-token`: `alpha` | `beta`, where the cursor to page 2 is the empty string.
 * - `repeat`: page 1 returns cursor A; every later request gets an empty page and the cursor it sent.
 * - `cycle`: cursors go A → B → A.
 * - `endless`: empty pages, each with a brand-new cursor, forever.
 * - `duplicate`: `alpha` | `beta` | `alpha`.
 * - `change`: `alpha` | `beta`; after the first `tools/list` the server moves to generation 1
 *   (`alpha`, `delta` | `gamma`), so earlier cursors get -32602 and a fresh listing succeeds.
 * - `revision-consistent`: `alpha` | `beta` | `gamma`, every page carrying revision `rev-1`.
 * - `revision-changing`: as consistent, but after the first `tools/list` the revision becomes
 *   `rev-2` (page 2 onwards, and every later listing, carry `rev-2`).
 * - `revision-missing-page`: as consistent, but page 2 has no revision `_meta`.
 * - `fixture`: everything from a {@link ServerFixture}.
 */
export type ScenarioName =
  | 'normal'
  | 'single'
  | 'empty'
  | 'empty-token'
  | 'repeat'
  | 'cycle'
  | 'endless'
  | 'duplicate'
  | 'change'
  | 'revision-consistent'
  | 'revision-changing'
  | 'revision-missing-page'
  | 'fixture';

/** Options of a scripted server. Plain JSON, so they can be passed to a stdio child. */
export interface ScriptedServerOptions {
  /** The catalog to play. */
  readonly scenario: ScenarioName;
  /** The catalog of the `fixture` scenario (exclusive with `fixturePath`). */
  readonly fixture?: ServerFixture;
  /** A JSON file holding the `fixture` scenario's catalog, read once at start. */
  readonly fixturePath?: string;
  /**
   * Append every received request and notification to this file as a JSON line, synchronously.
   * @default no file (the in-memory trail is always kept)
   */
  readonly auditPath?: string;
  /** Delay before each `tools/list` response, in milliseconds. @default 0 */
  readonly pageDelayMs?: number;
  /** Delay before each `tools/call` response, in milliseconds. @default 0 */
  readonly callDelayMs?: number;
  /**
   * The `serverInfo` sent in the `initialize` result (and, in the modern era, in `server/discover`
   * and every result's `_meta`).
   * @default `{ name: 'stepbind-testkit-<scenario>', version: '0.1.0' }`
   */
  readonly serverInfo?: { readonly name: string; readonly version: string };
  /**
   * The protocol era the stdio child speaks (`dist/server/stdio.js` only; in-memory servers are
   * always 2025-era). `legacy`: the SDK 1.32.2 server as is (2025-11-25, `initialize`). `modern`:
   * a 2026-07-28 front (`server/modern-front.ts`) answers `server/discover`, requires the `_meta`
   * envelope on every request and carries `list_changed` on `subscriptions/listen`; an `initialize`
   * is refused with -32022. `dual`: modern, but a client opening with `initialize` talks 2025 to
   * the SDK server directly. The same script, triggers and audit trail work in every era.
   * @default 'legacy'
   */
  readonly era?: ScriptedServerEra;
  /**
   * Cache hints the modern front adds to `server/discover` and every `tools/list` result
   * (2026-07-28 `ttlMs` / `cacheScope`). Ignored in the 2025 era.
   * @default none (no hint: nothing may be reused)
   */
  readonly cache?: { readonly ttlMs?: number; readonly cacheScope?: 'public' | 'private' };
}

/** The protocol era of a scripted stdio server; see {@link ScriptedServerOptions.era}. */
export type ScriptedServerEra = 'legacy' | 'modern' | 'dual';

/** One request or notification a scripted server received, in arrival order. */
export interface AuditEntry {
  /** 1-based arrival number within the server process. */
  readonly seq: number;
  /**
   * JSON-RPC method, e.g. `initialize`, `tools/list`, `notifications/cancelled`; in the modern
   * era `server/discover`, `subscriptions/listen` and no `initialize` (the front's own handshake
   * with the SDK server never was on the wire).
   */
  readonly method: string;
  /** For `tools/list` only: the cursor sent; `null` when none was sent (`""` stays `""`). */
  readonly cursor?: string | null;
  /** For `tools/call` only: the tool name requested. */
  readonly tool?: string;
  /** For `tools/call` only: the arguments received, when they were an object. */
  readonly arguments?: Readonly<Record<string, unknown>>;
  /** For `tools/call` only: the request's `params._meta` (progress token, trace context), if any. */
  readonly meta?: Readonly<Record<string, unknown>>;
  /** The catalog generation when the message arrived. */
  readonly generation: number;
  /** The process id of the server. */
  readonly pid: number;
}

/** How the scripted Streamable HTTP server (`dist/server/http.js`) behaves. Plain JSON. */
export interface HttpServerOptions {
  /** TCP port to listen on; `0` picks a free one (reported in the `listening` event). @default 0 */
  readonly port?: number;
  /** Interface to listen on. @default "127.0.0.1" */
  readonly host?: string;
  /**
   * The answer to a request naming a session this process does not know (for example after a
   * restart): `404` as the specification says, or `400` "Bad Request: No valid session ID provided"
   * as several real servers (server-everything among them) do. @default 404
   */
  readonly unknownSession?: 404 | 400;
  /**
   * Answer every GET (the optional server-to-client stream) with 404 instead of the 405 the
   * specification asks of a server without one, as some real servers do. @default false
   */
  readonly getNotFound?: boolean;
  /** Headers every request must carry with exactly these values; otherwise HTTP 401. */
  readonly requireHeaders?: Readonly<Record<string, string>>;
  /**
   * Make the 401 body repeat the request's URL and headers, like a careless server would, so a test
   * can check that the client never surfaces them. @default false
   */
  readonly echoOn401?: boolean;
  /**
   * `sse`: serve only the legacy HTTP+SSE transport (2024-11-05, `server/sse.ts`): GET `/mcp` opens
   * the event stream, POST `/mcp` is refused with `ssePostStatus`. @default "streamable-http"
   */
  readonly transport?: 'streamable-http' | 'sse';
  /** With `transport: "sse"`: the answer to a POST on `/mcp`. @default 405 */
  readonly ssePostStatus?: 400 | 404 | 405 | 500;
}

/** One line the scripted HTTP server writes to stdout (JSON per line). */
export type HttpServerEvent =
  | { readonly event: 'listening'; readonly port: number; readonly pid: number }
  | { readonly event: 'session'; readonly session: string }
  | { readonly event: 'unknown-session'; readonly session: string }
  | { readonly event: 'forgot'; readonly sessions: number }
  /** `transport: "sse"` only: a Streamable HTTP POST on `/mcp`, refused with `status`. */
  | { readonly event: 'refused'; readonly method: string; readonly status: number }
  | {
      readonly event: 'message';
      readonly session: string | null;
      readonly method: string;
      readonly tool?: string;
    };
