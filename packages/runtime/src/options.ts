import {
  sameKeys,
  type ApprovalMode,
  type JournalStore,
  type ValidationOptions,
} from '@stepbind/binding/internal';
import type { AuthorizeHook, AuthStatus, TokenStore } from './auth/types.js';
import type { RuntimeClock } from './clock.js';
import type { ClientHandlers } from './client-capabilities.js';
import type { CatalogCacheOption } from './cache/option.js';
import type { ServerConfig } from './config.js';
import type { RuntimeEvent } from './events.js';
import type { Connection, ProtocolEra } from './connection.js';
import type { StoreOption } from './fleet/attach.js';
import type { JournalDriverOption } from './journal/sqlite-driver.js';
import type { JournalStatus } from './journal/status.js';
export type { JournalStatus } from './journal/status.js';
import type { DiscoveryStatus } from './discovery-states.js';
import {
  captureOptionsSchema,
  journalOptionsSchema,
  reconnectOptionsSchema,
  runtimeOptionsSchema,
  validationOptionsSchema,
} from './options-schema.js';

export type { DiscoveryStatus } from './discovery-states.js';

/** Starts a connection to one configured server. Replaceable for tests (in-memory servers). */
export type ServerConnector = (
  name: string,
  config: ServerConfig,
  options: { readonly signal: AbortSignal },
) => Promise<Connection>;

/** Bounded exponential backoff of the reconnects after a lost HTTP session. */
export interface ReconnectOptions {
  /** Delay after the first failed attempt (the first attempt runs at once); doubles each time. @default 250 */
  readonly initialDelayMs?: number;
  /** Upper bound of one delay. @default 10000 */
  readonly maxDelayMs?: number;
  /**
   * Attempts before the runtime stops trying on its own (the next refresh, capture or hard refresh
   * tries again). `0` turns background reconnects off. @default 10
   */
  readonly maxAttempts?: number;
}
sameKeys<ReconnectOptions>()(reconnectOptionsSchema);

/** Tuning shared by every journal kind. */
export interface JournalTuning {
  /** How long completed and not-sent records and receipts are kept. @default 86400000 (24 h) */
  readonly retentionMs?: number;
  /** In-progress expiry of a key whose holder went silent. @default 600000 (10 min) */
  readonly inProgressTtlMs?: number;
}

/** Where {@link McpRuntime} journals idempotency keys and receipts (DESIGN §13). */
export type RuntimeJournalOptions =
  | (JournalTuning & {
      /** The durable SQLite journal file (created when missing). */
      readonly path: string;
      /** See `SqliteJournalOptions.synchronous`. @default 'full' */
      readonly synchronous?: 'full' | 'normal';
      /**
       * How long a journal operation waits (without blocking the event loop) for another process
       * holding the file's lock, then fails `JOURNAL_BUSY`; see `SqliteJournalOptions.busyTimeoutMs`.
       * @default 5000
       */
      readonly busyTimeoutMs?: number;
      /** The SQLite library; see `SqliteJournalOptions.driver`. @default 'auto' */
      readonly driver?: JournalDriverOption;
    })
  | (JournalTuning & {
      /** Any store (for example a shared database); the runtime closes it on `close()`. */
      readonly store: JournalStore;
    });
sameKeys<RuntimeJournalOptions>()(journalOptionsSchema);

