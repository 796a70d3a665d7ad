import type { RuntimeOracle } from '../oracle.js';
import type { ModelCommand, ModelSystem } from '../system.js';

/**
 * `releaseBinding(binding#B)`: ends step B. Needs binding B to exist; releasing it again is allowed
 * (release is idempotent), in the runtime now open (B counts its bindings), with no call waiting for a held live start.
 */
export class ReleaseBinding implements ModelCommand {
  constructor(readonly binding: number) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    const b = model.bindingAt(this.binding);
    return b !== undefined && !model.hasPending(b);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const b = model.bindingAt(this.binding) ?? -1;
    model.releaseBinding(b);
    real.bindings[b]?.release();
  }
  toString(): string {
    return `releaseBinding(binding#${this.binding})`;
  }
}
