import { isStepbindError, type PreparedCall } from '@stepbind/binding/internal';
import type { RuntimeOracle } from '../oracle.js';
import { agree, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `prepareCall(binding#B, tool#T)`: prepares the T-th tool binding B advertised. Needs binding B
 * and its tool T to exist (in the runtime now open); a released binding is a target (it must
 * refuse with `BINDING_RELEASED`).
 */
export class PrepareCall implements ModelCommand {
  constructor(
    readonly binding: number,
    readonly tool: number,
  ) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return model.isCurrent(this.binding) && this.tool < model.toolsOf(this.binding).length;
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const pick = model.toolsOf(this.binding)[this.tool];
    const binding = real.bindings[this.binding];
    if (pick === undefined || binding === undefined) {
      throw new Error(`${this.toString()}: run although its check failed`);
    }
    const expected = model.isReleased(this.binding) ? 'BINDING_RELEASED' : 'OK';
    let call: PreparedCall;
    try {
      call = binding.prepareCall(`${pick.server}__${pick.tool}`);
    } catch (error) {
      agree(real, 'prepareCall', isStepbindError(error) ? error.code : 'THROW', expected);
      return;
    }
    agree(real, 'prepareCall', 'OK', expected);
    model.prepare(this.binding, pick.server, pick.tool);
    real.calls.push({ call, binding: this.binding });
  }
  toString(): string {
    return `prepareCall(binding#${this.binding}, tool#${this.tool})`;
  }
}
