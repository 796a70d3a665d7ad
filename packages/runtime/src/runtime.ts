import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Mutex } from 'async-mutex';
import PQueue from 'p-queue';
import {
  acquireMutex,
  assignModelNames,
  modelToolOf,
  CallJournal,
  CatalogError,
  CatalogRegistry,
  CatalogSlot,
  createBinding,
  ErrorCode,
  MemoryJournalStore,
  RuntimeError,
  SchemaValidatorCache,
  StepbindError,
  type ApprovalMode,
  type BindingView,
  type BoundServer,
  type BoundTool,
  type CallPolicy,
  type CatalogSnapshot,
  type JournalRecord,
  type JournalStore,
  type LeftOutServer,
  type McpBinding,
  type ModelTool,
  type ResolveInput,
  type ServerIdentity,
  type UnenforcedPattern,
  type ValidationOptions,
} from '@stepbind/binding';
import type { ClientHandlers } from './client-capabilities.js';
import { parseConfig, type RuntimeConfig, type ServerConfig } from './config.js';
import { discoverSnapshot, type DiscoveryProgress } from './discover.js';
import { createDebug } from './log.js';
import { identityKeyOf, identityOf } from './identity.js';
import type { SessionLoss } from './http-session.js';
import { openSqliteJournal } from './journal/sqlite.js';
import type { SdkConnection, ServerLogMessage } from './sdk.js'; // era: (connectServer)
import { createEraConnector, type AnyConnection } from './era/connect.js'; // era:

/** Starts a connection to one configured server. Replaceable for tests (in-memory servers). */
export type ServerConnector = (
  name: string,
  config: ServerConfig,
  options: { readonly signal: AbortSignal },
) => Promise<SdkConnection>;

/** Everything the runtime reports as it works. Listeners must not throw. */
export type RuntimeEvent =
  | {
      readonly type: 'server-ready';
      readonly server: string;
      readonly generation: number;
      readonly tools: number;
    }
  | {
      readonly type: 'server-failed';
      readonly server: string;
      readonly required: boolean;
      readonly error: StepbindError;
    }
  | { readonly type: 'set-published'; readonly setId: number; readonly reasons: readonly string[] }
  | { readonly type: 'refresh-failed'; readonly error: StepbindError }
  | { readonly type: 'list-changed'; readonly server: string }
  | {
      readonly type: 'catalog-swapped';
      readonly server: string;
      readonly generation: number;
      readonly revision: number;
      readonly cause: 'hard-refresh' | 'refresh' | 'reconnect';
    }
  | { readonly type: 'hard-refresh-failed'; readonly server: string; readonly error: StepbindError }
  | { readonly type: 'connection-closed'; readonly server: string; readonly expected: boolean }
  | { readonly type: 'connection-error'; readonly server: string; readonly error: Error }
  | {
      /**
       * A catalog was published with schema patterns stepbind cannot run in linear time
       * (backreferences, lookaround...): calls do not enforce them; the server still should.
       */
      readonly type: 'patterns-unenforced';
      readonly server: string;
      readonly generation: number;
      readonly patterns: readonly ({ readonly tool: string } & UnenforcedPattern)[];
    }
  | ({ readonly type: 'discovery-page' } & DiscoveryProgress)
  | { readonly type: 'server-stderr'; readonly server: string; readonly line: string }
  | ({ readonly type: 'server-log'; readonly server: string } & ServerLogMessage)
  | {
      /** A Streamable HTTP session ended (see {@link SessionLoss}); a reconnect follows. */
      readonly type: 'session-lost';
      readonly server: string;
      readonly reason: SessionLoss['reason'];
      readonly httpStatus?: number;
      readonly message: string;
    }
  | {
      /** A new session replaced a lost one; `changed` says whether the catalog (and revision) moved. */
      readonly type: 'server-reconnected';
      readonly server: string;
      readonly attempt: number;
      readonly generation: number;
      readonly revision: number;
      readonly changed: boolean;
    }
  | {
      /** A reconnect attempt failed; `nextDelayMs` is absent when the runtime stopped trying. */
      readonly type: 'reconnect-failed';
      readonly server: string;
      readonly attempt: number;
      readonly error: StepbindError;
      readonly nextDelayMs?: number;
    }
  | {
      /**
       * Emitted once by `open`: the keys a dead process left `INTENT` (now `NOT_SENT`) or `SENT`
       * (now `OUTCOME_UNKNOWN`); empty when there were none.
       */
      readonly type: 'journal-recovered';
      readonly location: string;
      readonly records: readonly JournalRecord[];
    }
  | {
      /** The journal could not record the outcome of a call that was reported anyway. */
      readonly type: 'journal-error';
      readonly error: StepbindError;
    };

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
    })
  | (JournalTuning & {
      /** Any store (for example a shared database); the runtime closes it on `close()`. */
      readonly store: JournalStore;
    });

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
  /** Cancels `open`. */
  readonly signal?: AbortSignal;
}

/** Options of {@link McpRuntime.captureBinding}. */
export interface CaptureOptions {
  /** Servers that must be bound in this step, on top of those configured `required`. */
  readonly requiredServers?: readonly string[];
  /** Cancels the refresh or grace wait. */
  readonly signal?: AbortSignal;
  /** Step identifier echoed in receipts. @default a counter: "step-1", "step-2"... */
  readonly stepId?: string;
}

/** Status of one server in {@link McpRuntime.status}. */
export interface ServerStatus {
  readonly name: string;
  readonly required: boolean;
  /**
   * `reconnecting`: its HTTP session was lost and a new one is being opened (`error` says why);
   * `failed` is also used once the background reconnects gave up.
   */
  readonly state: 'ready' | 'starting' | 'reconnecting' | 'failed' | 'closed';
  readonly generation?: number;
  readonly revision?: number;
  readonly catalogState?: string;
  readonly tools?: number;
  readonly pid?: number;
  readonly error?: { readonly code: string; readonly message: string };
  /** Reconnect attempts made since the session was lost. */
  readonly reconnectAttempts?: number;
}

/** A snapshot of the runtime's state, for dashboards and tests. */
export interface RuntimeStatus {
  readonly closed: boolean;
  readonly dirty: boolean;
  readonly setId: number;
  readonly liveSets: number;
  readonly liveConnections: number;
  readonly servers: readonly ServerStatus[];
}

/** One live connection, its catalog slot and its background work. Shared by the sets that reuse it. */
class ServerSession {
  readonly name: string;
  /** The configuration in force; a refresh that reuses the connection carries the new one over. */
  config: ServerConfig;
  readonly identityKey: string;
  /** The live connection; replaced in place when a lost HTTP session is reconnected. */
  connection: AnyConnection; // era:
  identity: ServerIdentity;
  /** Serializes re-listings (hard refresh, refresh re-list) of this connection. */
  readonly listMutex = new Mutex();
  slot: CatalogSlot | undefined;
  /** Listing key of the published catalog (see `discoverSnapshot`). */
  listingKey: string | undefined;
  /** ConnectionSets holding this session. */
  refs = 0;
  debounce: ReturnType<typeof setTimeout> | undefined;
  debounceStarted = 0;
  /** Hard refreshes fired by list_changed and not finished yet (0 or 1: they never overlap). */
  hardRefreshes = 0;
  /** A list_changed arrived while a fired hard refresh was re-listing: run once more after it. */
  again = false;
  /** Resolves when no debounce is armed and no fired hard refresh is running. */
  idle: { promise: Promise<void>; resolve: () => void } | undefined;
  unsubscribe: (() => void)[] = [];
  closing: Promise<void> | undefined;
  /** Background reconnects after the connection's HTTP session was lost. */
  readonly recovery: Recovery = {
    attempts: 0,
    timer: undefined,
    running: false,
    lastError: undefined,
    gaveUp: false,
  };

