/**
 * Fleet policy: epochs, revocations (one tool, or a whole server), restores and approvals,
 * committed in PostgreSQL and broadcast with `LISTEN/NOTIFY`. Each worker keeps a local view that
 * admission reads without touching the database; a listener applies every change as it is
 * notified, a heartbeat on the same connection proves the view current, and after a lost
 * connection the view is read again on reconnect. A view older than `maxStalenessMs` refuses
 * every call (`POLICY_STALE`) rather than admit one on a policy that may have changed.
 */
import type { PgClient, PgQueryable } from './pg-driver.js';
import { ErrorCode, RuntimeError } from '@stepbind/binding/internal';
import { Backoff } from '../backoff.js';
import { destroyClient, isConnectionError, PgHandle, settlesWithin } from './pg.js';

/** The policy as committed: what every worker converges to. */
export interface PolicySnapshot {
  /** Increments with every committed change. */
  readonly version: number;
  readonly epoch: number;
  /** Revoked pairs as `[server, tool]`; tool `"*"` revokes the whole server. */
  readonly revoked: readonly (readonly [string, string])[];
  /** Fleet-wide approvals as `[server, tool]` (tool `"*"`: every tool of the server). */
  readonly approved: readonly (readonly [string, string])[];
}

/** One committed policy change (`stepbind policy …`, or the API). */
export type PolicyChange =
  | {
      readonly kind: 'revoke';
      readonly server: string;
      readonly tool?: string;
      readonly by?: string;
      readonly note?: string;
    }
  | { readonly kind: 'restore'; readonly server: string; readonly tool?: string }
  | { readonly kind: 'epoch'; readonly epoch?: number }
  | {
      readonly kind: 'approve';
      readonly server: string;
      readonly tool?: string;
      readonly by?: string;
    }
  | { readonly kind: 'unapprove'; readonly server: string; readonly tool?: string };

/** Whole-server wildcard in revocations and approvals. */
export const ALL_TOOLS = '*';

/**
 * Commits one policy change and notifies every listening worker, in one transaction (PostgreSQL
 * delivers a `NOTIFY` only when its transaction commits). An `epoch` change without a value raises
 * the epoch by one; a lower epoch is refused.
 *
 * @returns the policy as committed.
 * @throws RuntimeError `STORE_UNAVAILABLE`; `INVALID_OPTIONS` for an epoch that is not higher.
 */
export async function commitPolicyChange(
  handle: PgHandle,
  change: PolicyChange,
): Promise<PolicySnapshot> {
  return handle.tx('commit a policy change', async (client) => {
    const state = await client.query<{ epoch: string; version: string }>(
      'SELECT epoch, version FROM policy_state WHERE id = 1 FOR UPDATE',
    );
    const current = state.rows[0];
    if (current === undefined) throw new Error('policy_state row missing');
    let epoch = Number(current.epoch);
    const now = Date.now();
    switch (change.kind) {
      case 'revoke':
        await client.query(
          `INSERT INTO policy_revocations (server, tool, revoked_at, revoked_by, note) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (server, tool) DO UPDATE SET revoked_at = excluded.revoked_at, revoked_by = excluded.revoked_by, note = excluded.note`,
          [change.server, change.tool ?? ALL_TOOLS, now, change.by ?? null, change.note ?? null],
        );
        break;
      case 'restore':
        // Restoring a server lifts its whole-server revocation and every tool revocation of it.
        if (change.tool === undefined) {
          await client.query('DELETE FROM policy_revocations WHERE server = $1', [change.server]);
        } else {
          await client.query('DELETE FROM policy_revocations WHERE server = $1 AND tool = $2', [
            change.server,
            change.tool,
          ]);
        }
        break;
      case 'epoch': {
        const next = change.epoch ?? epoch + 1;
        if (!Number.isSafeInteger(next) || next <= epoch) {
          throw new RuntimeError(
            ErrorCode.INVALID_OPTIONS,
            `The fleet policy epoch can only increase (current ${epoch}, got ${String(change.epoch)}).`,
            { detail: { current: epoch, requested: change.epoch } },
          );
        }
        epoch = next;
        break;
      }
      case 'approve':
        await client.query(
          `INSERT INTO policy_approvals (server, tool, approved_at, approved_by) VALUES ($1, $2, $3, $4)
           ON CONFLICT (server, tool) DO UPDATE SET approved_at = excluded.approved_at, approved_by = excluded.approved_by`,
          [change.server, change.tool ?? ALL_TOOLS, now, change.by ?? null],
        );
        break;
      case 'unapprove':
        await client.query('DELETE FROM policy_approvals WHERE server = $1 AND tool = $2', [
          change.server,
          change.tool ?? ALL_TOOLS,
        ]);
        break;
    }
    const version = Number(current.version) + 1;
    await client.query(
      'UPDATE policy_state SET epoch = $1, version = $2, updated_at = $3 WHERE id = 1',
      [epoch, version, now],
    );
    await client.query('SELECT pg_notify($1, $2)', [handle.channel, String(version)]);
    return readPolicy(client);
  });
}

