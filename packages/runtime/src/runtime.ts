import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Mutex } from 'async-mutex';
import PQueue from 'p-queue';
import {
  acquireMutex,
  assignModelNames,
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
  type ValidationOptions,
} from '@stepbind/binding';
import { parseConfig, type RuntimeConfig, type ServerConfig } from './config.js';
import { discoverSnapshot } from './discover.js';
import { identityKeyOf, identityOf } from './identity.js';
import { openSqliteJournal } from './journal/sqlite.js';
import { connectServer, type SdkConnection } from './sdk.js';

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
      readonly cause: 'hard-refresh' | 'refresh';
    }
  | { readonly type: 'hard-refresh-failed'; readonly server: string; readonly error: StepbindError }
  | { readonly type: 'connection-closed'; readonly server: string; readonly expected: boolean }
  | { readonly type: 'connection-error'; readonly server: string; readonly error: Error }
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
  /** Approval policy for calls (see `CallPolicy.approval`). @default 'none' */
  readonly approval?: 'none' | 'unproven-writes';
  /** How long a capture waits, once per ConnectionSet, for optional servers still starting. @default 1000 */
  readonly optionalGraceMs?: number;
  /** Quiet period after a `list_changed` before the hard refresh runs. @default 100 */
  readonly listChangedDebounceMs?: number;
  /** Schema validation options for every catalog (`server` is filled in). */
  readonly validation?: Omit<ValidationOptions, 'server' | 'validatorCache' | 'pageIndex'>;
  /** Starts connections. @default stdio child processes / Streamable HTTP through the SDK */
  readonly connect?: ServerConnector;
  /** Receives every {@link RuntimeEvent}. */
  readonly onEvent?: (event: RuntimeEvent) => void;
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
  readonly state: 'ready' | 'starting' | 'failed' | 'closed';
  readonly generation?: number;
  readonly revision?: number;
  readonly catalogState?: string;
  readonly tools?: number;
  readonly pid?: number;
  readonly error?: { readonly code: string; readonly message: string };
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
  readonly connection: SdkConnection;
  readonly identity: ServerIdentity;
  /** Serializes re-listings (hard refresh, refresh re-list) of this connection. */
  readonly listMutex = new Mutex();
  slot: CatalogSlot | undefined;
  /** Listing key of the published catalog (see `discoverSnapshot`). */
  listingKey: string | undefined;
  /** ConnectionSets holding this session. */
  refs = 0;
  debounce: ReturnType<typeof setTimeout> | undefined;
  debounceStarted = 0;
  /** Hard refreshes fired by list_changed and not finished yet. */
  hardRefreshes = 0;
  /** Resolves when no debounce is armed and no fired hard refresh is running. */
  idle: { promise: Promise<void>; resolve: () => void } | undefined;
  unsubscribe: (() => void)[] = [];
  closing: Promise<void> | undefined;

  constructor(name: string, config: ServerConfig, identityKey: string, connection: SdkConnection) {
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
  view(): BindingView {
    this.#view ??= buildView(this);
    return this.#view;
  }
}

