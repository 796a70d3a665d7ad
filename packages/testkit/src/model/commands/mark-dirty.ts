import type { RuntimeOracle } from '../oracle.js';
import { agree, type ModelCommand, type ModelSystem } from '../system.js';

/** `markDirty`: sets the dirty flag. Applicable in every state (marking twice is one refresh). */
export class MarkDirty implements ModelCommand {
  check(): boolean {
    return true;
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.markDirty();
    real.runtime.markDirty('model');
    agree(real, 'dirty', real.runtime.dirty, true);
  }
  toString(): string {
    return 'markDirty';
  }
}