  // era: the constructor takes an AnyConnection
  constructor(name: string, config: ServerConfig, identityKey: string, connection: AnyConnection) {
    this.name = name;
    this.config = config;
    this.identityKey = identityKey;
    this.connection = connection;
    this.identity = identityOf(name, config, connection);
  }

  get catalog(): CatalogSnapshot {
    if (this.slot === undefined) throw new Error(`session ${this.name} has no published catalog`);
    return this.slot.catalog;
  }
}

interface Recovery {
  attempts: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  running: boolean;
  lastError: StepbindError | undefined;
  gaveUp: boolean;
}

/** A new connection for a lost session, listed and validated, not installed yet. */
interface Reconnected {
  readonly connection: AnyConnection; // era:
  readonly identity: ServerIdentity;
  readonly snapshot: CatalogSnapshot | undefined;
  readonly listingKey: string | undefined;
  /** serverInfo or protocol version differ from the lost session's: publish (the registry decides). */
  readonly identityChanged: boolean;
}

type Entry =
  | { kind: 'ready'; readonly session: ServerSession }
  | { kind: 'starting'; readonly promise: Promise<void> }
  | { kind: 'failed'; readonly error: StepbindError };

/** An immutable set of server entries (only optional entries move from starting to ready/failed). */
class ConnectionSet {
  readonly id: number;
  readonly config: RuntimeConfig;
  readonly entries = new Map<string, Entry>();
  bindings = 0;
  retired = false;
  graceUsed = false;
  #view: BindingView | undefined;
  #unsubscribe: (() => void)[] = [];

  constructor(id: number, config: RuntimeConfig) {
    this.id = id;
    this.config = config;
  }

  /** Marks the cached view stale (a slot swapped or an optional server finished starting). */
  invalidate(): void {
    this.#view = undefined;
  }

  watch(session: ServerSession): void {
    if (session.slot !== undefined)
      this.#unsubscribe.push(session.slot.onSwap(() => this.invalidate()));
  }

  detach(): void {
    for (const off of this.#unsubscribe) off();
    this.#unsubscribe = [];
  }

  sessions(): ServerSession[] {
    const out: ServerSession[] = [];
    for (const entry of this.entries.values()) if (entry.kind === 'ready') out.push(entry.session);
    return out;
  }

  starting(): Promise<void>[] {
    const out: Promise<void>[] = [];
    for (const entry of this.entries.values())
      if (entry.kind === 'starting') out.push(entry.promise);
    return out;
  }

  /** The view shared by every capture until the next change: built once, O(tools). */
  view(approval: ApprovalMode): BindingView {
    this.#view ??= buildView(this, approval);
    return this.#view;
  }
}

function buildView(set: ConnectionSet, approval: ApprovalMode): BindingView {
  const servers: BoundServer[] = [];
  const leftOut: LeftOutServer[] = [];
  for (const [name, entry] of set.entries) {
    const required = set.config.servers.get(name)?.required ?? false;
    if (entry.kind === 'ready') {
      const session = entry.session;
      const slot = session.slot;
      if (slot === undefined) continue;
      if (session.connection.closed) {
        leftOut.push({ name, required, reason: 'closed' });
        continue;
      }
      servers.push(
        Object.freeze({
          name,
          slot,
          catalog: slot.catalog,
          revision: slot.revision,
          caller: session.connection,
          callTimeoutMs: session.config.callTimeoutMs,
          approval: session.config.approval ?? approval,
          ...(session.config.autoApprove.length === 0
            ? {}
            : { autoApprove: new Set(session.config.autoApprove) }),
          callLimits: session.config.limits,
          retryReads: session.config.retryReads,
        }),
      );
    } else if (entry.kind === 'starting') {
      leftOut.push({ name, required, reason: 'starting' });
    } else {
      leftOut.push({
        name,
        required,
        reason: 'failed',
        error: { code: entry.error.code, message: entry.error.message },
      });
    }
  }
  // Per-snapshot model names are unique within a server; a clash across servers (e.g. server "a__b"
  // tool "c" versus server "a" tool "b__c") falls back to one table over every server.
  const byModelName = new Map<string, BoundTool>();
  let clash = false;
  for (const server of servers) {
    for (const descriptor of server.catalog.tools) {
      if (byModelName.has(descriptor.modelName)) clash = true;
      byModelName.set(descriptor.modelName, {
        modelName: descriptor.modelName,
        server,
        descriptor,
      });
    }
  }
  const tools: ModelTool[] = [];
  if (clash) {
    byModelName.clear();
    const table = assignModelNames(
      servers.flatMap((s) => s.catalog.tools.map((t) => ({ server: s.name, tool: t.name }))),
    );
    for (const server of servers) {
      for (const descriptor of server.catalog.tools) {
        const modelName = table.forward(server.name, descriptor.name);
        if (modelName === undefined) throw new Error('model name table is missing a tool');
        byModelName.set(modelName, { modelName, server, descriptor });
      }
    }
  }
  for (const bound of byModelName.values()) {
    tools.push(modelToolOf(bound.modelName, bound.descriptor));
  }
  return Object.freeze({
    tools: Object.freeze(tools),
    byModelName,
    servers: Object.freeze(servers),
    leftOut: Object.freeze(leftOut),
  });
}

interface Candidate {
  readonly session: ServerSession;
  /** The configuration the candidate was discovered under; installed on the session at publication. */
  readonly config: ServerConfig;
  /** `undefined` when the re-list equals the published catalog (nothing to publish). */
  readonly snapshot: CatalogSnapshot | undefined;
  readonly listingKey: string | undefined;
  /** True for a new connection; false for a reused one that was re-listed. */
  readonly fresh: boolean;
  /** The registry generation this candidate was discovered against (its CAS expectation). */
  readonly expectedGeneration: number;
  /** For a reused session: releases its list mutex, held from the re-list until publication. */
  readonly release: () => void;
  /** For a reused session whose HTTP session was lost: the new connection to install. */
  readonly reconnect?: Reconnected;
}

/**
 * The MCP tool runtime: connects to configured servers, publishes immutable ConnectionSets of
 * validated catalogs through one {@link CatalogRegistry}, and hands each sampling step a frozen
 * {@link McpBinding}. See DESIGN §6 for refresh, capture and hard refresh semantics.
 */
export class McpRuntime {
  readonly #registry: CatalogRegistry;
  readonly #validatorCache = new SchemaValidatorCache();
  readonly #refreshMutex = new Mutex();
  readonly #options: McpRuntimeOptions;
  readonly #connect: (...a: Parameters<ServerConnector>) => Promise<AnyConnection>; // era:
  readonly #closeController = new AbortController();
  readonly #sessions = new Set<ServerSession>();
  readonly #liveSets = new Set<ConnectionSet>();
  readonly #revoked = new Set<string>();
  readonly #background = new Set<Promise<void>>();
  readonly #forceRestart = new Set<string>();
  #rebuilding = false;
  readonly #policy: {
    policyEpoch: number;
    isRevoked: CallPolicy['isRevoked'];
  };
  #config: RuntimeConfig;
  #current: ConnectionSet | undefined;
  #dirty = false;
  #dirtyReasons: string[] = [];
  #setCounter = 0;
  #stepCounter = 0;
  #closed = false;
  #closing: Promise<void> | undefined;
  #rebuilds = 0;
  readonly #journal: CallJournal;