function buildView(set: ConnectionSet): BindingView {
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
    tools.push(
      Object.freeze({
        name: bound.modelName,
        description: bound.descriptor.raw.description ?? '',
        inputSchema: bound.descriptor.raw.inputSchema,
      }),
    );
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
  readonly #connect: ServerConnector;
  readonly #closeController = new AbortController();
  readonly #sessions = new Set<ServerSession>();
  readonly #liveSets = new Set<ConnectionSet>();
  readonly #revoked = new Set<string>();
  readonly #background = new Set<Promise<void>>();
  readonly #forceRestart = new Set<string>();
  #rebuilding = false;
  readonly #policy: {
    policyEpoch: number;
    approval: 'none' | 'unproven-writes';
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
    this.#journal = journal;
    this.#connect =
      options.connect ?? ((name, cfg, o) => connectServer(name, cfg, { signal: o.signal }));
    this.#registry = new CatalogRegistry({ policyEpoch: options.policyEpoch ?? 0 });
    this.#policy = {
      policyEpoch: options.policyEpoch ?? 0,
      approval: options.approval ?? 'none',
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
    const view = set.view();
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
   * @returns true when the catalog changed.
   * @throws CatalogError from discovery or publication (nothing changes); RuntimeError
   *   `SERVER_NOT_READY` when the server has no live connection.
   */
  async hardRefresh(
    server: string,
    options: { readonly signal?: AbortSignal } = {},
  ): Promise<boolean> {
    this.#ensureOpen();
    const entry = this.#current?.entries.get(server);
    if (entry?.kind !== 'ready' || entry.session.connection.closed) {
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
        servers.push({
          name,
          required: cfg.required,
          state: s.connection.closed ? 'closed' : 'ready',
          generation: s.slot?.catalog.generation ?? 0,
          revision: s.slot?.revision ?? 0,
          catalogState: s.slot?.catalog.state ?? 'DISCOVERING',
          tools: s.slot?.catalog.tools.length ?? 0,
          ...(s.connection.pid === undefined ? {} : { pid: s.connection.pid }),
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
    await this.#refreshMutex.waitForUnlock();
    await Promise.allSettled([...this.#background]);
    await Promise.all([...this.#sessions].map((s) => this.#closeSession(s)));
    await closeJournal(this.#journal);
  }

  #ensureOpen(): void {
    if (this.#closed) throw closedError();
  }

  #emit(event: RuntimeEvent): void {
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
            !prior.session.connection.closed &&
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
          `${failures.length} required server(s) failed; nothing was published and the previous tools stay in service:\n${failures
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
      const { snapshot, listingKey } = await this.#discover(session, config, signal);
      return { session, config, snapshot, listingKey, fresh: false, expectedGeneration, release };
    } catch (error) {
      release();
      throw error;
    }
  }

  async #discover(
    session: ServerSession,
    config: ServerConfig,
    signal: AbortSignal,
  ): Promise<{ snapshot: CatalogSnapshot | undefined; listingKey: string | undefined }> {
    // An unchanged listing may skip validation only while the published catalog's epoch holds.
    const current = session.slot?.catalog;
    const previousListingKey =
      current !== undefined && current.policyEpoch === this.#registry.policyEpoch
        ? session.listingKey
        : undefined;
    return discoverSnapshot(session.connection, {
      ...(previousListingKey === undefined ? {} : { previousListingKey }),
      // The first listing of a new connection has nothing to compare with; re-lists key theirs.
      keyListing: current !== undefined,
      name: session.name,
      config,
      identity: session.identity,
      policyEpoch: this.#registry.policyEpoch,
      ...(this.#options.validation === undefined ? {} : { validation: this.#options.validation }),
      validatorCache: this.#validatorCache,
      signal,
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
        c.snapshot !== undefined && (c.fresh || !this.#unchanged(c.session, c.snapshot)),
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
        c.session.listingKey = c.listingKey;
        if (!c.fresh) {
          this.#emit({
            type: 'catalog-swapped',
            server: c.session.name,
            generation: published.generation,
            revision: c.session.slot?.revision ?? 0,
            cause: 'refresh',
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
      const expectedGeneration = slot.catalog.generation;
      const combined = combineSignals(signal, this.#closeController.signal);
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
    } finally {
      release();
    }
  }

  #watch(session: ServerSession): void {
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
    const fire = (): void => {
      session.debounce = undefined;
      session.hardRefreshes++;
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
          settle();
        });
    };
    session.unsubscribe.push(
      session.connection.onListChanged(() => {
        if (this.#closed || session.closing !== undefined) return;
        this.#emit({ type: 'list-changed', server: session.name });
        const now = Date.now();
        if (session.debounce === undefined) session.debounceStarted = now;
        else clearTimeout(session.debounce);
        if (session.idle === undefined) {
          let resolve: () => void = () => undefined;
          const promise = new Promise<void>((r) => {
            resolve = r;
          });
          session.idle = { promise, resolve };
        }
        // Trailing debounce, never postponed past 10 quiet periods by a steady stream.
        const wait = Math.max(
          0,
          Math.min(debounceMs, session.debounceStarted + 10 * debounceMs - now),
        );
        session.debounce = setTimeout(fire, wait);
      }),
    );
    session.unsubscribe.push(
      session.connection.onError((error) => {
        this.#emit({ type: 'connection-error', server: session.name, error });
      }),
    );
    session.unsubscribe.push(
      session.connection.onClose(() => {
        const expected = this.#closed || session.closing !== undefined;
        this.#emit({ type: 'connection-closed', server: session.name, expected });
        if (!expected) {
          this.#current?.invalidate();
          this.markDirty(`connection-closed:${session.name}`);
        }
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
