import type { RuntimeOracle } from '../oracle.js';
import type { ModelCommand, ModelSystem } from '../system.js';

/** `raisePolicyEpoch`: the policy epoch rises by one. Applicable in every state. */
export class RaisePolicyEpoch implements ModelCommand {
  check(): boolean {
    return true;
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.raisePolicyEpoch();
    await real.runtime.setPolicyEpoch(real.runtime.registry.policyEpoch + 1);
  }
  toString(): string {
    return 'raisePolicyEpoch';
  }
}
