/**
 * The seam between a runtime and its fleet: {@link attachFleet} opens the shared PostgreSQL store
 * (migrating it), and the {@link FleetStore} it returns is what `McpRuntime` calls at its three
 * hooks: journal creation (`journal`), catalog publication (`publish`) and call admission
 * (`isRevoked`). Everything else about the fleet lives behind this object.
 */
import { hostname } from 'node:os';
import {
  checkOptions,
  sameKeys,
  type CatalogSnapshot,
  type PrepareContext,
} from '@stepbind/binding/internal';
import { fleetOptionsSchema, storeOptionSchema } from '../options-schema.js';
import { PostgresJournalStore } from './journal-store.js';
import { migrateFleetStore, type MigrationReport } from './migrations.js';
import { parseStoreTarget, PgHandle, type FleetStoreTarget, type PgTuning } from './pg.js';
import { STORE_KEYS } from './target.js';
import {
  commitPolicyChange,
  PolicyView,
  type PolicyChange,
  type PolicySnapshot,
  type PolicyViewOptions,
} from './policy.js';
import { FleetRegistry, type FleetPublication } from './registry.js';
import { PostgresTokenStore } from './token-store.js';

/** Something the fleet layer reports (policy applied, notification connection lost or back). */
export type FleetEvent =
  | {
      readonly type: 'fleet-policy-applied';
      readonly version: number;
      readonly epoch: number;
      readonly cause: 'notify' | 'heartbeat' | 'reconnect' | 'open';
    }
  | { readonly type: 'fleet-connection'; readonly connected: boolean; readonly error?: Error };

/** Options of {@link attachFleet}: where the store is, plus tuning. */
export interface FleetOptions
  extends
    FleetStoreTarget,
    PgTuning,
    Pick<PolicyViewOptions, 'maxStalenessMs' | 'heartbeatMs' | 'reconnect' | 'now'> {
  /** Receives every {@link FleetEvent}. */
  readonly onEvent?: (event: FleetEvent) => void;
  /** This worker's name in the registry (`published_by`). @default `host:pid` */
  readonly owner?: string;
}
sameKeys<FleetOptions>()(fleetOptionsSchema);

/** The `store` option: a `postgres://` URL, or {@link FleetOptions}. */
export type StoreOption = string | FleetOptions;

/**
 * Opens the fleet store: connects, applies the migrations (safe from many workers at once),
 * starts listening for policy changes and reads the policy.
 *
 * @throws RuntimeError `INVALID_OPTIONS` for an unknown or wrong option (nothing connected);
 *   ConfigError `INVALID_CONFIG` for a malformed `store`; RuntimeError `STORE_UNAVAILABLE`
 *   (the database cannot be reached after the bounded retries, or its schema is newer).
 */
