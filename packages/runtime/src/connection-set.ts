import {
  bindingViewOf,
  type ApprovalMode,
  type BindingView,
  type BoundServer,
  type CatalogRegistry,
  type LeftOutServer,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { RuntimeConfig, ServerConfig } from './config.js';
import type { ManagedServer } from './server/managed-server.js';
import type { ProvisionalServer } from './server/provisional.js';

/**
 * One server of a ConnectionSet: bound, shown from its cached catalog until its live one is
 * published (DESIGN §19.2), still starting (optional servers only) or failed.
 */
export type Entry =
  | { kind: 'ready'; readonly server: ManagedServer }
  | { kind: 'provisional'; readonly provisional: ProvisionalServer }
  | { kind: 'starting'; readonly promise: Promise<void> }
  | { kind: 'failed'; readonly error: StepbindError };

/** An immutable set of server entries (only optional entries move from starting to ready/failed). */
export class ConnectionSet {
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

  /** Invalidates the view whenever `server`'s catalog is swapped (until {@link detach}). */
  watch(server: ManagedServer): void {
    if (server.slot !== undefined)
      this.#unsubscribe.push(server.slot.onSwap(() => this.invalidate()));
  }

  /** Stops following the catalogs of its servers (the set drained or the runtime closes). */
  detach(): void {
    for (const off of this.#unsubscribe) off();
    this.#unsubscribe = [];
  }

  /** The servers bound in this set. */
  servers(): ManagedServer[] {
    const out: ManagedServer[] = [];
    for (const entry of this.entries.values()) if (entry.kind === 'ready') out.push(entry.server);
    return out;
  }

  /** Its provisional servers (shown from the catalog cache). */
  provisionals(): ProvisionalServer[] {
    const out: ProvisionalServer[] = [];
    for (const entry of this.entries.values())
      if (entry.kind === 'provisional') out.push(entry.provisional);
    return out;
  }

  /** The starts of its optional servers still under way. */
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

/**
 * A live server as a binding sees it now: its slot at the current revision and its connection
 * (DESIGN §2). `undefined` before its first catalog is installed.
 */
export function boundServerOf(
  server: ManagedServer,
  approval: ApprovalMode,
): BoundServer | undefined {
  const slot = server.slot;
  if (slot === undefined) return undefined;
  return Object.freeze({
    name: server.name,
    slot,
    catalog: slot.catalog,
    revision: slot.revision,
    caller: server.caller,
    ...callSettingsOf(server.config, approval),
    features: server.features,
  });
}

/** The per-server call settings of a bound server, from its configuration. */
function callSettingsOf(
  config: ServerConfig,
  approval: ApprovalMode,
): Omit<
  BoundServer,
  'name' | 'slot' | 'catalog' | 'revision' | 'caller' | 'provisional' | 'features'
> {
  return {
    callTimeoutMs: config.callTimeoutMs,
    approval: config.approval ?? approval,
    ...(config.autoApprove.length === 0 ? {} : { autoApprove: new Set(config.autoApprove) }),
    callLimits: config.limits,
    retryReads: config.retryReads,
    trustAnnotations: config.trustAnnotations,
  };
}

function buildView(set: ConnectionSet, approval: ApprovalMode): BindingView {
  const servers: BoundServer[] = [];
  const leftOut: LeftOutServer[] = [];
  for (const [name, entry] of set.entries) {
    const required = set.config.servers.get(name)?.required ?? false;
    if (entry.kind === 'ready') {
      const server = entry.server;
      if (server.connection.closed) {
        if (server.slot !== undefined) leftOut.push({ name, required, reason: 'closed' });
        continue;
      }
      const bound = boundServerOf(server, approval);
      if (bound !== undefined) servers.push(bound);
    } else if (entry.kind === 'provisional') {
      const p = entry.provisional;
      if (p.failure !== undefined) {
        leftOut.push({
          name,
          required,
          reason: 'failed',
          error: { code: p.failure.code, message: p.failure.message },
        });
        continue;
      }
      servers.push(
        Object.freeze({
          name,
          slot: p.slot,
          catalog: p.cached,
          revision: p.slot.revision,
          caller: p.caller,
          provisional: p,
          ...callSettingsOf(p.config, approval),
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
  return bindingViewOf(servers, leftOut);
}

/**
 * Holds every catalog a step saw, so it stays readable (not RETIRED) until the step is released.
 * A catalog retired by `acceptIdentityChange` still serves until the next refresh, and a
 * provisional (cached) one is not the registry's: neither is held. @returns the releases.
 */
export function holdCatalogs(registry: CatalogRegistry, view: BindingView): (() => void)[] {
  return view.servers.map((s) =>
    s.provisional !== undefined || registry.lifecycleOf(s.catalog) === 'RETIRED'
      ? () => undefined
      : registry.acquire(s.catalog),
  );
}