/** Options of {@link McpRuntime.open}. */
export interface McpRuntimeOptions {
  /** Policy epoch in force at start. @default 0 */
  readonly policyEpoch?: number;
  /**
   * Approval policy for servers whose configuration sets no `approval` (see `ApprovalMode`).
   * @default "unproven-writes"
   */
  readonly approval?: ApprovalMode;
  /** How long a capture waits, once per ConnectionSet, for optional servers still starting. @default 1000 */
  readonly optionalGraceMs?: number;
  /** Quiet period after a `list_changed` before the hard refresh runs. @default 100 */
  readonly listChangedDebounceMs?: number;
  /** Schema validation options for every catalog (`server` is filled in). */
  readonly validation?: Omit<ValidationOptions, 'server' | 'validatorCache' | 'pageIndex'>;
  /** Starts connections. @default stdio child processes / Streamable HTTP through the SDK */
  readonly connect?: ServerConnector;
  /** Backoff of the background reconnects after a Streamable HTTP session was lost. */
  readonly reconnect?: ReconnectOptions;
  /** Receives every {@link RuntimeEvent}. */
  readonly onEvent?: (event: RuntimeEvent) => void;
  /**
   * Answers a server's `sampling/createMessage` (for example with your own model call).
   * @default refuse with a JSON-RPC error saying the application does not sample
   */
  readonly onSampling?: ClientHandlers['onSampling'];
  /** Answers a server's `elicitation/create` (ask the user). @default `{ action: "decline" }` */
  readonly onElicitation?: ClientHandlers['onElicitation'];
  /**
   * The execution journal: `{ path }` opens the durable SQLite journal, `{ store }` uses any
   * {@link JournalStore}. @default the configuration's `journal`, else an in-memory journal
   */
  readonly journal?: RuntimeJournalOptions;
  /**
   * The timers every runtime-owned wait uses: the `list_changed` debounce, the reconnect backoff
   * and the capture's optional-server grace (request timeouts belong to the SDK request). Tests
   * inject a fake clock to drive them without waiting. @default the real `setTimeout`,
   * `clearTimeout` and `Date.now`
   */
  readonly clock?: RuntimeClock;
  /**
   * The shared PostgreSQL fleet store (DESIGN §15): a `postgres://` URL or `FleetOptions`. With it,
   * the registry pointer, the policy, the execution journal and the receipts live in that database
   * (`journal` then only tunes retention and expiry). @default the configuration's `store`, else none
   */
  readonly store?: StoreOption;
  /**
   * The application's part of an OAuth authorization code login (DESIGN §16): called with the
   * authorization URL when a server with `"auth": { "type": "oauth" }` needs a login, it sends the
   * user there and resolves with the callback URL. Without it, such a server with no usable stored
   * login fails `AUTH_REQUIRED` naming the `stepbind login` command that fixes it.
   * @default none
   */
  readonly authorize?: AuthorizeHook;
  /**
   * Where OAuth logins and client registrations are kept, keyed by (issuer, resource, client id).
   * @default the per-user file store under the user's state directory (`openDefaultTokenStore`)
   */
  readonly tokenStore?: TokenStore;
  /**
   * The redirect URI of the authorization code flow (the `authorize` hook's callback comes back
   * to it). @default 'http://127.0.0.1:33418/callback' (`DEFAULT_REDIRECT_URI`)
   */
  readonly redirectUri?: string;
  /**
   * The persistent catalog cache (DESIGN §19.1): `{ path }` keeps published catalogs in that JSON
   * file (keyed by server, connection identity, audience, principal and tool filter; never a
   * secret) for the next process to start from; `false` turns a configured one off. The path in
   * use is `status().cache.path`. @default the configuration's `cache`, else none
   */
  readonly cache?: CatalogCacheOption;
  /** Cancels `open`. */
  readonly signal?: AbortSignal;
}
sameKeys<McpRuntimeOptions>()(runtimeOptionsSchema);
sameKeys<NonNullable<McpRuntimeOptions['validation']>>()(validationOptionsSchema);

/** Options of {@link McpRuntime.captureBinding}. */
export interface CaptureOptions {
  /** Servers that must be bound in this step, on top of those configured `required`. */
  readonly requiredServers?: readonly string[];
  /** Cancels the refresh or grace wait. */
  readonly signal?: AbortSignal;
  /** Step identifier echoed in receipts. @default a counter: "step-1", "step-2"... */
  readonly stepId?: string;
}
sameKeys<CaptureOptions>()(captureOptionsSchema);