interface PolicyRow {
  version: string;
  epoch: string;
  revoked: string;
  approved: string;
}

/** Reads the whole committed policy (one round trip of three statements). */
export async function readPolicy(client: PgQueryable | PgHandle): Promise<PolicySnapshot> {
  const run = (text: string) =>
    client instanceof PgHandle ? client.query<PolicyRow>(text) : client.query<PolicyRow>(text);
  const { rows } = await run(
    `SELECT s.version, s.epoch,
       (SELECT coalesce(json_agg(json_build_array(server, tool)), '[]') FROM policy_revocations)::text AS revoked,
       (SELECT coalesce(json_agg(json_build_array(server, tool)), '[]') FROM policy_approvals)::text AS approved
     FROM policy_state s WHERE s.id = 1`,
  );
  const row = rows[0];
  if (row === undefined) throw new Error('policy_state row missing');
  return Object.freeze({
    version: Number(row.version),
    epoch: Number(row.epoch),
    revoked: Object.freeze(JSON.parse(row.revoked) as [string, string][]),
    approved: Object.freeze(JSON.parse(row.approved) as [string, string][]),
  });
}

/** Options of {@link PolicyView}. */
export interface PolicyViewOptions {
  /**
   * The oldest a local view may be (since it was last proven current) before calls are refused
   * with `POLICY_STALE`. @default 10000
   */
  readonly maxStalenessMs?: number;
  /** How often the listener proves the view current (a heartbeat query on its connection). @default maxStalenessMs / 4 */
  readonly heartbeatMs?: number;
  /** Reconnect backoff of the listener: first delay, doubled up to `maxMs`. @default { initialMs: 50, maxMs: 2000 } */
  readonly reconnect?: { readonly initialMs?: number; readonly maxMs?: number };
  /** The clock. @default Date.now */
  readonly now?: () => number;
  /** Every applied policy (after a notification, a heartbeat that found a change, or a reconnect). */
  readonly onApplied?: (
    policy: PolicySnapshot,
    cause: 'notify' | 'heartbeat' | 'reconnect' | 'open',
  ) => void;
  /** The listener lost its connection (`error` is redacted) or got it back. */
  readonly onConnection?: (event: { readonly connected: boolean; readonly error?: Error }) => void;
}

/**
 * A worker's local view of the fleet policy. {@link check} is the admission hot path: a clock
 * read, a staleness compare and two set lookups, no database access.
 */
export class PolicyView {
  readonly #pg: PgHandle;
  readonly #maxStalenessMs: number;
  readonly #heartbeatMs: number;
  /** Reconnect backoff of the listener (after each loss it starts again from its first delay). */
  readonly #backoff: Backoff;
  readonly #now: () => number;
  readonly #options: PolicyViewOptions;
  #policy: PolicySnapshot = Object.freeze({ version: -1, epoch: 0, revoked: [], approved: [] });
  #revoked = new Set<string>();
  #approved = new Set<string>();
  /** When the view was last proven current (a read on a connection that was listening). */
  #confirmedAt = 0;
  #client: PgClient | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #closed = false;
  #connecting: Promise<void> | undefined;
  /** The client of the connection attempt in progress, if any. */
  #connectingClient: PgClient | undefined;
  #refreshing: Promise<void> | undefined;
  #refreshAgain = false;

