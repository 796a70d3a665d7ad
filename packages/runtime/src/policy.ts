import type { CallPolicy } from '@stepbind/binding/internal';

/**
 * The runtime's call policy, read by every binding's admission (`PreparedCall` in
 * `@stepbind/binding`, step 2 of DESIGN §7) at each call: the policy epoch in force and the
 * revoked tools. One object per runtime, so a revocation reaches bindings captured before it.
 */
export class RuntimePolicy implements CallPolicy {
  policyEpoch: number;
  readonly #revoked = new Set<string>();

  constructor(policyEpoch: number) {
    this.policyEpoch = policyEpoch;
  }

  /** True when (server, raw tool) was revoked. */
  readonly isRevoked = (server: string, tool: string): boolean =>
    this.#revoked.size > 0 && this.#revoked.has(`${server}\u0000${tool}`);

  /** Refuses every later call to (server, raw tool). */
  revoke(server: string, tool: string): void {
    this.#revoked.add(`${server}\u0000${tool}`);
  }
}