  private constructor(config: RuntimeConfig, options: McpRuntimeOptions, journal: CallJournal) {
    this.#config = config;
    this.#options = options;
    const handlers: ClientHandlers = {
      ...(options.onSampling === undefined ? {} : { onSampling: options.onSampling }),
      ...(options.onElicitation === undefined ? {} : { onElicitation: options.onElicitation }),
    };
    this.#journal = journal;
    this.#connect = options.connect ?? createEraConnector({ handlers }); // era:
    this.#registry = new CatalogRegistry({ policyEpoch: options.policyEpoch ?? 0 });
    this.#policy = {
      policyEpoch: options.policyEpoch ?? 0,
      isRevoked: (server, tool) => this.#revoked.has(`${server}\u0000${tool}`),
    };
  }

  /**
   * Starts every configured server (bounded parallelism), enumerates and validates each catalog and
   * publishes the first ConnectionSet. Optional servers may still be starting when it resolves.
   *
   * Opens the journal first (the configured one, or in memory) and recovers the keys a dead
   * process left in progress (a `journal-recovered` event lists them).
   *
   * @throws ConfigError `INVALID_CONFIG` for a bad configuration; JournalError `JOURNAL_CORRUPT`,
   *   `JOURNAL_VERSION` or `JOURNAL_UNAVAILABLE` for a journal that cannot be used (nothing was
   *   started); RuntimeError `REQUIRED_SERVERS_FAILED` listing every required server that failed
   *   and why (all started servers are closed again).
   */
  static async open(config: unknown, options: McpRuntimeOptions = {}): Promise<McpRuntime> {
    const parsed = isRuntimeConfig(config) ? config : parseConfig(config);
    const journal = openJournal(options.journal ?? parsed.journal);
    let recovered: readonly JournalRecord[];
    try {
      recovered = await journal.recover();
      await journal.prune();
    } catch (error) {
      await closeJournal(journal);
      throw error;
    }
    const runtime = new McpRuntime(parsed, options, journal);
    runtime.#emit({
      type: 'journal-recovered',
      location: journal.store.location,
      records: recovered,
    });
    runtime.#dirty = true;
    runtime.#dirtyReasons.push('open');
    try {
      await runtime.refreshIfDirty(options.signal === undefined ? {} : { signal: options.signal });
    } catch (error) {
      await runtime.close();
      throw error;
    }
    return runtime;
  }

  /** The registry every catalog enters through (read-only use). */
  get registry(): CatalogRegistry {
    return this.#registry;
  }

  /** The execution journal: records by key (`get`), `verify()` of the receipts chain, `prune()`. */
  get journal(): CallJournal {
    return this.#journal;
  }

  /**
   * Records a human or application decision about an `OUTCOME_UNKNOWN` idempotency key (see
   * `CallJournal.resolve`): `ran` makes a repeat return the given result, `not-run` lets it run.
   *
   * @throws CallError `IDEMPOTENCY_IN_PROGRESS`, `IDEMPOTENCY_CONFLICT`; JournalError.
   */
  resolve(key: string, input: ResolveInput): Promise<JournalRecord> {
    return this.#journal.resolve(key, input);
  }

  /** How many ConnectionSets were built (for tests and benchmarks). */
  get rebuilds(): number {
    return this.#rebuilds;
  }

  /** True when a refresh is pending. */
  get dirty(): boolean {
    return this.#dirty;
  }

  /** Records that the next capture must rebuild the ConnectionSet first. */
  markDirty(reason: string): void {
    this.#dirty = true;
    this.#dirtyReasons.push(reason);
  }

  /**
   * Replaces the configuration and marks the runtime dirty; the next refresh or capture reuses
   * connections whose identity is unchanged and starts the rest.
   *
   * @throws ConfigError for an invalid configuration (nothing changes).
   */
  updateConfig(config: unknown): void {
    this.#ensureOpen();
    this.#config = isRuntimeConfig(config) ? config : parseConfig(config);
    this.markDirty('config');
  }

  /**
   * Raises the policy epoch. Bindings captured before are refused at call time (`TOOL_DENIED`), and
   * the next refresh re-publishes every catalog under the new epoch.
   */
  setPolicyEpoch(epoch: number): void {
    this.#registry.setPolicyEpoch(epoch);
    this.#policy.policyEpoch = epoch;
    this.markDirty('policy-epoch');
  }

  /** Revokes one tool: calls to it are refused from now on, also from bindings already captured. */
  revokeTool(server: string, tool: string): void {
    this.#revoked.add(`${server}\u0000${tool}`);
  }

  /**
   * Accepts that a server's identity (serverInfo, protocol version) changed: its registry entry is
   * retired so the next refresh may publish the new identity.
   */
  acceptIdentityChange(server: string): void {
    this.#registry.retireServer(server);
    // Its registry entry is gone: the next refresh starts a fresh connection and publishes anew.
    this.#forceRestart.add(server);
    this.markDirty(`identity:${server}`);
  }

  /**
   * If dirty, rebuilds and publishes a new ConnectionSet (serialized by a one-permit semaphore; loops
   * while dirtied again meanwhile). A caller that waited while another published returns without
   * work. A failed or cancelled refresh publishes nothing and leaves the flag set.
   *
   * @returns true when this call published at least one set.
   * @throws RuntimeError `REQUIRED_SERVERS_FAILED`, `ABORTED`, `RUNTIME_CLOSED`.
   */
  async refreshIfDirty(options: { readonly signal?: AbortSignal } = {}): Promise<boolean> {
    this.#ensureOpen();
    if (!this.#dirty) return false;
    const release = await acquireMutex(this.#refreshMutex, options.signal);
    try {
      let published = false;
      while (this.#dirty && !this.#closed) {
        const reasons = this.#dirtyReasons;
        this.#dirty = false;
        this.#dirtyReasons = [];
        try {
          await this.#rebuild(reasons, options.signal);
          published = true;
        } catch (error) {
          this.#dirty = true;
          this.#dirtyReasons.unshift(...reasons);
          const mapped = toStepbindError(error);
          this.#emit({ type: 'refresh-failed', error: mapped });
          throw mapped;
        }
      }
      return published;
    } finally {
      release();
    }
  }

  /**
   * Captures the binding of one sampling step: refreshes first if dirty, gives optional servers
   * still starting one bounded grace per ConnectionSet, then freezes the current view. O(servers).
   *
   * @throws RuntimeError `SERVER_NOT_READY` when a required server is not bound; refresh errors.
   */
  async captureBinding(options: CaptureOptions = {}): Promise<McpBinding> {
    this.#ensureOpen();
    const signalOption = options.signal === undefined ? {} : { signal: options.signal };
    let set: ConnectionSet | undefined;
    // A refresh may publish a new set while this capture waits (refresh, grace): then start over,
    // so a step never binds a set that was superseded (and perhaps drained) meanwhile.
    for (let attempt = 0; ; attempt++) {
      if (this.#dirty) await this.refreshIfDirty(signalOption);
      set = this.#current;
      if (set === undefined) throw closedError();
      if (!set.graceUsed) {
        set.graceUsed = true;
        const starting = set.starting();
        if (starting.length > 0) await this.#grace(starting, options.signal);
      }
      this.#ensureOpen();
      if (set === this.#current || attempt >= 3) break;
    }
    if (set.retired)
      throw new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        'The tools kept changing while this step was captured; capture again.',
      );
    const view = set.view(this.#options.approval ?? 'unproven-writes');
    const required = new Set(options.requiredServers ?? []);
    for (const [name, cfg] of set.config.servers) if (cfg.required) required.add(name);
    for (const name of required) {
      if (view.servers.some((s) => s.name === name)) continue;
      const left = view.leftOut.find((s) => s.name === name);
      throw new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        left === undefined
          ? `Server "${name}" is not configured, so this step cannot require it.`
          : `Required server "${name}" is not ready (${left.reason}${left.error === undefined ? '' : `: ${left.error.message}`}). Retry the step; a refresh reconnects it.`,
        { detail: { server: name, reason: left?.reason ?? 'not-configured' } },
      );
    }
    const bound = set;
    bound.bindings++;
    // Every catalog this step saw stays readable (not RETIRED) until the step is released.
    const holds = view.servers.map((s) =>
      // A catalog retired by acceptIdentityChange still serves until the next refresh; nothing to hold.
      this.#registry.lifecycleOf(s.catalog) === 'RETIRED'
        ? () => undefined
        : this.#registry.acquire(s.catalog),
    );
    const stepId = options.stepId ?? `step-${++this.#stepCounter}`;
    return createBinding(view, {
      stepId,
      policy: this.#policy,
      journal: this.#journal,
      onJournalError: (error) =>
        this.#emit({ type: 'journal-error', error: toStepbindError(error) }),
      onDrained: () => {
        for (const release of holds) release();
        bound.bindings--;
        this.#maybeDrain(bound);
      },
    });
  }

  /**
   * Re-lists one server on its current connection (outside the lock), validates, then takes the
   * revision write lock, swaps the catalog and increments the revision, so bindings captured before
   * are stale. An unchanged catalog changes nothing.
   *
   * When the server's HTTP session was lost, it opens a new session first and re-lists on that
   * (the revision moves only if the catalog changed).
   *
   * @returns true when the catalog changed.
   * @throws CatalogError from discovery or publication (nothing changes); RuntimeError
   *   `SERVER_NOT_READY` when the server has no live connection, `SERVER_START_FAILED` when a lost
   *   session could not be reopened.
   */
  async hardRefresh(
    server: string,
    options: { readonly signal?: AbortSignal } = {},
  ): Promise<boolean> {
    this.#ensureOpen();
    const entry = this.#current?.entries.get(server);
    if (
      entry?.kind !== 'ready' ||
      (entry.session.connection.closed && entry.session.connection.lost === undefined)
    ) {
      throw new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        `Server "${server}" has no live connection to re-list; refresh first.`,
        {
          detail: { server },
        },
      );
    }
    return this.#hardRefreshSession(entry.session, options.signal);
  }

  /**
   * Resolves when no debounced or running hard refresh is left (a quiet point for tests and demos).
   */
  async whenIdle(): Promise<void> {
    for (;;) {
      const pending = [...this.#sessions]
        .map((s) => s.idle?.promise)
        .filter((p): p is Promise<void> => p !== undefined);
      if (pending.length === 0) return;
      await Promise.all(pending);
    }
  }

  /** Current state of every configured server. */
  status(): RuntimeStatus {
    const set = this.#current;
    const servers: ServerStatus[] = [];
    for (const [name, cfg] of this.#config.servers) {
      const entry = set?.entries.get(name);
      if (entry === undefined) {
        servers.push({ name, required: cfg.required, state: 'starting' });
      } else if (entry.kind === 'ready') {
        const s = entry.session;
        const loss = s.connection.lost;
        servers.push({
          name,
          required: cfg.required,
          state:
            loss !== undefined
              ? s.recovery.gaveUp
                ? 'failed'
                : 'reconnecting'
              : s.connection.closed
                ? 'closed'
                : 'ready',
          generation: s.slot?.catalog.generation ?? 0,
          revision: s.slot?.revision ?? 0,
          catalogState: s.slot?.catalog.state ?? 'DISCOVERING',
          tools: s.slot?.catalog.tools.length ?? 0,
          ...(s.connection.pid === undefined ? {} : { pid: s.connection.pid }),
          ...(loss === undefined
            ? {}
            : {
                error: {
                  code: ErrorCode.CONNECTION_CLOSED,
                  message: lossMessage(loss, s.recovery),
                },
                reconnectAttempts: s.recovery.attempts,
              }),
        });
      } else if (entry.kind === 'starting') {
        servers.push({ name, required: cfg.required, state: 'starting' });
      } else {
        servers.push({
          name,
          required: cfg.required,
          state: 'failed',
          error: { code: entry.error.code, message: entry.error.message },
        });
      }
    }
    return Object.freeze({
      closed: this.#closed,
      dirty: this.#dirty,
      setId: set?.id ?? 0,
      liveSets: this.#liveSets.size,
      liveConnections: [...this.#sessions].filter((s) => !s.connection.closed).length,
      servers: Object.freeze(servers),
    });
  }

  /** Pids of every child process the runtime currently owns (stdio servers). */
  pids(): number[] {
    return [...this.#sessions]
      .map((s) => s.connection.pid)
      .filter((p): p is number => p !== undefined);
  }

  /**
   * Closes every connection of every set, cancels refreshes and debounced work, and waits for child
   * processes to exit. Pending calls fail (`CONNECTION_CLOSED` if not sent yet, `OUTCOME_UNKNOWN`
   * if sent); once every run has journaled its outcome the journal closes. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#doClose();
    return this.#closing;
  }

  /** Same as {@link close}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #doClose(): Promise<void> {
    this.#closed = true;
    this.#closeController.abort(closedError());
    for (const set of this.#liveSets) set.detach();
    this.#liveSets.clear();
    this.#current = undefined;
    for (const session of this.#sessions) stopRecovery(session);
    await this.#refreshMutex.waitForUnlock();
    await Promise.allSettled([...this.#background]);
    await Promise.all([...this.#sessions].map((s) => this.#closeSession(s)));
    await closeJournal(this.#journal);
  }

  #ensureOpen(): void {
    if (this.#closed) throw closedError();
  }

  /** A `patterns-unenforced` event for a published catalog that has any such pattern. */
  #reportUnenforced(server: string, catalog: CatalogSnapshot): void {
    let patterns: ({ readonly tool: string } & UnenforcedPattern)[] | undefined;
    for (const tool of catalog.tools) {
      for (const p of tool.unenforcedPatterns) (patterns ??= []).push({ tool: tool.name, ...p });
    }
    if (patterns !== undefined) {
      this.#emit({ type: 'patterns-unenforced', server, generation: catalog.generation, patterns });
    }
  }

  #emit(event: RuntimeEvent): void {
    if (debugEvents.enabled) debugEvents(describeEvent(event));
    try {
      this.#options.onEvent?.(event);
    } catch {
      // A listener's failure must not break the runtime's bookkeeping.
    }
  }

  async #grace(starting: Promise<void>[], signal: AbortSignal | undefined): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const abortSignals = [this.#closeController.signal, signal].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    try {
      await Promise.race([
        Promise.allSettled(starting),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, this.#options.optionalGraceMs ?? 1000);
          onAbort = resolve;
          for (const s of abortSignals) s.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (onAbort !== undefined)
        for (const s of abortSignals) s.removeEventListener('abort', onAbort);
    }
    if (signal?.aborted === true) throw abortedError(signal.reason);
  }

  async #rebuild(reasons: readonly string[], signal: AbortSignal | undefined): Promise<void> {
    this.#rebuilding = true;
    try {
      await this.#rebuildOnce(reasons, signal);
    } finally {
      this.#rebuilding = false;
    }
  }

  async #rebuildOnce(reasons: readonly string[], signal: AbortSignal | undefined): Promise<void> {
    this.#rebuilds++;
    const config = this.#config;
    const old = this.#current;
    const controller = new AbortController();
    const abort = (): void =>
      controller.abort(signal?.reason ?? this.#closeController.signal.reason);
    signal?.addEventListener('abort', abort, { once: true });
    this.#closeController.signal.addEventListener('abort', abort, { once: true });
    if (signal?.aborted === true || this.#closed) abort();
    const set = new ConnectionSet(++this.#setCounter, config);
    const queue = new PQueue({ concurrency: config.concurrency });
    const candidates: Candidate[] = [];
    const failures: { server: string; error: StepbindError }[] = [];
    const background: { name: string; task: (signal: AbortSignal) => Promise<Candidate> }[] = [];
    let published = false;
    let startBackground: () => void = () => undefined;
    const backgroundGate = new Promise<void>((resolve) => {
      startBackground = resolve;
    });
    try {
      await Promise.all(
        [...config.servers].map(async ([name, cfg]) => {
          const key = identityKeyOf(cfg);
          const prior = old?.entries.get(name);
          const reusable =
            prior?.kind === 'ready' &&
            prior.session.identityKey === key &&
            // A lost HTTP session is reused too: the re-list reconnects it in place.
            (!prior.session.connection.closed || prior.session.connection.lost !== undefined) &&
            !this.#forceRestart.has(name)
              ? prior.session
              : undefined;
          const task = (taskSignal: AbortSignal): Promise<Candidate> =>
            queue.add(() =>
              reusable === undefined
                ? this.#startSession(name, cfg, key, taskSignal)
                : this.#relistReused(reusable, cfg, taskSignal),
            );
          if (!cfg.required && reusable === undefined) {
            background.push({ name, task });
            return;
          }
          try {
            candidates.push(await task(controller.signal));
          } catch (error) {
            const mapped = toStepbindError(error);
            if (cfg.required) failures.push({ server: name, error: mapped });
            else set.entries.set(name, { kind: 'failed', error: mapped });
            this.#emit({
              type: 'server-failed',
              server: name,
              required: cfg.required,
              error: mapped,
            });
          }
        }),
      );
      if (controller.signal.aborted) throw abortedError(controller.signal.reason);
      if (failures.length > 0) {
        throw new RuntimeError(
          ErrorCode.REQUIRED_SERVERS_FAILED,
          `${failures.length} required server(s) failed; nothing was published ${this.#current === undefined ? 'and the runtime did not open (fix the servers below, or mark them "required": false, and open again)' : 'and the previous tools stay in service'}:\n${failures
            .map((f) => `  - ${f.server}: ${f.error.code}: ${f.error.message}`)
            .join('\n')}`,
          {
            detail: {
              servers: failures.map((f) => f.server),
              failures: failures.map((f) => ({
                server: f.server,
                code: f.error.code,
                message: f.error.message,
              })),
            },
          },
        );
      }
      // Optional servers that were not reusable start in the background of the published set; their
      // entries exist from publication on, so a capture sees them as starting, in config order.
      for (const { name, task } of background) {
        const promise = backgroundGate
          .then(() => {
            if (!published) throw closedError();
            return task(this.#closeController.signal);
          })
          .then(
            (candidate) => this.#adoptLate(set, name, candidate),
            (error: unknown) => {
              if (!published) return;
              const mapped = toStepbindError(error);
              set.entries.set(name, { kind: 'failed', error: mapped });
              set.invalidate();
              this.#emit({ type: 'server-failed', server: name, required: false, error: mapped });
            },
          );
        set.entries.set(name, { kind: 'starting', promise });
        this.#background.add(promise);
        void promise.finally(() => this.#background.delete(promise));
      }
      await this.#publish(set, candidates, reasons, controller.signal);
      published = true;
    } catch (error) {
      controller.abort(error);
      // Background starts of an unpublished set are never begun.
      startBackground();
      for (const c of candidates) c.release();
      for (const c of candidates) if (c.fresh) await this.#closeSession(c.session);
      // A reconnect that was not installed leaves the session lost; its new connection goes.
      for (const c of candidates)
        if (c.reconnect !== undefined) await c.reconnect.connection.close();
      throw error;
    } finally {
      signal?.removeEventListener('abort', abort);
      this.#closeController.signal.removeEventListener('abort', abort);
    }
    startBackground();
  }

  async #startSession(
    name: string,
    cfg: ServerConfig,
    key: string,
    signal: AbortSignal,
  ): Promise<Candidate> {
    const expectedGeneration = this.#registry.current(name, cfg.audience)?.generation ?? 0;
    const connection = await this.#connect(name, cfg, { signal });
    const session = new ServerSession(name, cfg, key, connection);
    this.#sessions.add(session);
    try {
      const { snapshot, listingKey } = await this.#discover(session, cfg, signal);
      this.#watch(session);
      return {
        session,
        config: cfg,
        snapshot,
        listingKey,
        fresh: true,
        expectedGeneration,
        release: () => undefined,
      };
    } catch (error) {
      await this.#closeSession(session);
      throw error;
    }
  }

  async #relistReused(
    session: ServerSession,
    config: ServerConfig,
    signal: AbortSignal,
  ): Promise<Candidate> {
    const release = await acquireMutex(session.listMutex, signal);
    try {
      const expectedGeneration = session.catalog.generation;
      if (!session.connection.closed) {
        try {
          const { snapshot, listingKey } = await this.#discover(session, config, signal);
          return {
            session,
            config,
            snapshot,
            listingKey,
            fresh: false,
            expectedGeneration,
            release,
          };
        } catch (error) {
          // A session that ended during the re-list is reopened below; anything else fails.
          if (session.connection.lost === undefined || signal.aborted) throw error;
        }
      }
      let reconnect: Reconnected;
      try {
        reconnect = await this.#reconnectLocked(session, config, signal);
      } catch (error) {
        if (config.required || signal.aborted) throw error;
        // An optional server stays in the set, still reconnecting in the background.
        this.#emit({
          type: 'reconnect-failed',
          server: session.name,
          attempt: session.recovery.attempts,
          error: toStepbindError(error),
        });
        const carried = { snapshot: undefined, listingKey: undefined };
        return { session, config, ...carried, fresh: false, expectedGeneration, release };
      }
      return {
        session,
        config,
        snapshot: reconnect.snapshot,
        listingKey: reconnect.listingKey,
        fresh: false,
        expectedGeneration,
        release,
        reconnect,
      };
    } catch (error) {
      release();
      throw error;
    }
  }

  /**
   * Opens a new connection for `session` (whose HTTP session was lost) and lists it, holding the
   * session's list mutex. Nothing is installed; the connection is closed again on failure.
   */
  async #reconnectLocked(
    session: ServerSession,
    config: ServerConfig,
    signal: AbortSignal,
  ): Promise<Reconnected> {
    const connection = await this.#connect(session.name, config, { signal });
    try {
      const identity = identityOf(session.name, config, connection);
      const identityChanged = !sameServer(identity, session.identity);
      const { snapshot, listingKey } = await this.#discover(session, config, signal, {
        connection,
        identity,
        compare: !identityChanged,
      });
      return { connection, identity, snapshot, listingKey, identityChanged };
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  /**
   * Installs a reconnected session: if its catalog changed, publishes it and swaps it in under
   * the write lock (the revision moves, so steps captured before are stale); then the new
   * connection replaces the lost one. Holds the list mutex (the caller does).
   *
   * @returns true when the catalog changed.
   */
  async #installReconnected(
    session: ServerSession,
    r: Reconnected,
    signal: AbortSignal,
  ): Promise<boolean> {
    const slot = session.slot;
    if (slot === undefined) throw new Error(`session ${session.name} has no published catalog`);
    const snapshot = r.snapshot;
    const changed =
      snapshot !== undefined && (r.identityChanged || !this.#unchanged(session, snapshot));
    const writeRelease = changed ? await slot.lock.acquireWrite({ signal }) : undefined;
    try {
      if (this.#closed) throw closedError();
      if (changed) {
        const candidate: Candidate = {
          session,
          config: session.config,
          snapshot,
          listingKey: r.listingKey,
          fresh: false,
          expectedGeneration: slot.catalog.generation,
          release: () => undefined,
        };
        this.#checkPublishable(candidate, snapshot);
        slot.installLocked(
          this.#registry.publish(snapshot, publishOptions(this.#registry, candidate, snapshot)),
        );
      }
      this.#adopt(session, r);
    } finally {
      writeRelease?.();
    }
    if (changed) {
      this.#emit({
        type: 'catalog-swapped',
        server: session.name,
        generation: slot.catalog.generation,
        revision: slot.revision,
        cause: 'reconnect',
      });
      this.#reportUnenforced(session.name, slot.catalog);
    }
    this.#emitReconnected(session, changed);
    // The loss marked the runtime dirty; with the session back, nothing else may be pending.
    this.#dirtyReasons = this.#dirtyReasons.filter((r) => r !== `session-lost:${session.name}`);
    if (this.#dirtyReasons.length === 0) this.#dirty = false;
    return changed;
  }

  /** The new connection replaces the lost one; views are rebuilt so new steps bind it. */
  #adopt(session: ServerSession, r: Reconnected): void {
    const lost = session.connection;
    for (const off of session.unsubscribe) off();
    session.unsubscribe = [];
    session.connection = r.connection;
    session.identity = r.identity;
    if (r.listingKey !== undefined) session.listingKey = r.listingKey;
    session.recovery.lastError = undefined;
    session.recovery.gaveUp = false;
    if (session.recovery.timer !== undefined) clearTimeout(session.recovery.timer);
    session.recovery.timer = undefined;
    this.#watch(session);
    this.#invalidateViews();
    void lost.close();
  }

  #emitReconnected(session: ServerSession, changed: boolean): void {
    const attempt = session.recovery.attempts;
    session.recovery.attempts = 0;
    this.#emit({
      type: 'server-reconnected',
      server: session.name,
      attempt,
      generation: session.catalog.generation,
      revision: session.slot?.revision ?? 0,
      changed,
    });
  }

  #invalidateViews(): void {
    for (const set of this.#liveSets) set.invalidate();
    this.#current?.invalidate();
  }

  /** Starts the background reconnects of a session whose HTTP session was lost. */
  #startRecovery(session: ServerSession): void {
    const recovery = session.recovery;
    if (recovery.timer !== undefined || recovery.running) return;
    recovery.attempts = 0;
    recovery.lastError = undefined;
    // With background reconnects off, status says so: only a refresh, capture or hardRefresh reopens.
    recovery.gaveUp = (this.#options.reconnect?.maxAttempts ?? 10) <= 0;
    if (recovery.gaveUp) return;
    this.#scheduleRecovery(session, 0);
  }

  #scheduleRecovery(session: ServerSession, delayMs: number): void {
    if (this.#closed || session.closing !== undefined) return;
    session.recovery.timer = setTimeout(() => {
      session.recovery.timer = undefined;
      this.#attemptRecovery(session);
    }, delayMs);
  }

  #attemptRecovery(session: ServerSession): void {
    const recovery = session.recovery;
    // Only the current set's sessions are reconnected; one a refresh dropped is closing anyway.
    const inCurrent = [...(this.#current?.entries.values() ?? [])].some(
      (e) => e.kind === 'ready' && e.session === session,
    );
    if (this.#closed || session.closing !== undefined || !inCurrent) return;
    if (session.connection.lost === undefined) return;
    recovery.attempts++;
    recovery.running = true;
    const attempt = recovery.attempts;
    const run = this.#reconnectSession(session, this.#closeController.signal).then(
      () => {
        recovery.running = false;
      },
      (error: unknown) => {
        recovery.running = false;
        if (this.#closed || session.closing !== undefined) return;
        if (session.connection.lost === undefined) return;
        const mapped = toStepbindError(error);
        recovery.lastError = mapped;
        const {
          initialDelayMs = 250,
          maxDelayMs = 10_000,
          maxAttempts = 10,
        } = this.#options.reconnect ?? {};
        // A catalog or identity the registry refuses will not change by retrying.
        const nextDelayMs =
          attempt < maxAttempts && !(mapped instanceof CatalogError)
            ? Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(attempt - 1, 30))
            : undefined;
        if (nextDelayMs === undefined) recovery.gaveUp = true;
        this.#emit({
          type: 'reconnect-failed',
          server: session.name,
          attempt,
          error: mapped,
          ...(nextDelayMs === undefined ? {} : { nextDelayMs }),
        });
        if (nextDelayMs !== undefined) this.#scheduleRecovery(session, nextDelayMs);
      },
    );
    this.#background.add(run);
    void run.finally(() => this.#background.delete(run));
  }

  /**
   * Reconnects a lost session in place (new initialize, re-list, publish if changed).
   * @returns false when another path reconnected it first.
   */
  async #reconnectSession(session: ServerSession, signal: AbortSignal): Promise<boolean> {
    const release = await acquireMutex(session.listMutex, signal);
    try {
      if (!session.connection.closed) return false;
      await this.#reopen(session, signal);
      return true;
    } finally {
      release();
    }
  }

  /** Reconnect + install, holding the list mutex. @returns true when the catalog changed. */
  async #reopen(session: ServerSession, signal: AbortSignal): Promise<boolean> {
    const r = await this.#reconnectLocked(session, session.config, signal);
    try {
      return await this.#installReconnected(session, r, signal);
    } catch (error) {
      await r.connection.close();
      throw error;
    }
  }

  async #discover(
    session: ServerSession,
    config: ServerConfig,
    signal: AbortSignal,
    via?: {
      readonly connection: AnyConnection; // era:
      readonly identity: ServerIdentity;
      /** Whether an unchanged listing may skip validation (not when the identity changed). */
      readonly compare: boolean;
    },
  ): Promise<{ snapshot: CatalogSnapshot | undefined; listingKey: string | undefined }> {
    // An unchanged listing may skip validation only while the published catalog's epoch holds.
    const current = session.slot?.catalog;
    const previousListingKey =
      current !== undefined &&
      current.policyEpoch === this.#registry.policyEpoch &&
      via?.compare !== false
        ? session.listingKey
        : undefined;
    return discoverSnapshot(via?.connection ?? session.connection, {
      ...(previousListingKey === undefined ? {} : { previousListingKey }),
      // The first listing of a new connection has nothing to compare with; re-lists key theirs.
      keyListing: current !== undefined,
      name: session.name,
      config,
      identity: via?.identity ?? session.identity,
      policyEpoch: this.#registry.policyEpoch,
      ...(this.#options.validation === undefined ? {} : { validation: this.#options.validation }),
      validatorCache: this.#validatorCache,
      signal,
      onPage: (progress) => this.#emit({ type: 'discovery-page', ...progress }),
    });
  }

  /** True when `candidate` adds nothing over the session's published catalog. */
  #unchanged(session: ServerSession, candidate: CatalogSnapshot | undefined): boolean {
    if (candidate === undefined) return true;
    const current = session.slot?.catalog;
    return (
      current !== undefined &&
      current.pageRoot === candidate.pageRoot &&
      current.sourceRevision === candidate.sourceRevision &&
      current.policyEpoch === candidate.policyEpoch &&
      (current.state === 'ELIGIBLE') === (candidate.state === 'SNAPSHOT_PROVEN')
    );
  }

  /**
   * Publishes a whole set in one synchronous step: the registry CAS for every changed catalog, the
   * catalog swap of every reused slot (under write locks taken beforehand) and the pointer move.
   */
  async #publish(
    set: ConnectionSet,
    candidates: readonly Candidate[],
    reasons: readonly string[],
    signal: AbortSignal,
  ): Promise<void> {
    const changed = candidates.filter(
      (c): c is Candidate & { snapshot: CatalogSnapshot } =>
        c.snapshot !== undefined &&
        (c.fresh ||
          c.reconnect?.identityChanged === true ||
          !this.#unchanged(c.session, c.snapshot)),
    );
    const reusedChanged = changed.filter((c) => !c.fresh);
    const releases: (() => void)[] = [];
    try {
      for (const c of reusedChanged) {
        const slot = c.session.slot;
        if (slot !== undefined) releases.push(await slot.lock.acquireWrite({ signal }));
      }
      if (this.#closed) throw closedError();
      // Waiting for calls in flight can take long: a refresh cancelled meanwhile publishes nothing.
      if (signal.aborted) throw abortedError(signal.reason);
      // Check every precondition first so that either all catalogs publish or none does.
      for (const c of changed) this.#checkPublishable(c, c.snapshot);
      for (const c of changed) {
        const published = this.#registry.publish(
          c.snapshot,
          publishOptions(this.#registry, c, c.snapshot),
        );
        const slot = c.session.slot;
        if (slot === undefined) {
          c.session.slot = new CatalogSlot(c.session.name, published);
        } else {
          slot.installLocked(published);
        }
        this.#reportUnenforced(c.session.name, published);
        c.session.listingKey = c.listingKey;
        if (!c.fresh) {
          this.#emit({
            type: 'catalog-swapped',
            server: c.session.name,
            generation: published.generation,
            revision: c.session.slot?.revision ?? 0,
            cause: c.reconnect === undefined ? 'refresh' : 'reconnect',
          });
        }
      }
      for (const c of candidates) {
        // An unchanged re-list still leaves the key of the listing that stays published.
        if (c.listingKey !== undefined) c.session.listingKey = c.listingKey;
        set.entries.set(c.session.name, { kind: 'ready', session: c.session });
        c.session.refs++;
        // Timeouts and limits are not part of the identity: a reused connection takes the new ones.
        c.session.config = c.config;
        if (c.reconnect !== undefined) this.#adopt(c.session, c.reconnect);
        if (c.fresh) this.#forceRestart.delete(c.session.name);
        set.watch(c.session);
      }
      const ordered = [...set.config.servers.keys()]
        .filter((name) => set.entries.has(name))
        .map((name) => [name, set.entries.get(name)] as const);
      set.entries.clear();
      for (const [name, entry] of ordered) if (entry !== undefined) set.entries.set(name, entry);
      const previous = this.#current;
      this.#current = set;
      this.#liveSets.add(set);
      if (previous !== undefined) {
        previous.retired = true;
        this.#maybeDrain(previous);
      }
    } finally {
      for (const release of releases) release();
      for (const c of candidates) c.release();
    }
    for (const c of candidates) {
      if (c.reconnect !== undefined)
        this.#emitReconnected(c.session, (changed as readonly Candidate[]).includes(c));
    }
    for (const c of changed) {
      if (c.fresh) {
        this.#emit({
          type: 'server-ready',
          server: c.session.name,
          generation: c.session.catalog.generation,
          tools: c.session.catalog.tools.length,
        });
      }
    }
    this.#emit({ type: 'set-published', setId: set.id, reasons });
  }

  /** Throws what the registry would refuse for `c` (nothing changes), so a set publishes whole. */
  #checkPublishable(c: Candidate, snapshot: CatalogSnapshot): void {
    const conflict = this.#registry.check(snapshot, publishOptions(this.#registry, c, snapshot));
    if (conflict === undefined) return;
    if (conflict.detail['reason'] !== 'identity-changed') throw conflict;
    throw new CatalogError(
      ErrorCode.PUBLISH_CONFLICT,
      `${conflict.message} If the new identity is expected, call acceptIdentityChange("${c.session.name}").`,
      { detail: conflict.detail, cause: conflict },
    );
  }

  /** An optional server finished starting after its set was published: publish and adopt it. */
  #adoptLate(set: ConnectionSet, name: string, candidate: Candidate): void {
    const { session, snapshot } = candidate;
    // A refresh under way will start (or has started) its own connection for this server.
    if (set.retired || this.#closed || this.#current !== set || this.#rebuilding) {
      void this.#closeSession(session);
      return;
    }
    try {
      // Late starts are always new connections, so their listing was validated in full.
      if (snapshot === undefined) throw new Error(`late start of "${name}" has no snapshot`);
      this.#checkPublishable(candidate, snapshot);
      session.slot = new CatalogSlot(
        name,
        this.#registry.publish(snapshot, publishOptions(this.#registry, candidate, snapshot)),
      );
      session.listingKey = candidate.listingKey;
      this.#reportUnenforced(name, session.slot.catalog);
    } catch (error) {
      const mapped = toStepbindError(error);
      set.entries.set(name, { kind: 'failed', error: mapped });
      set.invalidate();
      void this.#closeSession(session);
      this.#emit({ type: 'server-failed', server: name, required: false, error: mapped });
      return;
    }
    session.refs++;
    set.entries.set(name, { kind: 'ready', session });
    set.watch(session);
    set.invalidate();
    this.#emit({
      type: 'server-ready',
      server: name,
      generation: session.catalog.generation,
      tools: session.catalog.tools.length,
    });
  }

  async #hardRefreshSession(
    session: ServerSession,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    const release = await acquireMutex(session.listMutex, signal);
    try {
      const slot = session.slot;
      if (slot === undefined) return false;
      const combined = combineSignals(signal, this.#closeController.signal);
      if (!session.connection.closed) {
        try {
          return await this.#relistLocked(session, slot, signal, combined);
        } catch (error) {
          // A session that ended during the re-list is reopened below; anything else fails.
          if (session.connection.lost === undefined || combined.aborted) throw error;
        }
      }
      if (session.connection.lost === undefined) {
        throw new RuntimeError(
          ErrorCode.SERVER_NOT_READY,
          `Server "${session.name}" has no live connection to re-list; refresh first.`,
          { detail: { server: session.name } },
        );
      }
      return await this.#reopen(session, combined);
    } finally {
      release();
    }
  }

  /** The hard refresh proper on a live connection, holding the list mutex. */
  async #relistLocked(
    session: ServerSession,
    slot: CatalogSlot,
    signal: AbortSignal | undefined,
    combined: AbortSignal,
  ): Promise<boolean> {
    const expectedGeneration = slot.catalog.generation;
    const { snapshot: candidate, listingKey } = await this.#discover(
      session,
      session.config,
      combined,
    );
    if (candidate === undefined || this.#unchanged(session, candidate)) {
      // The published catalog is this listing: remember its key so the next re-list can skip.
      if (listingKey !== undefined) session.listingKey = listingKey;
      return false;
    }
    const writeRelease = await slot.lock.acquireWrite(signal === undefined ? {} : { signal });
    let revision: number;
    let generation: number;
    try {
      if (this.#closed) throw closedError();
      const published = this.#registry.publish(candidate, { expectedGeneration });
      generation = published.generation;
      revision = slot.installLocked(published);
      session.listingKey = listingKey;
      this.#reportUnenforced(session.name, published);
    } finally {
      writeRelease();
    }
    this.#emit({
      type: 'catalog-swapped',
      server: session.name,
      generation,
      revision,
      cause: 'hard-refresh',
    });
    return true;
  }

  #watch(session: ServerSession): void {
    const connection = session.connection;
    const debounceMs = this.#options.listChangedDebounceMs ?? 100;
    const settle = (): void => {
      if (
        session.debounce === undefined &&
        session.hardRefreshes === 0 &&
        session.idle !== undefined
      ) {
        const { resolve } = session.idle;
        session.idle = undefined;
        resolve();
      }
    };
    // Trailing debounce, never postponed past 10 quiet periods by a steady stream.
    const arm = (now: number): void => {
      if (session.debounce === undefined) session.debounceStarted = now;
      else clearTimeout(session.debounce);
      const wait = Math.max(
        0,
        Math.min(debounceMs, session.debounceStarted + 10 * debounceMs - now),
      );
      session.debounce = setTimeout(fire, wait);
    };
    // At most one fired hard refresh runs and at most one waits (the armed debounce): a storm of
    // notifications during a slow re-list only marks it to run once more.
    const fire = (): void => {
      session.debounce = undefined;
      session.hardRefreshes++;
      session.again = false;
      this.#hardRefreshSession(session, undefined)
        .catch((error: unknown) => {
          if (!this.#closed) {
            this.#emit({
              type: 'hard-refresh-failed',
              server: session.name,
              error: toStepbindError(error),
            });
          }
        })
        .finally(() => {
          session.hardRefreshes--;
          if (session.again && !this.#closed && session.closing === undefined) {
            session.again = false;
            arm(Date.now());
          }
          settle();
        });
    };
    session.unsubscribe.push(
      connection.onListChanged(() => {
        if (this.#closed || session.closing !== undefined) return;
        this.#emit({ type: 'list-changed', server: session.name });
        if (session.idle === undefined) {
          let resolve: () => void = () => undefined;
          const promise = new Promise<void>((r) => {
            resolve = r;
          });
          session.idle = { promise, resolve };
        }
        if (session.hardRefreshes > 0) session.again = true;
        else arm(Date.now());
      }),
    );
    session.unsubscribe.push(
      connection.onError((error) => {
        this.#emit({ type: 'connection-error', server: session.name, error });
      }),
      connection.onStderr((line) => {
        this.#emit({ type: 'server-stderr', server: session.name, line });
      }),
      connection.onLog((message) => {
        this.#emit({ type: 'server-log', server: session.name, ...message });
      }),
    );
    session.unsubscribe.push(
      connection.onClose(() => {
        const expected = this.#closed || session.closing !== undefined;
        this.#emit({ type: 'connection-closed', server: session.name, expected });
        if (expected) return;
        this.#invalidateViews();
        const loss = connection.lost;
        if (loss === undefined) {
          this.markDirty(`connection-closed:${session.name}`);
          return;
        }
        this.#emit({
          type: 'session-lost',
          server: session.name,
          reason: loss.reason,
          ...(loss.httpStatus === undefined ? {} : { httpStatus: loss.httpStatus }),
          message: loss.message,
        });
        // The next capture reconnects at once; meanwhile the background tries with backoff.
        this.markDirty(`session-lost:${session.name}`);
        this.#startRecovery(session);
      }),
    );
  }

  #maybeDrain(set: ConnectionSet): void {
    if (!set.retired || set.bindings > 0 || !this.#liveSets.has(set)) return;
    this.#liveSets.delete(set);
    set.detach();
    for (const session of set.sessions()) {
      session.refs--;
      if (session.refs <= 0) void this.#closeSession(session);
    }
  }

  #closeSession(session: ServerSession): Promise<void> {
    session.closing ??= (async () => {
      if (session.debounce !== undefined) clearTimeout(session.debounce);
      session.debounce = undefined;
      stopRecovery(session);
      session.idle?.resolve();
      session.idle = undefined;
      for (const off of session.unsubscribe) off();
      session.unsubscribe = [];
      await session.connection.close();
      this.#sessions.delete(session);
    })();
    return session.closing;
  }
}

