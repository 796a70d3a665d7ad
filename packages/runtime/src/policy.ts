import type { CallPolicy } from '@stepbind/binding/internal';

/**
 * A policy shared beyond this process (the fleet store's local policy view, DESIGN §15). Read at
 * each admission without I/O; `isRevoked` may throw (`POLICY_STALE`) to refuse a call rather than
 * admit it on a view it cannot prove current.
 */
export interface SharedPolicy {
  isRevoked(server: string, tool: string): boolean;
  isApproved(server: string, tool: string): boolean;
}

/**
 * The runtime's call policy, read by every binding's admission (`PreparedCall` in
 * `@stepbind/binding`, step 2 of DESIGN §7) at each call: the policy epoch in force, the revoked
 * tools and the standing approvals. One object per runtime, so a revocation reaches bindings
 * captured before it. With a fleet store, its shared policy is consulted too: a tool revoked
 * there is refused here, and a call the fleet approved needs no `prepare` approval.
 */
export class RuntimePolicy implements CallPolicy {
  readonly #epochOf: () => number;
  readonly #revoked = new Set<string>();
  /** The fleet's policy, when a store is attached (set once, at open). */
  shared: SharedPolicy | undefined;

  /** @param epochOf reads the policy epoch from its one source (the runtime's registry). */
  constructor(epochOf: () => number) {
    this.#epochOf = epochOf;
  }

  /** The policy epoch in force (not stored here: read from its source at each admission). */
  get policyEpoch(): number {
    return this.#epochOf();
  }

  /** True when (server, raw tool) was revoked here or fleet-wide. @throws RuntimeError `POLICY_STALE`. */
  readonly isRevoked = (server: string, tool: string): boolean =>
    this.shared?.isRevoked(server, tool) === true ||
    (this.#revoked.size > 0 && this.#revoked.has(`${server}\u0000${tool}`));

  /** True when the fleet approved (server, raw tool) for every call (`stepbind policy approve`). */
  readonly isApproved = (server: string, tool: string): boolean =>
    this.shared?.isApproved(server, tool) === true;

  /** Refuses every later call to (server, raw tool). */
  revoke(server: string, tool: string): void {
    this.#revoked.add(`${server}\u0000${tool}`);
  }

  /** Lifts a revocation made by {@link revoke} (the fleet's, if any, is not touched). */
  restore(server: string, tool: string): void {
    this.#revoked.delete(`${server}\u0000${tool}`);
  }
}
