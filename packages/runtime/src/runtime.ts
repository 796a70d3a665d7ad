import {
  checkOptions,
  ConfigError,
  createBinding,
  ErrorCode,
  RuntimeError,
  type CallJournal,
  type JournalRecord,
  type McpBinding,
  type ResolveInput,
} from '@stepbind/binding/internal';
import type { ClientHandlers } from './client-capabilities.js';
import { parseConfig, type RuntimeConfig } from './config.js';
import { loadConfigFile } from './config-file.js';
import type { StepbindConfig } from './config-input.js';
import { holdCatalogs, type ConnectionSet } from './connection-set.js';
import { registryView, RuntimeCore, type RegistryView } from './core.js';
import { abortedError, closedError, toStepbindError } from './failures.js';
import type { FleetStore } from './fleet/attach.js';
import { attachFleetFor } from './fleet/hooks.js';
import { openCatalogCache } from './cache/access.js';
import { startProvisional, stopIdleServer } from './provisional-start.js';
import { closeJournal, openJournal } from './journal/open.js';
import { journalStatus } from './journal/status.js';
import { journalView, type JournalView } from './journal/view.js';
import type {
  CaptureOptions,
  JournalStatus,
  McpRuntimeOptions,
  RuntimeStatus,
  ServerConnector,
} from './options.js';
import { RuntimePolicy } from './policy.js';
import { captureOptionsSchema, runtimeOptionsSchema } from './options-schema.js';
import { refreshIfDirty } from './refresh.js';
import { connectServer } from './connect.js';
import type { EraMemory } from './connection.js';
import { runtimeStatus } from './status.js';
import type { AuthStatus } from './auth/types.js';
import { ServerAuthorizers } from './server/authorizers.js';

export type {
  CaptureOptions,
  DiscoveryStatus,
  JournalStatus,
  JournalTuning,
  McpRuntimeOptions,
  ReconnectOptions,
  RuntimeJournalOptions,
  RuntimeStatus,
  ServerAuthStatus,
  ServerConnector,
  ServerStatus,
} from './options.js';
import { checkNodeVersion } from './node-version.js';
export type { RuntimeEvent } from './events.js';
export type { RuntimeClock } from './clock.js';

export type { RegistryView } from './core.js';

/**
 * The MCP tool runtime: connects to configured servers, publishes immutable ConnectionSets of
 * validated catalogs through one {@link CatalogRegistry}, and hands each sampling step a frozen
 * {@link McpBinding}. See DESIGN §6 for refresh, capture and hard refresh semantics.
 */
export class McpRuntime {
  readonly #core: RuntimeCore;
  readonly #policy: RuntimePolicy;
  readonly #journal: CallJournal;
  readonly #journalView: JournalView;
  readonly #journalStatus: JournalStatus;
  readonly #registryView: RegistryView;
  #stepCounter = 0;
  #closing: Promise<void> | undefined;

  private constructor(
    config: RuntimeConfig,
    options: McpRuntimeOptions,
    journal: CallJournal,
    fleet: FleetStore | undefined,
  ) {
    const handlers: ClientHandlers = {
      ...(options.onSampling === undefined ? {} : { onSampling: options.onSampling }),
      ...(options.onElicitation === undefined ? {} : { onElicitation: options.onElicitation }),
    };
    const eras: EraMemory = new Map(); // era: remembered per server for this runtime
    const authorizers = new ServerAuthorizers(
      options,
      fleet === undefined ? undefined : () => fleet.tokenStore(),
    );
    const connect: ServerConnector =
      options.connect ??
      ((name, cfg, o) => {
        const auth = authorizers.for(name, cfg);
        return connectServer(name, cfg, {
          signal: o.signal,
          handlers,
          eras,
          ...(options.clock === undefined ? {} : { clock: options.clock }),
          ...(auth === undefined ? {} : { auth }),
        });
      });
    const core = new RuntimeCore(config, options, connect, fleet, authorizers);
    core.lifecycle.startLive = (server) => startProvisional(core, server);
    core.lifecycle.stopIdle = (server) => stopIdleServer(core, server);
    this.#core = core;
    this.#journal = journal;
    this.#journalView = journalView(journal);
    this.#journalStatus = journalStatus(journal, fleet !== undefined);
    // The registry holds the policy epoch; the call policy reads it from there.
    const registry = core.registry;
    this.#policy = new RuntimePolicy(() => registry.policyEpoch);
    this.#policy.shared = fleet?.policy;
    this.#registryView = registryView(core.registry);
  }