/** Clears a session's scheduled reconnect (a running attempt stops on the close signal). */
function stopRecovery(session: ServerSession): void {
  if (session.recovery.timer !== undefined) clearTimeout(session.recovery.timer);
  session.recovery.timer = undefined;
}

/** Same serverInfo and protocol version: a reconnect may keep an unchanged catalog. */
function sameServer(a: ServerIdentity, b: ServerIdentity): boolean {
  return (
    a.transportDigest === b.transportDigest &&
    a.protocolVersion === b.protocolVersion &&
    a.serverInfo?.name === b.serverInfo?.name &&
    a.serverInfo?.version === b.serverInfo?.version
  );
}

/** The status message of a lost session: why, the last attempt, and what happens next. */
function lossMessage(loss: SessionLoss, recovery: Recovery): string {
  const last =
    recovery.lastError === undefined
      ? ''
      : ` Last reconnect attempt: ${recovery.lastError.code}: ${recovery.lastError.message.split('\n')[0] ?? ''}`;
  const next = recovery.gaveUp
    ? ` Gave up after ${recovery.attempts} attempts; the next refresh, capture or hardRefresh tries again.`
    : ' Reconnecting.';
  return `The HTTP session ended: ${loss.message}.${last}${next}`;
}

/** Journal owners open in this process: a record of this pid with another owner is dead. */
const openOwners = new Set<string>();