  constructor(handle: PgHandle, options: PolicyViewOptions = {}) {
    this.#pg = handle;
    this.#options = options;
    this.#maxStalenessMs = Math.max(1, options.maxStalenessMs ?? 10_000);
    this.#heartbeatMs = Math.max(1, options.heartbeatMs ?? Math.floor(this.#maxStalenessMs / 4));
    this.#backoff = new Backoff({
      initialMs: Math.max(1, options.reconnect?.initialMs ?? 50),
      maxMs: Math.max(1, options.reconnect?.maxMs ?? 2000),
    });
    this.#now = options.now ?? Date.now;
  }

  /** Starts listening and reads the policy once. @throws RuntimeError `STORE_UNAVAILABLE`. */
  async open(): Promise<void> {
    await this.#connect('open');
  }

  /** The policy in force locally. */
  get policy(): PolicySnapshot {
    return this.#policy;
  }

  /** The epoch in force locally. */
  get epoch(): number {
    return this.#policy.epoch;
  }

  /** True while the listener holds a connection. */
  get connected(): boolean {
    return this.#client !== undefined;
  }

  /** Milliseconds since the view was last proven current. */
  get ageMs(): number {
    return this.#now() - this.#confirmedAt;
  }

  /**
   * Admission: whether (server, tool) is revoked in the local view.
   *
   * @throws RuntimeError `POLICY_STALE` when the view is older than `maxStalenessMs` (the call is
   *   refused, not admitted; it becomes a `CallError` with `delivery: 'not-sent'`).
   */
  isRevoked(server: string, tool: string): boolean {
    const age = this.#now() - this.#confirmedAt;
    if (age > this.#maxStalenessMs) {
      throw new RuntimeError(
        ErrorCode.POLICY_STALE,
        `The fleet policy of this worker was last confirmed ${age} ms ago (bound ${this.#maxStalenessMs} ms; its notification connection to the store is ${this.#client === undefined ? 'lost and reconnecting' : 'not answering'}), so "${tool}" of server "${server}" was refused rather than run on a policy that may have changed. It runs again once the store is reachable.`,
        { detail: { server, tool, ageMs: age, maxStalenessMs: this.#maxStalenessMs } },
      );
    }
    return (
      this.#revoked.has(pairKey(server, tool)) || this.#revoked.has(pairKey(server, ALL_TOOLS))
    );
  }

  /** True when the fleet approved (server, tool) (or every tool of the server). */
  isApproved(server: string, tool: string): boolean {
    return (
      this.#approved.has(pairKey(server, tool)) || this.#approved.has(pairKey(server, ALL_TOOLS))
    );
  }

  /** Re-reads the policy now (also used by tests and the CLI). */
  async refresh(): Promise<void> {
    await this.#reload('heartbeat', this.#client);
  }

  /** Stops listening; clears every timer. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#heartbeat);
    this.#backoff.cancel();
    // A frozen database answers neither a connection in progress nor the goodbye: both are
    // bounded by the handle's close grace, then the connection is destroyed.
    const connecting = this.#connecting?.catch(() => undefined);
    if (connecting !== undefined && !(await settlesWithin(connecting, this.#pg.closeGraceMs))) {
      if (this.#connectingClient !== undefined) destroyClient(this.#connectingClient);
      await connecting;
    }
    const client = this.#client;
    this.#client = undefined;
    if (client === undefined) return;
    const ended = client.end().catch(() => undefined);
    if (!(await settlesWithin(ended, this.#pg.closeGraceMs))) destroyClient(client);
  }

  async #connect(cause: 'open' | 'reconnect'): Promise<void> {
    const attempt = (async () => {
      const client = this.#pg.client(`stepbind-listen:${this.#pg.schema}`);
      this.#connectingClient = client;
      client.on('error', (error) => this.#lost(client, error));
      client.on('end', () => this.#lost(client, new Error('the connection ended')));
      client.on('notification', (message) => {
        if (message.channel !== this.#pg.channel) return;
        const version = Number(message.payload);
        if (Number.isSafeInteger(version) && version <= this.#policy.version) return;
        void this.#reload('notify', client);
      });
      try {
        await client.connect();
        await client.query(`LISTEN ${this.#pg.channel}`);
        if (this.#closed) throw new Error('closed');
        this.#client = client;
        // Listening before reading: no change committed after this read can go unnoticed.
        await this.#reload(cause, client);
      } catch (error) {
        if (this.#client === client) this.#client = undefined;
        await client.end().catch(() => undefined);
        throw error;
      }
      clearInterval(this.#heartbeat);
      this.#heartbeat = setInterval(
        () => void this.#reload('heartbeat', client),
        this.#heartbeatMs,
      );
      this.#heartbeat.unref();
      this.#options.onConnection?.({ connected: true });
    })();
    this.#connecting = attempt;
    try {
      await attempt;
    } catch (error) {
      if (error instanceof RuntimeError) throw error;
      throw this.#pg.failure('listen for policy changes', 'unreachable', error);
    } finally {
      this.#connecting = undefined;
      this.#connectingClient = undefined;
    }
  }

  #lost(client: PgClient, error: Error): void {
    if (this.#client !== client || this.#closed) return;
    this.#client = undefined;
    clearInterval(this.#heartbeat);
    void client.end().catch(() => undefined);
    this.#options.onConnection?.({ connected: false, error: this.#pg.redactor.error(error) });
    this.#backoff.reset();
    this.#scheduleReconnect();
  }

  /** Arms the next reconnect: the loss counts as the first failure, each failed attempt as one more. */
  #scheduleReconnect(): void {
    if (this.#closed) return;
    // No attempt limit: the delay is always defined.
    const delay = this.#backoff.fail() ?? 0;
    this.#backoff.schedule(
      delay,
      () => {
        this.#connect('reconnect').catch(() => {
          this.#scheduleReconnect();
        });
      },
      // The runtime's close() clears it; an app that never closes may still exit.
      { unref: true },
    );
  }

  /** Reads and applies the policy over `client`; coalesces reads that overlap. */
  async #reload(
    cause: 'notify' | 'heartbeat' | 'reconnect' | 'open',
    client: PgClient | undefined,
  ): Promise<void> {
    if (client === undefined || this.#closed) return;
    if (this.#refreshing !== undefined) {
      this.#refreshAgain = true;
      return this.#refreshing;
    }
    const run = async (): Promise<void> => {
      do {
        this.#refreshAgain = false;
        const startedAt = this.#now();
        let policy: PolicySnapshot;
        try {
          policy = await readPolicy(client);
        } catch (error) {
          if (cause === 'open' || cause === 'reconnect') throw error;
          if (isConnectionError(error)) this.#lost(client, error as Error);
          return;
        }
        // Proven current as of when the read started, and only while this client still listens.
        if (this.#client !== client) return;
        this.#confirmedAt = Math.max(this.#confirmedAt, startedAt);
        if (policy.version !== this.#policy.version) {
          this.#apply(policy);
          this.#options.onApplied?.(policy, cause);
        }
      } while (this.#refreshAgain);
    };
    this.#refreshing = run().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  #apply(policy: PolicySnapshot): void {
    this.#policy = policy;
    this.#revoked = new Set(policy.revoked.map(([s, t]) => pairKey(s, t)));
    this.#approved = new Set(policy.approved.map(([s, t]) => pairKey(s, t)));
  }
}

function pairKey(server: string, tool: string): string {
  return `${server}\u0000${tool}`;
}
