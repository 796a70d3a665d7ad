/**
 * An independent, synchronous model of what an MCP step-binding runtime must do. It imports nothing
 * from the runtime: it is written from DESIGN §3–§7 and §19.2–§19.3 alone, so a bug shared by the runtime and its
 * tests cannot hide here. Model-based tests drive the real runtime and this oracle with the same
 * commands and compare every observable outcome.
 */
import { definitionOf, flat, samePages, type ServedPages } from './served.js';

export type { ServedPages } from './served.js';

/** Outcome codes the oracle predicts for a prepared call. */
export type PredictedOutcome =
  | 'OK'
  | 'STALE_CATALOG'
  | 'BINDING_RELEASED'
  | 'CONNECTION_CLOSED'
  | 'TOOL_DENIED'
  | 'SERVER_ERROR'
  | 'SERVER_START_FAILED'
  | 'SERVER_NOT_READY'
  /** A call to a provisional tool whose live start is held: it settles at `releaseLiveStart`. */
  | 'PENDING';

interface SessionModel {
  readonly id: number;
  readonly server: string;
  readonly configVersion: number;
  alive: boolean;
  /** The catalog the live server process serves right now. */
  serving: ServedPages;
  /** The catalog published for this session. */
  published: ServedPages;
  /** The policy epoch the published catalog was built under. */
  publishedEpoch: number;
  revision: number;
}

/** What the oracle expects a captured binding to show for one server. */
export interface ExpectedServer {
  readonly name: string;
  readonly tools: readonly string[];
  readonly generation: number;
  readonly revision: number;
  /** Shown from the catalog cache, before its live catalog is published (§19.2). */
  readonly provisional: boolean;
}

/** A catalog the cache holds for a server: the last one published under that configuration. */
interface CachedModel {
  readonly configVersion: number;
  readonly pages: ServedPages;
  readonly generation: number;
}

/** A server shown from the catalog cache until its live start publishes (§19.2, §19.3). */
interface ProvisionalModel {
  readonly server: string;
  readonly cached: CachedModel;
  /** The runtime asked for its live start (eager: at open; lazy: first call or hard refresh). */
  requested: boolean;
  /**
   * Its live session once the start published; `'failed'` when the start failed, `'dropped'` when
   * a refresh replaced the entry (a new identity) before its start.
   */
  live: SessionModel | 'failed' | 'dropped' | undefined;
  /** How the start of a dropped entry ended, once it ran. */
  refusal?: PredictedOutcome;
}

interface BoundModel {
  /** The live session bound, or (for a provisional entry) none until its start. */
  readonly session: SessionModel | undefined;
  readonly provisional: ProvisionalModel | undefined;
  readonly revision: number;
  readonly generation: number;
  /** The tool names the step advertised for this server. */
  readonly tools: readonly string[];
}

interface BindingModel {
  readonly id: number;
  released: boolean;
  readonly policyEpoch: number;
  readonly servers: ReadonlyMap<string, BoundModel>;
}

interface CallModel {
  readonly binding: BindingModel;
  readonly server: string;
  readonly tool: string;
}

/**
 * The oracle. Every method mirrors one command and returns what the runtime must show. Sequential:
 * each command is applied after the previous one has completed (quiescence in between).
 */
export class RuntimeOracle {
  /** What a freshly started process of each server serves. */
  readonly #initial: Map<string, ServedPages>;
  readonly #sessions = new Map<string, SessionModel>();
  readonly #generation = new Map<string, number>();
  readonly #configVersion = new Map<string, number>();
  readonly #bindings: BindingModel[] = [];
  readonly #calls: CallModel[] = [];
  #dirty = false;
  #policyEpoch = 0;
  #sessionCounter = 0;
  #failNextStart = new Set<string>();
  /** The persistent catalog cache: the last catalog published per server (§19.1). */
  readonly #cache = new Map<string, CachedModel>();
  /** The current set's provisional entries (servers shown from the cache). */
  readonly #provisional = new Map<string, ProvisionalModel>();
  /** Servers whose live start the test holds until `releaseLiveStart`. */
  readonly #gates = new Set<string>();
  /** Servers whose live start failed, until a refresh starts them for real (§19.2). */
  readonly #failedLive = new Set<string>();
  /** Calls waiting for a held live start, by call index. */
  readonly #pending = new Set<number>();
  /** The first binding of the runtime now open (older ones went with a closed runtime). */
  #firstBinding = 0;
  /** The first call prepared in the runtime now open. */
  #firstCall = 0;