function openJournal(options: RuntimeJournalOptions | undefined): CallJournal {
  const host = hostname();
  const owner = `${host}:${process.pid}:${randomUUID()}`;
  const store: JournalStore =
    options === undefined
      ? new MemoryJournalStore()
      : 'store' in options
        ? options.store
        : openSqliteJournal({
            path: options.path,
            ...(options.synchronous === undefined ? {} : { synchronous: options.synchronous }),
          });
  openOwners.add(owner);
  const journal = new CallJournal(store, {
    owner,
    // Without a journal configured, keys live in memory and unkeyed runs cost nothing; a durable
    // journal (or a store the application gives) receipts every run outcome.
    receipts: options === undefined ? 'keyed' : 'all',
    ...(options?.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
    ...(options?.inProgressTtlMs === undefined ? {} : { inProgressTtlMs: options.inProgressTtlMs }),
    isOwnerAlive: (other) => ownerAlive(other, host),
  });
  return journal;
}

async function closeJournal(journal: CallJournal): Promise<void> {
  try {
    await journal.close();
  } finally {
    openOwners.delete(journal.owner);
  }
}

/** `false` for a holder on this host whose process is gone (or a closed journal of this one). */
function ownerAlive(owner: string, host: string): boolean | undefined {
  const match = /^(.*):(\d+):[0-9a-f-]{36}$/.exec(owner);
  if (match === null || match[1] !== host) return undefined;
  const pid = Number(match[2]);
  if (pid === process.pid) return openOwners.has(owner);
  try {
    process.kill(pid, 0);
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? undefined : false;
  }
}

function publishOptions(
  registry: CatalogRegistry,
  c: Candidate,
  snapshot: CatalogSnapshot,
): { expectedGeneration: number; expectIdentityChange: boolean } {
  const registered = registry.identityOf(c.session.name);
  return {
    expectedGeneration: c.expectedGeneration,
    expectIdentityChange:
      registered !== undefined && registered.transportDigest !== snapshot.identity.transportDigest,
  };
}

function isRuntimeConfig(value: unknown): value is RuntimeConfig {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { servers?: unknown }).servers instanceof Map
  );
}

