/**
 * An independent, synchronous model of what an MCP step-binding runtime must do. It imports nothing
 * from the runtime: it is written from DESIGN §3–§7 alone, so a bug shared by the runtime and its
 * tests cannot hide here. Model-based tests drive the real runtime and this oracle with the same
 * commands and compare every observable outcome.
 */

/** The pages a server serves: tool names per page, in order. Content equality is page equality. */
export type ServedPages = readonly (readonly string[])[];

/** Outcome codes the oracle predicts for a prepared call. */
export type PredictedOutcome =
  | 'OK'
  | 'STALE_CATALOG'
  | 'BINDING_RELEASED'
  | 'CONNECTION_CLOSED'
  | 'TOOL_DENIED'
  | 'SERVER_ERROR';

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
}

interface BoundModel {
  readonly session: SessionModel;
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

const samePages = (a: ServedPages, b: ServedPages): boolean =>
  JSON.stringify(a) === JSON.stringify(b);
const flat = (pages: ServedPages): string[] => pages.flat();

/**
 * The oracle. Every method mirrors one command and returns what the runtime must show. Sequential:
 * each command is applied after the previous one has completed (quiescence in between).
 */
export class RuntimeOracle {
  readonly #initial: ReadonlyMap<string, ServedPages>;
  readonly #sessions = new Map<string, SessionModel>();
  readonly #generation = new Map<string, number>();
  readonly #configVersion = new Map<string, number>();
  readonly #bindings: BindingModel[] = [];
  readonly #calls: CallModel[] = [];
  #dirty = false;
  #policyEpoch = 0;
  #sessionCounter = 0;
  #failNextStart = new Set<string>();

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

  /** Identifier of the session (process) currently bound for `name`; changes on every new start. */
  sessionId(name: string): number {
    return this.#session(name).id;
  }

  /** True when server `name`'s current process is alive. */
  alive(name: string): boolean {
    return this.#session(name).alive;
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
    if (!session.alive) return;
    session.serving = pages;
    if (listChanged) this.#hardRefresh(session);
  }

  /** `hardRefresh(name)`. @returns `'SERVER_NOT_READY'` when the session is dead, else whether it changed. */
  hardRefresh(name: string): boolean | 'SERVER_NOT_READY' {
    const session = this.#session(name);
    if (!session.alive) return 'SERVER_NOT_READY';
    return this.#hardRefresh(session);
  }

  /** The live process of `name` dies. */
  crash(name: string): void {
    const session = this.#session(name);
    if (!session.alive) return;
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
      const session = this.#session(name);
      const generation = this.#generation.get(name) ?? 0;
      const tools = flat(session.published);
      servers.set(name, { session, revision: session.revision, generation, tools });
      expected.push({ name, tools, generation, revision: session.revision });
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

  /** `preparedCall.run()`: the outcome the runtime must produce. */
  run(callIndex: number): PredictedOutcome {
    const call = this.#calls[callIndex];
    if (call === undefined) throw new Error(`no call ${callIndex}`);
    return this.#outcome(call);
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
    if (entry.session.revision !== entry.revision) return 'STALE_CATALOG';
    if (binding.policyEpoch !== this.#policyEpoch) return 'TOOL_DENIED';
    if (!entry.session.alive) return 'CONNECTION_CLOSED';
    // A silent change may have removed the tool from the live process: the server refuses it.
    if (!flat(entry.session.serving).includes(call.tool)) return 'SERVER_ERROR';
    return 'OK';
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
    return true;
  }

  #hardRefresh(session: SessionModel): boolean {
    return this.#republish(session);
  }

  /** A dirty refresh: all or nothing. */
  #rebuild(): boolean {
    const starts: string[] = [];
    for (const name of this.#initial.keys()) {
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
      const current = this.#sessions.get(name);
      if (starts.includes(name) || current === undefined) {
        const pages = this.#initial.get(name) ?? [];
        this.#sessions.set(name, {
          id: ++this.#sessionCounter,
          server: name,
          configVersion: this.#configVersion.get(name) ?? 0,
          alive: true,
          serving: pages,
          published: pages,
          publishedEpoch: this.#policyEpoch,
          revision: 1,
        });
        this.#generation.set(name, (this.#generation.get(name) ?? 0) + 1);
      } else {
        this.#republish(current);
      }
    }
    this.#dirty = false;
    return true;
  }
}
