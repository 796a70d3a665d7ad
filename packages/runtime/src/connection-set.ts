import {
  bindingViewOf,
  type ApprovalMode,
  type BindingView,
  type BoundServer,
  type LeftOutServer,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { RuntimeConfig } from './config.js';
import type { ServerSession } from './session.js';

/** One server of a ConnectionSet: bound, still starting (optional servers only) or failed. */
export type Entry =
  | { kind: 'ready'; readonly session: ServerSession }
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
          trustAnnotations: session.config.trustAnnotations,
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