const debugEvents = createDebug('stepbind:events');

/** One line per event for `DEBUG=stepbind:events` (error messages are already redacted). */
function describeEvent(event: RuntimeEvent): string {
  const { type, ...rest } = event;
  const fields = Object.entries(rest).map(([k, v]) =>
    v instanceof Error
      ? `${k}=${(v as Partial<StepbindError>).code ?? v.name}: ${v.message.split('\n')[0] ?? ''}`
      : `${k}=${JSON.stringify(v)}`,
  );
  return `${type} ${fields.join(' ')}`;
}

function closedError(): RuntimeError {
  return new RuntimeError(ErrorCode.RUNTIME_CLOSED, 'The MCP runtime is closed; open a new one.');
}

function abortedError(reason: unknown): StepbindError {
  if (reason instanceof StepbindError) return reason;
  return new RuntimeError(ErrorCode.ABORTED, 'The refresh was cancelled; nothing was published.', {
    cause: reason,
  });
}

function toStepbindError(error: unknown): StepbindError {
  if (error instanceof StepbindError) return error;
  return new RuntimeError(
    ErrorCode.SERVER_START_FAILED,
    error instanceof Error ? error.message : String(error),
    {
      cause: error,
    },
  );
}

function combineSignals(...signals: (AbortSignal | undefined)[]): AbortSignal {
  const present = signals.filter((s): s is AbortSignal => s !== undefined);
  return present.length === 1 && present[0] !== undefined ? present[0] : AbortSignal.any(present);
}