/** Status of one server in {@link McpRuntime.status}. */
export interface ServerStatus {
  readonly name: string;
  readonly required: boolean;
  /**
   * `reconnecting`: its HTTP session was lost and a new one is being opened (`error` says why);
   * `failed` is also used once the background reconnects gave up; `closing` from the runtime's
   * `close()` until it resolved, `closed` after (or when its connection closed).
   */
  readonly state: 'ready' | 'starting' | 'reconnecting' | 'failed' | 'closing' | 'closed';
  readonly generation?: number;
  readonly revision?: number;
  readonly catalogState?: string;
  readonly tools?: number;
  readonly pid?: number;
  /**
   * The protocol era the live connection speaks: `modern` (2026-07-28, probed with
   * `server/discover`) or `legacy` (an `initialize` session). Set while a connection exists.
   */
  readonly era?: ProtocolEra;
  /** The protocol version of the live connection (`2026-07-28`, `2025-11-25`, ...), when known. */
  readonly protocolVersion?: string;
  /**
   * The wire transport of the live connection: `stdio`, `http` (Streamable HTTP) or `sse` (the
   * legacy HTTP+SSE transport, by `type: "sse"` or after Streamable HTTP's first POST was refused
   * with 400, 404 or 405). Set while a connection exists.
   */
  readonly transport?: 'stdio' | 'http' | 'sse';
  readonly error?: { readonly code: string; readonly message: string };
  /** Reconnect attempts made since the session was lost. */
  readonly reconnectAttempts?: number;
  /** How the server's requests are authorized (an HTTP server with `auth`); never a secret. */
  readonly auth?: ServerAuthStatus;
  /**
   * Where the server's latest discovery stands in the catalog state machine (DESIGN §5):
   * `DISCOVERING`/`VALIDATING` while a listing runs, the published catalog's state after one
   * succeeded, `INCOMPLETE` (the listing broke off: timeout, lost connection, server error) or
   * `QUARANTINED` (the catalog itself is invalid) with the reason. A failed re-list of a server
   * that still serves its previous catalog shows here while `catalogState` keeps that catalog's.
   */
  readonly discovery?: DiscoveryStatus;
  /**
   * Modern era only: whether the published listing is fresh by its pages' `ttlMs` (a dirty refresh
   * would keep it without a request), for how long, and its `cacheScope` (DESIGN §10.1).
   */
  readonly listing?: {
    readonly fresh: boolean;
    readonly expiresInMs: number;
    readonly scope: 'public' | 'private';
    /**
     * When not fresh, why: `not-cacheable` (a page without `ttlMs` or with 0), `expired`,
     * `list-changed`, `policy-epoch`, `config` (tool filter or limits changed), `audience`,
     * `principal` (credentials of a `private` listing), `connection` (not live).
     */
    readonly reason?:
      | 'not-cacheable'
      | 'expired'
      | 'list-changed'
      | 'policy-epoch'
      | 'config'
      | 'audience'
      | 'principal'
      | 'connection';
  };
}

/** The authorization of one server in {@link ServerStatus}: no token, no secret. */
export interface ServerAuthStatus {
  /** The `auth.type` of the server entry. */
  readonly type: 'bearer' | 'oauth';
  /** For OAuth: whether the server is logged in (see `AuthStatus.state`), once asked. */
  readonly state?: AuthStatus['state'];
  /** For OAuth: who the tokens act for (`issuer + ' ' + subject`), when logged in. */
  readonly principal?: string;
  /** For OAuth: the authorization server's issuer, when known. */
  readonly issuer?: string;
}

/** A snapshot of the runtime's state, for dashboards and tests. */
export interface RuntimeStatus {
  /** True from the first `close()` on. */
  readonly closed: boolean;
  /** `open`; `closing` while `close()` runs; `closed` once it resolved. */
  readonly state: 'open' | 'closing' | 'closed';
  readonly dirty: boolean;
  readonly setId: number;
  readonly liveSets: number;
  readonly liveConnections: number;
  readonly servers: readonly ServerStatus[];
  /** The execution journal in use: where it lives and, for SQLite, on which library. */
  readonly journal: JournalStatus;
  /**
   * The catalog cache in use (the `cache` option, else the configuration's): its absolute path.
   * Absent when the runtime has none.
   */
  readonly cache?: { readonly path: string };
}
