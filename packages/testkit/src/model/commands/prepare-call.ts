import { isStepbindError, type PreparedCall } from '@stepbind/binding/internal';
import type { RuntimeOracle } from '../oracle.js';
import { agree, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `prepareCall(binding#B, tool#T)`: prepares the T-th tool binding B advertised (B counts the
 * bindings of the runtime now open). Needs binding B and its tool T to exist; a released binding is a target (it must
 * refuse with `BINDING_RELEASED`).
 */
export class PrepareCall implements ModelCommand {
  constructor(
    readonly binding: number,
    readonly tool: number,
  ) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    const b = model.bindingAt(this.binding);
    return b !== undefined && this.tool < model.toolsOf(b).length;
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const b = model.bindingAt(this.binding) ?? -1;
    const pick = model.toolsOf(b)[this.tool];
    const binding = real.bindings[b];
    if (pick === undefined || binding === undefined) {
      throw new Error(`${this.toString()}: run although its check failed`);
    }
    const expected = model.isReleased(b) ? 'BINDING_RELEASED' : 'OK';
    let call: PreparedCall;
    try {
      call = binding.prepareCall(`${pick.server}__${pick.tool}`);
    } catch (error) {
      agree(real, 'prepareCall', isStepbindError(error) ? error.code : 'THROW', expected);
      return;
    }
    agree(real, 'prepareCall', 'OK', expected);
    model.prepare(b, pick.server, pick.tool);
    real.calls.push({ call, binding: b });
  }
  toString(): string {
    return `prepareCall(binding#${this.binding}, tool#${this.tool})`;
  }
}
