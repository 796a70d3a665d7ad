import { isStepbindError } from '@stepbind/binding/internal';
import type { RuntimeOracle } from '../oracle.js';
import { agree, isServer, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `hardRefresh(server)`: re-lists one configured server. Its process may be dead: the runtime must
 * then refuse with `SERVER_NOT_READY`, which is compared like any other outcome.
 */
export class HardRefresh implements ModelCommand {
  constructor(readonly server: string) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return isServer(model, this.server);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const expected = model.hardRefresh(this.server);
    let actual: boolean | string;
    try {
      actual = await real.runtime.hardRefresh(this.server);
    } catch (error) {
      if (!isStepbindError(error)) throw error;
      actual = error.code;
    }
    agree(real, `hardRefresh(${this.server})`, actual, expected);
  }
  toString(): string {
    return `hardRefresh(${this.server})`;
  }
}
