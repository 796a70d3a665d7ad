import {
  bindingViewOf,
  type ApprovalMode,
  type BindingView,
  type BoundServer,
  type LeftOutServer,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { RuntimeConfig } from './config.js';
import type { ManagedServer } from './server/managed-server.js';

/** One server of a ConnectionSet: bound, still starting (optional servers only) or failed. */
export type Entry =
  | { kind: 'ready'; readonly server: ManagedServer }
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

function buildView(set: ConnectionSet, approval: ApprovalMode): BindingView {
  const servers: BoundServer[] = [];
  const leftOut: LeftOutServer[] = [];
  for (const [name, entry] of set.entries) {
    const required = set.config.servers.get(name)?.required ?? false;
    if (entry.kind === 'ready') {
      const server = entry.server;
      const slot = server.slot;
      if (slot === undefined) continue;
      if (server.connection.closed) {
        leftOut.push({ name, required, reason: 'closed' });
        continue;
      }
      servers.push(
        Object.freeze({
          name,
          slot,
          catalog: slot.catalog,
          revision: slot.revision,
          caller: server.connection,
          callTimeoutMs: server.config.callTimeoutMs,
          approval: server.config.approval ?? approval,
          ...(server.config.autoApprove.length === 0
            ? {}
            : { autoApprove: new Set(server.config.autoApprove) }),
          callLimits: server.config.limits,
          retryReads: server.config.retryReads,
          trustAnnotations: server.config.trustAnnotations,
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