export async function attachFleet(store: StoreOption): Promise<FleetStore> {
  checkOptions(storeOptionSchema, store, {
    fn: 'attachFleet',
    root: 'store',
    consequence: 'Nothing was connected; fix the option and call again.',
  });
  const options: FleetOptions = typeof store === 'string' ? { url: store } : store;
  // The target's keys are validated as a configuration file's are (a JavaScript caller's
  // out-of-range timeout is refused here, not clamped by Node to 1 ms).
  const target = parseStoreTarget(
    Object.fromEntries(
      Object.entries(options).filter(([key]) => (STORE_KEYS as readonly string[]).includes(key)),
    ),
    '$.store',
  );
  const handle = new PgHandle(target, { ...options, ...target });
  try {
    const migration = await migrateFleetStore(handle);
    const fleet = new FleetStore(handle, migration, options);
    // Fleet time is the database's: measured before the journal decides anything (DESIGN §15).
    await fleet.journal.syncClock();
    await fleet.policy.open();
    return fleet;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** A worker's handle on the fleet: shared journal, registry and policy. Close it last. */
export class FleetStore {
  readonly handle: PgHandle;
  /** The execution journal store (the runtime closes it with its journal). */
  readonly journal: PostgresJournalStore;
  readonly registry: FleetRegistry;
  readonly policy: PolicyView;
  /** What the migrations did at open. */
  readonly migration: MigrationReport;
  readonly #epochListeners = new Set<(epoch: number) => void>();
  #tokens: PostgresTokenStore | undefined;
  #closed = false;

  /** @internal use {@link attachFleet}. */
  constructor(handle: PgHandle, migration: MigrationReport, options: FleetOptions) {
    this.handle = handle;
    this.migration = migration;
    this.journal = new PostgresJournalStore(handle);
    this.registry = new FleetRegistry(handle, options.owner ?? `${hostname()}:${process.pid}`);
    const onEvent = options.onEvent;
    this.policy = new PolicyView(handle, {
      ...(options.maxStalenessMs === undefined ? {} : { maxStalenessMs: options.maxStalenessMs }),
      ...(options.heartbeatMs === undefined ? {} : { heartbeatMs: options.heartbeatMs }),
      ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
      ...(options.now === undefined ? {} : { now: options.now }),
      onApplied: (policy, cause) => {
        onEvent?.({
          type: 'fleet-policy-applied',
          version: policy.version,
          epoch: policy.epoch,
          cause,
        });
        for (const listener of this.#epochListeners) listener(policy.epoch);
      },
      onConnection: (event) => onEvent?.({ type: 'fleet-connection', ...event }),
    });
  }

  /**
   * The fleet's OAuth token store (made at the first call, then the same one): logins shared by
   * every worker, refresh single-flight across the fleet. Closed with this store.
   */
  tokenStore(): PostgresTokenStore {
    this.#tokens ??= new PostgresTokenStore(this.handle);
    return this.#tokens;
  }

  /** Where the store is (URL redacted, schema). */
  get location(): string {
    return this.handle.location;
  }

  /** Admission hot path: the local policy view, no database access. @throws RuntimeError `POLICY_STALE`. */
  isRevoked(server: string, tool: string): boolean {
    return this.policy.isRevoked(server, tool);
  }

  /** The fleet epoch in the local view. */
  get epoch(): number {
    return this.policy.epoch;
  }

  /**
   * Calls `listener` with the fleet epoch after every applied policy change (the runtime raises
   * its own epoch from it). @returns a function that removes the listener.
   */
  onEpoch(listener: (epoch: number) => void): () => void {
    this.#epochListeners.add(listener);
    return () => this.#epochListeners.delete(listener);
  }

  /** Publication hook: the fleet CAS for candidates about to be published locally, as one unit. */
  publish(candidates: readonly CatalogSnapshot[]): Promise<readonly FleetPublication[]> {
    return this.registry.publish(candidates);
  }

  /**
   * Commits a policy change and broadcasts it (see {@link commitPolicyChange}), then re-reads this
   * worker's view, so the change is in force here when it resolves (other workers apply it when
   * notified). While the view's listener is reconnecting, the re-read is left to the reconnect.
   */
  async change(change: PolicyChange): Promise<PolicySnapshot> {
    const committed = await commitPolicyChange(this.handle, change);
    await this.policy.refresh();
    return committed;
  }

  /** Revokes one tool (or, without `tool`, a whole server) fleet-wide. */
  revoke(server: string, tool?: string, by?: string): Promise<PolicySnapshot> {
    return this.change({
      kind: 'revoke',
      server,
      ...(tool === undefined ? {} : { tool }),
      ...(by === undefined ? {} : { by }),
    });
  }

  /** Lifts a revocation (without `tool`: every revocation of the server). */
  restore(server: string, tool?: string): Promise<PolicySnapshot> {
    return this.change({ kind: 'restore', server, ...(tool === undefined ? {} : { tool }) });
  }

  /** Raises the fleet epoch (by one, or to `epoch`). */
  raiseEpoch(epoch?: number): Promise<PolicySnapshot> {
    return this.change({ kind: 'epoch', ...(epoch === undefined ? {} : { epoch }) });
  }

  /**
   * A `prepare` hook that approves a call the fleet approved (`stepbind policy approve`), so a
   * write that needs an approval runs without asking again; any other call is left unapproved.
   */
  readonly prepare = (ctx: PrepareContext): undefined => {
    if (this.policy.isApproved(ctx.server, ctx.tool)) ctx.approve();
    return undefined;
  };

  /** The runtime's journal options over this store (the tuning given is kept). */
  journalOptions(tuning?: { readonly retentionMs?: number; readonly inProgressTtlMs?: number }): {
    readonly store: PostgresJournalStore;
    readonly retentionMs?: number;
    readonly inProgressTtlMs?: number;
  } {
    return {
      store: this.journal,
      ...(tuning?.retentionMs === undefined ? {} : { retentionMs: tuning.retentionMs }),
      ...(tuning?.inProgressTtlMs === undefined ? {} : { inProgressTtlMs: tuning.inProgressTtlMs }),
    };
  }

  /**
   * Makes `runtime` follow the fleet epoch: raised now if the fleet's is higher, and on every
   * applied change after. @returns a function that stops following.
   */
  bind(runtime: {
    readonly registry: { readonly policyEpoch: number };
    setPolicyEpochLocally(epoch: number): void;
  }): () => void {
    // Locally: the fleet already holds this epoch; writing it back would loop.
    const follow = (epoch: number): void => {
      if (epoch > runtime.registry.policyEpoch) runtime.setPolicyEpochLocally(epoch);
    };
    follow(this.epoch);
    return this.onEpoch(follow);
  }

  /**
   * Stops listening and ends every connection; bounded even when the database does not answer
   * (pending queries abandoned, connections destroyed after `closeGraceMs`). Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#epochListeners.clear();
    await this.policy.close();
    await this.#tokens?.close();
    await this.journal.close();
    await this.handle.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