  /** `servers`: each server's initial catalog (what a freshly started process serves). */
  constructor(servers: Readonly<Record<string, ServedPages>>) {
    this.#initial = new Map(Object.entries(servers));
    for (const name of this.#initial.keys()) {
      this.#configVersion.set(name, 0);
      this.#generation.set(name, 0);
    }
    this.#dirty = true;
    this.#rebuild();
  }

  /** Configured server names, in order. */
  get servers(): readonly string[] {
    return [...this.#initial.keys()];
  }

  /** Number of bindings captured so far (indexes for {@link releaseBinding}, {@link prepare}). */
  get bindingCount(): number {
    return this.#bindings.length;
  }

  /** Number of calls prepared so far. */
  get callCount(): number {
    return this.#calls.length;
  }

  get dirty(): boolean {
    return this.#dirty;
  }

  /** The catalog server `name`'s live process serves now. */
  serving(name: string): ServedPages {
    return this.#session(name).serving;
  }

  /** The session (process) bound for `name` now, new on every start; 0 while provisional. */
  sessionId(name: string): number {
    return this.#provisional.has(name) ? 0 : this.#session(name).id;
  }

  /** True when server `name`'s current process is alive (a provisional server has none yet). */
  alive(name: string): boolean {
    return !this.#provisional.has(name) && this.#session(name).alive;
  }

  /** True when the current set shows `name` from the catalog cache (§19.2). */
  provisional(name: string): boolean {
    return this.#provisional.has(name);
  }

  /** True when `name`'s live start is held by the test (until {@link releaseLiveStart}). */
  gated(name: string): boolean {
    return this.#gates.has(name);
  }

  /** True when the runtime asked for `name`'s live start (a lazy server waits for a call). */
  startRequested(name: string): boolean {
    const p = this.#provisional.get(name);
    return p === undefined || p.requested;
  }

  /** True when `name` has a cached catalog under its current configuration. */
  cached(name: string): boolean {
    return this.#cache.get(name)?.configVersion === (this.#configVersion.get(name) ?? 0);
  }

  /** True when a start of `name` is to fail once. */
  failsNextStart(name: string): boolean {
    return this.#failNextStart.has(name);
  }

  /** True when call `callIndex` waits for a held live start. */
  isPending(callIndex: number): boolean {
    return this.#pending.has(callIndex);
  }

  /** True when a call (of binding `bindingIndex`, if given) waits for a held live start. */
  hasPending(bindingIndex?: number): boolean {
    const of = (c: number): boolean => this.#calls[c]?.binding.id === bindingIndex;
    return [...this.#pending].some((c) => bindingIndex === undefined || of(c));
  }

  /** The index of the `k`-th binding captured by the runtime now open, if there is one. */
  bindingAt(k: number): number | undefined {
    const index = this.#firstBinding + k;
    return index < this.#bindings.length ? index : undefined;
  }

  /** The index of the `k`-th call prepared in the runtime now open, if there is one. */
  callAt(k: number): number | undefined {
    const index = this.#firstCall + k;
    return index < this.#calls.length ? index : undefined;
  }

  /** True when call `callIndex` was prepared from a step that showed its server provisionally. */
  isProvisionalCall(callIndex: number): boolean {
    const call = this.#calls[callIndex];
    return call?.binding.servers.get(call.server)?.provisional !== undefined;
  }

  /** The revision a call's receipt names: the captured one, or the live one it ran under. */
  receiptRevision(callIndex: number): number | undefined {
    const call = this.#calls[callIndex];
    const entry = call?.binding.servers.get(call.server);
    const live = entry?.provisional === undefined ? entry : entry.provisional.live;
    return typeof live === 'object' ? live.revision : undefined;
  }

  markDirty(): void {
    this.#dirty = true;
  }

  /**
   * `refreshIfDirty`. @returns `'FAILED'` when a required server cannot start (the previous set
   * keeps serving and the flag stays set), else whether a set was published.
   */
  refreshIfDirty(): 'PUBLISHED' | 'NOTHING' | 'FAILED' {
    if (!this.#dirty) return 'NOTHING';
    return this.#rebuild() ? 'PUBLISHED' : 'FAILED';
  }

  /** The next start of `name` fails once. */
  failNextStart(name: string): void {
    this.#failNextStart.add(name);
  }

  /** The live process of `name` changes its catalog; with `listChanged`, the runtime re-lists it. */
  mutateCatalog(name: string, pages: ServedPages, listChanged: boolean): void {
    const session = this.#session(name);
    if (!this.alive(name)) return;
    session.serving = pages;
    if (listChanged) this.#hardRefresh(session);
  }

  /**
   * The catalog the next process of `name` serves changes (its fixture is rewritten): the case of a
   * catalog that changed between the cache write and the live listing.
   */
  editNextCatalog(name: string, pages: ServedPages): void {
    this.#initial.set(name, pages);
  }

  /**
   * `hardRefresh(name)`. A provisional server is started live (§19.3) and the answer says whether
   * its live catalog differs from the cached one. @returns `'SERVER_NOT_READY'` when the session
   * is dead, `'SERVER_START_FAILED'` when a live start fails, else whether it changed.
   */
  hardRefresh(name: string): boolean | 'SERVER_NOT_READY' | 'SERVER_START_FAILED' {
    const p = this.#provisional.get(name);
    if (p !== undefined) {
      this.#startLive(p);
      return p.live === 'failed'
        ? 'SERVER_START_FAILED'
        : !samePages(p.cached.pages, typeof p.live === 'object' ? p.live.published : []);
    }
    // A failed live start is the entry's state until a refresh starts the server again.
    if (this.#failedLive.has(name)) return 'SERVER_START_FAILED';
    const session = this.#session(name);
    if (!session.alive) return 'SERVER_NOT_READY';
    return this.#hardRefresh(session);
  }

  /** The live process of `name` dies. */
  crash(name: string): void {
    const session = this.#session(name);
    if (!this.alive(name)) return;
    session.alive = false;
    this.#dirty = true;
  }

  /** The configuration of `name` changes its transport (a new identity, a new process at refresh). */
  changeConfig(name: string): void {
    this.#configVersion.set(name, (this.#configVersion.get(name) ?? 0) + 1);
    this.#dirty = true;
  }

  /**
   * The policy epoch rises: older steps are refused, and every catalog is re-published under the
   * new epoch by the next refresh (or by an earlier hard refresh of that server).
   */
  raisePolicyEpoch(): void {
    this.#policyEpoch++;
    this.#dirty = true;
  }

  /**
   * `captureBinding()`: refreshes first if dirty. @returns the expected servers, or `'FAILED'` when
   * the refresh fails (no binding is captured).
   */
  capture(): readonly ExpectedServer[] | 'FAILED' {
    if (this.#dirty && !this.#rebuild()) return 'FAILED';
    const servers = new Map<string, BoundModel>();
    const expected: ExpectedServer[] = [];
    for (const name of this.#initial.keys()) {
      const p = this.#provisional.get(name);
      if (p !== undefined) {
        // The cached catalog, in a slot of its own that is never swapped.
        const { generation } = p.cached;
        const tools = flat(p.cached.pages);
        servers.set(name, { session: undefined, provisional: p, revision: 1, generation, tools });
        expected.push({ name, tools, generation, revision: 1, provisional: true });
        continue;
      }
      const session = this.#session(name);
      const generation = this.#generation.get(name) ?? 0;
      const tools = flat(session.published);
      const bound = { session, provisional: undefined, revision: session.revision };
      servers.set(name, { ...bound, generation, tools });
      expected.push({ name, tools, generation, revision: session.revision, provisional: false });
    }
    this.#bindings.push({
      id: this.#bindings.length,
      released: false,
      policyEpoch: this.#policyEpoch,
      servers,
    });
    return expected;
  }

  /** Tool names (server, tool) a binding advertised, in order. */
  toolsOf(bindingIndex: number): readonly { readonly server: string; readonly tool: string }[] {
    const binding = this.#bindings[bindingIndex];
    if (binding === undefined) return [];
    const out: { server: string; tool: string }[] = [];
    for (const [server, entry] of binding.servers) {
      for (const tool of entry.tools) out.push({ server, tool });
    }
    return out;
  }

  /** `binding.prepareCall(server__tool)`. @returns the call index. */
  prepare(bindingIndex: number, server: string, tool: string): number {
    const binding = this.#bindings[bindingIndex];
    if (binding === undefined) throw new Error(`no binding ${bindingIndex}`);
    this.#calls.push({ binding, server, tool });
    return this.#calls.length - 1;
  }

  /**
   * `preparedCall.run()`: the outcome the runtime must produce. A call to a provisional tool whose
   * live start is held is `'PENDING'`: {@link releaseLiveStart} says how it ends.
   */
  run(callIndex: number): PredictedOutcome {
    const call = this.#calls[callIndex];
    if (call === undefined) throw new Error(`no call ${callIndex}`);
    const outcome = this.#outcome(call);
    if (outcome === 'PENDING') this.#pending.add(callIndex);
    return outcome;
  }

  /**
   * The session a call that reached a server ran on: the one its step captured, or for a
   * provisional step the live session its server's start published.
   */
  sessionOf(callIndex: number): number | undefined {
    const call = this.#calls[callIndex];
    const entry = call?.binding.servers.get(call.server);
    const live = entry?.provisional?.live ?? entry?.session;
    return typeof live === 'object' ? live.id : undefined;
  }

  /**
   * The runtime is closed and a new one opened over the same servers and the same cache file
   * (§19.1, §19.2): every server with a cached catalog under its configuration is shown
   * provisionally, its live start held (`lazy`: not even asked for until a call or a hard
   * refresh); the others start at open. Each process serves what its predecessor served.
   */
  restartWarm(lazy: boolean): void {
    for (const b of this.#bindings) b.released = true;
    this.#firstBinding = this.#bindings.length;
    this.#firstCall = this.#calls.length;
    this.#provisional.clear();
    this.#failedLive.clear();
    for (const name of this.#initial.keys()) {
      // Generations are the new runtime's registry's own; a cached catalog keeps the one it had.
      this.#generation.set(name, 0);
      const session = this.#sessions.get(name);
      if (session?.alive === true) this.#initial.set(name, session.serving);
      if (session !== undefined) session.alive = false;
      const cached = this.#cache.get(name);
      if (cached !== undefined && this.cached(name)) {
        this.#provisional.set(name, { server: name, cached, requested: !lazy, live: undefined });
        this.#gates.add(name);
      } else {
        this.#startSession(name);
      }
    }
    this.#dirty = false;
  }

  /**
   * The held live start of `name` proceeds (if the runtime asked for it): it publishes what the
   * new process serves, or fails. @returns the calls that waited for it, with their outcomes.
   */
  releaseLiveStart(name: string): { readonly call: number; readonly outcome: PredictedOutcome }[] {
    this.#gates.delete(name);
    const p = this.#provisional.get(name);
    if (p?.requested === true) this.#startLive(p);
    const settled: { call: number; outcome: PredictedOutcome }[] = [];
    for (const index of this.#pending) {
      const call = this.#calls[index];
      if (call?.server !== name) continue;
      this.#pending.delete(index);
      settled.push({ call: index, outcome: this.#outcome(call) });
    }
    return settled;
  }

  /**
   * The outcome a call of `server__tool` prepared from binding `bindingIndex` and run now must have,
   * without recording the call (for an application's own loop that prepares calls itself).
   */
  predictRun(bindingIndex: number, server: string, tool: string): PredictedOutcome {
    const binding = this.#bindings[bindingIndex];
    if (binding === undefined) throw new Error(`no binding ${bindingIndex}`);
    return this.#outcome({ binding, server, tool });
  }

  #outcome(call: CallModel): PredictedOutcome {
    const { binding } = call;
    if (binding.released) return 'BINDING_RELEASED';
    const entry = binding.servers.get(call.server);
    if (entry === undefined) throw new Error(`binding has no server ${call.server}`);
    let session = entry.session;
    const p = entry.provisional;
    if (p !== undefined) {
      // §19.2: wait for the live catalog (a lazy server starts now), then run only a tool the
      // live catalog has with the definition the model saw.
      if (p.live === undefined) {
        p.requested = true;
        if (this.#gates.has(p.server)) return 'PENDING';
        this.#startLive(p);
      }
      if (p.live === 'dropped') {
        // Its one start still runs (then is refused): a start that fails says so instead.
        p.refusal ??= this.#failNextStart.delete(p.server)
          ? 'SERVER_START_FAILED'
          : 'SERVER_NOT_READY';
        return p.refusal;
      }
      if (p.live === 'failed' || p.live === undefined) return 'SERVER_START_FAILED';
      const seen = definitionOf(p.cached.pages, call.tool);
      if (definitionOf(p.live.published, call.tool) !== seen) return 'STALE_CATALOG';
      session = p.live;
    } else if (session === undefined || session.revision !== entry.revision) {
      return 'STALE_CATALOG';
    }
    if (binding.policyEpoch !== this.#policyEpoch) return 'TOOL_DENIED';
    if (!session.alive) return 'CONNECTION_CLOSED';
    // A silent change may have removed the tool from the live process: the server refuses it.
    if (!flat(session.serving).includes(call.tool)) return 'SERVER_ERROR';
    return 'OK';
  }

  /**
   * The live start of a provisional server: a new session publishing what the process serves,
   * which replaces the provisional entry; or a failure, after which the entry is out of the set
   * and a refresh starts the server for real (the runtime is dirty: it is required).
   */
  #startLive(p: ProvisionalModel): void {
    p.requested = true;
    if (p.live !== undefined) return;
    this.#provisional.delete(p.server);
    if (this.#failNextStart.delete(p.server)) {
      p.live = 'failed';
      this.#failedLive.add(p.server);
      this.#dirty = true;
      return;
    }
    // It starts under the configuration it was shown with, even if a newer one waits for a refresh.
    p.live = this.#startSession(p.server, p.cached.configVersion);
  }

  /** A new process of `name` serving its initial catalog, published as a first catalog. */
  #startSession(name: string, configVersion = this.#configVersion.get(name) ?? 0): SessionModel {
    const pages = this.#initial.get(name) ?? [];
    this.#failedLive.delete(name);
    const session: SessionModel = {
      id: ++this.#sessionCounter,
      server: name,
      configVersion,
      alive: true,
      serving: pages,
      published: pages,
      publishedEpoch: this.#policyEpoch,
      revision: 1,
    };
    this.#sessions.set(name, session);
    this.#generation.set(name, (this.#generation.get(name) ?? 0) + 1);
    this.#record(session);
    return session;
  }

  /** Every publication is recorded in the catalog cache under its configuration. */
  #record(session: SessionModel): void {
    this.#cache.set(session.server, {
      configVersion: session.configVersion,
      pages: session.published,
      generation: this.#generation.get(session.server) ?? 0,
    });
  }

  /** `binding.release()`. */
  releaseBinding(bindingIndex: number): void {
    const binding = this.#bindings[bindingIndex];
    if (binding !== undefined) binding.released = true;
  }

  /** Whether the binding was released. */
  isReleased(bindingIndex: number): boolean {
    return this.#bindings[bindingIndex]?.released ?? true;
  }

  #session(name: string): SessionModel {
    const session = this.#sessions.get(name);
    if (session === undefined) throw new Error(`unknown server ${name}`);
    return session;
  }

  /** Re-publishes a session when what it serves, or the epoch, differs from its catalog. */
  #republish(session: SessionModel): boolean {
    if (
      samePages(session.published, session.serving) &&
      session.publishedEpoch === this.#policyEpoch
    ) {
      return false;
    }
    session.published = session.serving;
    session.publishedEpoch = this.#policyEpoch;
    session.revision++;
    this.#generation.set(session.server, (this.#generation.get(session.server) ?? 0) + 1);
    this.#record(session);
    return true;
  }