  /**
   * Starts every configured server (bounded parallelism), discovers and validates each catalog and
   * publishes the first ConnectionSet. Optional servers may still be starting when it resolves.
   *
   * With a `store` (option or configuration), attaches the PostgreSQL fleet store first (its
   * migrations, policy listener and policy), whose database then holds the journal and receipts.
   * Opens the journal (the configured one, or in memory) and recovers the keys a dead process left
   * in progress (a `journal-recovered` event lists them).
   *
   * `config` is a configuration (`StepbindConfig`, checked by `parseConfig`), one already parsed, or
   * the path of a configuration file (a string: read by `loadConfigFile`, so it may carry comments,
   * and its relative paths and `${workspaceFolder}` resolve against the file).
   *
   * @throws RuntimeError `INVALID_OPTIONS` naming every option that is unknown (with a did-you-mean)
   *   or wrong, before anything is started or opened (see `options-schema.ts`);
   *   ConfigError `INVALID_CONFIG` for a bad configuration or file (every problem at once in
   *   `detail.errors`); JournalError `JOURNAL_CORRUPT`,
   *   `JOURNAL_VERSION` or `JOURNAL_UNAVAILABLE` for a journal that cannot be used, RuntimeError
   *   `STORE_UNAVAILABLE` for a fleet store that cannot be reached (nothing was started);
   *   RuntimeError `REQUIRED_SERVERS_FAILED` listing every required server that failed and why
   *   (all started servers are closed again).
   */
  static open(
    config: StepbindConfig | RuntimeConfig | string,
    options?: McpRuntimeOptions,
  ): Promise<McpRuntime>;
  /**
   * A configuration whose shape is known only at run time (parsed JSON, a value built by a
   * helper): checked by `parseConfig` all the same, so a typo is refused with its path.
   */
  static open(config: unknown, options?: McpRuntimeOptions): Promise<McpRuntime>;
  static async open(config: unknown, options: McpRuntimeOptions = {}): Promise<McpRuntime> {
    checkNodeVersion(process.versions.node, 'McpRuntime.open');
    checkOptions(runtimeOptionsSchema, options, {
      fn: 'McpRuntime.open',
      consequence: 'Nothing was started, opened or journaled; fix the option and call again.',
    });
    const parsed =
      typeof config === 'string'
        ? await loadConfigFile(config)
        : isRuntimeConfig(config)
          ? config
          : parseConfig(config);
    const fleet = await attachFleetFor(options.store ?? parsed.store);
    let journal: CallJournal | undefined;
    let recovered: readonly JournalRecord[];
    try {
      journal = openJournal(options.journal ?? parsed.journal, fleet, options.clock);
      recovered = await journal.recover();
      await journal.prune();
    } catch (error) {
      if (journal !== undefined) await closeJournal(journal);
      await fleet?.close();
      throw error;
    }
    const runtime = new McpRuntime(parsed, options, journal, fleet);
    try {
      await openCatalogCache(runtime.#core, options.cache, parsed.cache);
    } catch (error) {
      await runtime.close();
      throw error;
    }
    // The runtime follows the fleet epoch: raised now if the fleet's is higher, and on each change.
    fleet?.bind(runtime);
    runtime.#core.emit({
      type: 'journal-recovered',
      location: journal.store.location,
      journal: runtime.#journalStatus,
      records: recovered,
    });
    runtime.#core.markDirty('open');
    try {
      await runtime.refreshIfDirty(options.signal === undefined ? {} : { signal: options.signal });
    } catch (error) {
      await runtime.close();
      throw error;
    }
    return runtime;
  }

  /**
   * Opens the runtime on the configuration file at `path` (relative to the working directory): the
   * same as `McpRuntime.open(path, options)`, spelled out for readers and JavaScript callers.
   *
   * @throws ConfigError `INVALID_CONFIG` when `path` is not a non-empty string, or for the file
   *   (see `loadConfigFile`); otherwise as {@link McpRuntime.open}.
   */
  static fromFile(path: string, options: McpRuntimeOptions = {}): Promise<McpRuntime> {
    if (typeof path !== 'string' || path.length === 0) {
      return Promise.reject(
        new ConfigError(
          ErrorCode.INVALID_CONFIG,
          'McpRuntime.fromFile expects the path of a configuration file (a non-empty string); to open a configuration object, call McpRuntime.open(config).',
          { detail: { path: '$' } },
        ),
      );
    }
    return McpRuntime.open(path, options);
  }

  /**
   * The registry every catalog enters through, read-only: what is published per (server,
   * audience), the lifecycle of a catalog, the generations issued and the policy epoch.
   */
  get registry(): RegistryView {
    return this.#registryView;
  }

  /** The fleet store this runtime shares (`store` option or configuration key), if any. */
  get fleet(): FleetStore | undefined {
    return this.#core.fleet;
  }

  /**
   * The execution journal, read-only apart from operator repairs: records (`get`, `records`),
   * receipts and `verify()` of their chain, `resolve`, `recover`, `prune` (see {@link JournalView}).
   */
  get journal(): JournalView {
    return this.#journalView;
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
    return this.#core.rebuilds;
  }

  /** True when a refresh is pending. */
  get dirty(): boolean {
    return this.#core.dirty;
  }

  /** Records that the next capture must rebuild the ConnectionSet first. */
  markDirty(reason: string): void {
    this.#core.markDirty(reason);
  }

  /**
   * Replaces the configuration and marks the runtime dirty; the next refresh or capture reuses
   * connections whose identity is unchanged and starts the rest.
   *
   * @throws ConfigError for an invalid configuration (nothing changes).
   */
  updateConfig(config: unknown): void {
    this.#ensureOpen();
    this.#core.config = isRuntimeConfig(config) ? config : parseConfig(config);
    this.markDirty('config');
  }

  /**
   * Raises the policy epoch where the policy lives: fleet-wide with a fleet store (in force here
   * when it resolves, in other workers when notified), else here ({@link setPolicyEpochLocally}).
   * Bindings captured before are refused at call time (`TOOL_DENIED`); the next refresh
   * re-publishes every catalog. @throws `INVALID_OPTIONS` for an epoch lower than the current one
   * (with a store: not higher than the fleet's); RuntimeError `STORE_UNAVAILABLE`.
   */
  async setPolicyEpoch(epoch: number): Promise<void> {
    const fleet = this.#core.fleet;
    if (fleet === undefined) return this.setPolicyEpochLocally(epoch);
    this.#ensureOpen();
    const { epoch: committed } = await fleet.raiseEpoch(epoch);
    if (committed > this.#core.registry.policyEpoch) this.setPolicyEpochLocally(committed);
  }

  /**
   * Raises this runtime's policy epoch only. With a fleet store it may not pass the fleet's (the
   * fleet registry refuses catalogs under any other epoch): that is `INVALID_OPTIONS`, as is an
   * epoch lower than the current one.
   */
  setPolicyEpochLocally(epoch: number): void {
    const fleetEpoch = this.#core.fleet?.epoch;
    if (fleetEpoch !== undefined && epoch > fleetEpoch)
      throw new RuntimeError(
        ErrorCode.INVALID_OPTIONS,
        `This runtime's policy epoch cannot pass the fleet's (${fleetEpoch}, got ${epoch}): the fleet registry refuses catalogs published under any other epoch. Raise it fleet-wide with setPolicyEpoch(${epoch}).`,
        { detail: { option: 'epoch', value: epoch, current: fleetEpoch } },
      );
    this.#core.registry.setPolicyEpoch(epoch);
    this.markDirty('policy-epoch');
  }

  /**
   * Revokes one tool (its own name, not `server__tool`) where the policy lives: fleet-wide with a
   * fleet store (in force here when it resolves, in other workers when notified), else here
   * ({@link revokeToolLocally}). Calls to it are refused from then on, also from bindings already
   * captured (`TOOL_DENIED`, nothing sent). @throws RuntimeError `STORE_UNAVAILABLE`.
   */
  async revokeTool(server: string, tool: string): Promise<void> {
    if (this.#core.fleet === undefined) return this.#policy.revoke(server, tool);
    this.#ensureOpen();
    await this.#core.fleet.revoke(server, tool);
  }

  /** Lifts {@link revokeTool}'s revocation (fleet-wide with a store). @throws RuntimeError `STORE_UNAVAILABLE`. */
  async restoreTool(server: string, tool: string): Promise<void> {
    if (this.#core.fleet === undefined) return this.#policy.restore(server, tool);
    this.#ensureOpen();
    await this.#core.fleet.restore(server, tool);
  }

  /** Revokes one tool in this runtime only, even with a fleet store (other workers may call it). */
  revokeToolLocally(server: string, tool: string): void {
    this.#policy.revoke(server, tool);
  }

  /** Lifts a {@link revokeToolLocally} revocation (a fleet one stays in force). */
  restoreToolLocally(server: string, tool: string): void {
    this.#policy.restore(server, tool);
  }

  /**
   * Accepts that a server's identity (serverInfo, protocol version) changed: its registry entry is
   * retired so the next refresh may publish the new identity.
   */
  acceptIdentityChange(server: string): void {
    this.#core.registry.retireServer(server);
    // Its registry entry is gone: the next refresh starts a fresh connection and publishes anew.
    this.#core.forceRestart.add(server);
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
    return refreshIfDirty(this.#core, options.signal);
  }

  /**
   * Captures the binding of one sampling step: refreshes first if dirty, gives optional servers
   * still starting one bounded grace per ConnectionSet, then freezes the current view. O(servers).
   *
   * @throws RuntimeError `INVALID_OPTIONS` for an unknown or wrong option; `SERVER_NOT_READY` when
   *   a required server is not bound; refresh errors.
   */
  async captureBinding(options: CaptureOptions = {}): Promise<McpBinding> {
    checkOptions(captureOptionsSchema, options, {
      fn: 'McpRuntime.captureBinding',
      consequence: 'Nothing was captured; fix the option and call again.',
    });
    this.#ensureOpen();
    const signalOption = options.signal === undefined ? {} : { signal: options.signal };
    let set: ConnectionSet | undefined;
    // A refresh may publish a new set while this capture waits (refresh, grace): then start over,
    // so a step never binds a set that was superseded (and perhaps drained) meanwhile.
    for (let attempt = 0; ; attempt++) {
      if (this.#core.dirty) await this.refreshIfDirty(signalOption);
      set = this.#core.current;
      if (set === undefined) throw closedError();
      if (!set.graceUsed) {
        set.graceUsed = true;
        const starting = set.starting();
        if (starting.length > 0) await this.#grace(starting, options.signal);
      }
      this.#ensureOpen();
      if (set === this.#core.current || attempt >= 3) break;
    }
    if (set.retired)
      throw new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        'The tools kept changing while this step was captured; capture again.',
      );
    // A resources/prompts listing under way (a new connection's first) gets the same bounded
    // grace, so the step shows the lists rather than nothing (DESIGN §20.3).
    const listing = set.servers().flatMap((server) => server.features.idle ?? []);
    if (listing.length > 0) await this.#grace(listing, options.signal);
    const view = set.view(this.#core.options.approval ?? 'unproven-writes');
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
    const holds = holdCatalogs(this.#core.registry, view);
    const stepId = options.stepId ?? `step-${++this.#stepCounter}`;
    return createBinding(view, {
      stepId,
      policy: this.#policy,
      journal: this.#journal,
      closeSignal: this.#core.closeController.signal,
      onJournalError: (error) =>
        this.#core.emit({ type: 'journal-error', error: toStepbindError(error) }),
      onDrained: () => {
        for (const release of holds) release();
        bound.bindings--;
        this.#core.maybeDrain(bound);
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
   * Always sends `tools/list`, even when a modern server's listing is still fresh by its `ttlMs`
   * (the application asked for the server's word); a refresh that honours the TTLs is `markDirty`
   * then `refreshIfDirty` (DESIGN §10.1).
   *
   * A server shown from the catalog cache (DESIGN §19.2) is started (a lazy one too) and listed
   * live; it resolves once its live catalog is published, true when that differs from the cached
   * one.
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
    const entry = this.#core.current?.entries.get(server);
    if (entry?.kind === 'provisional') {
      // A provisional server (DESIGN §19.2) is started (a lazy one too) and listed live.
      const p = entry.provisional;
      const live = await p.live(options.signal);
      return live.catalog.pageRoot !== p.cached.pageRoot;
    }
    if (
      entry?.kind !== 'ready' ||
      (entry.server.connection.closed && entry.server.connection.lost === undefined)
    ) {
      throw new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        `Server "${server}" has no live connection to re-list; refresh first.`,
        {
          detail: { server },
        },
      );
    }
    return entry.server.hardRefresh(options.signal);
  }

  /**
   * Resolves when no debounced or running hard refresh is left (a quiet point for tests and demos).
   */
  async whenIdle(): Promise<void> {
    for (;;) {
      const pending = [...this.#core.servers]
        .map((s) => s.idle)
        .filter((p): p is Promise<void> => p !== undefined);
      if (pending.length === 0) return;
      await Promise.all(pending);
    }
  }

  /** Current state of every configured server. */
  status(): RuntimeStatus {
    return runtimeStatus(this.#core, this.#journalStatus);
  }

  /**
   * The authorization of every configured server, in config order: `none`, `bearer`, or for an
   * OAuth server whether a login is stored (`logged-in`, `expired`, `logged-out`), for whom and
   * until when. Asks the token store; never shows a token.
   */
  authStatus(): Promise<readonly AuthStatus[]> {
    this.#ensureOpen();
    return this.#core.auth.authStatus(this.#core.config.servers);
  }

  /** Pids of every child process the runtime currently owns (stdio servers). */
  pids(): number[] {
    return [...this.#core.servers]
      .map((s) => s.connection.pid)
      .filter((p): p is number => p !== undefined);
  }

  /**
   * Closes every connection of every set, cancels refreshes and debounced work, and waits for child
   * processes to exit. Pending calls fail (`CONNECTION_CLOSED` if not sent yet, `OUTCOME_UNKNOWN`
   * if sent); a run waiting in its `prepare` hook ends `ABORTED` (not sent; the hook's `ctx.signal`
   * fires with `RUNTIME_CLOSED`) without waiting for the hook; once every run has journaled its
   * outcome the journal closes. `status().state` is `closing` meanwhile. Idempotent.
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
    const core = this.#core;
    core.closed = true;
    core.closeController.abort(closedError());
    for (const set of core.liveSets) set.detach();
    core.liveSets.clear();
    core.current = undefined;
    for (const server of core.servers) server.stopReconnecting();
    await core.refreshMutex.waitForUnlock();
    await Promise.allSettled([...core.background]);
    await Promise.all([...core.servers].map((s) => core.closeServer(s)));
    try {
      await core.cacheFile?.close();
      await closeJournal(this.#journal);
      await core.auth.close();
      await core.fleet?.close();
    } finally {
      core.closeDone = true;
    }
  }

  #ensureOpen(): void {
    if (this.#core.closed) throw closedError();
  }

  /** Waits for optional servers still starting, at most `optionalGraceMs` on the runtime's clock. */
  async #grace(starting: Promise<void>[], signal: AbortSignal | undefined): Promise<void> {
    const { clock, closeController, options } = this.#core;
    let timer: unknown;
    let onAbort: (() => void) | undefined;
    const abortSignals = [closeController.signal, signal].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    try {
      await Promise.race([
        Promise.allSettled(starting),
        new Promise<void>((resolve) => {
          timer = clock.setTimeout(resolve, options.optionalGraceMs ?? 1000);
          onAbort = resolve;
          for (const s of abortSignals) s.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
    } finally {
      if (timer !== undefined) clock.clearTimeout(timer);
      if (onAbort !== undefined)
        for (const s of abortSignals) s.removeEventListener('abort', onAbort);
    }
    if (signal?.aborted === true) throw abortedError(signal.reason);
  }
}

function isRuntimeConfig(value: unknown): value is RuntimeConfig {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { servers?: unknown }).servers instanceof Map
  );
}
