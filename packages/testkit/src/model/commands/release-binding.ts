import type { RuntimeOracle } from '../oracle.js';
import type { ModelCommand, ModelSystem } from '../system.js';

/**
 * `releaseBinding(binding#B)`: ends step B. Needs binding B to exist; releasing it again is allowed
 * (release is idempotent), in the runtime now open, with no call waiting for a held live start.
 */
export class ReleaseBinding implements ModelCommand {
  constructor(readonly binding: number) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return model.isCurrent(this.binding) && !model.hasPending(this.binding);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.releaseBinding(this.binding);
    real.bindings[this.binding]?.release();
  }
  toString(): string {
    return `releaseBinding(binding#${this.binding})`;
  }
}