  #hardRefresh(session: SessionModel): boolean {
    return this.#republish(session);
  }

  /** A dirty refresh: all or nothing. */
  #rebuild(): boolean {
    const starts: string[] = [];
    // A provisional entry of the same configuration is carried into the next set (§19.2).
    const carried = (name: string): boolean =>
      this.#provisional.get(name)?.cached.configVersion === this.#configVersion.get(name);
    for (const name of this.#initial.keys()) {
      if (carried(name)) continue;
      const current = this.#sessions.get(name);
      const reusable =
        current !== undefined &&
        current.alive &&
        current.configVersion === this.#configVersion.get(name);
      if (!reusable) starts.push(name);
    }
    const failing = starts.filter((name) => this.#failNextStart.has(name));
    for (const name of failing) this.#failNextStart.delete(name);
    if (failing.length > 0) return false;
    for (const name of this.#initial.keys()) {
      if (carried(name)) continue;
      const dropped = this.#provisional.get(name);
      // A changed identity drops the entry: its start, if it comes, is refused.
      if (dropped !== undefined) dropped.live ??= 'dropped';
      this.#provisional.delete(name);
      const current = this.#sessions.get(name);
      if (starts.includes(name) || current === undefined) this.#startSession(name);
      else this.#republish(current);
    }
    this.#dirty = false;
    return true;
  }
}
