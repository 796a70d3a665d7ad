import { isStepbindError } from '@stepbind/binding/internal';
import type { RuntimeOracle } from '../oracle.js';
import { agree, isServer, trackSessions, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `hardRefresh(server)`: re-lists one configured server. Its process may be dead: the runtime must
 * then refuse with `SERVER_NOT_READY`, which is compared like any other outcome. A provisional
 * server starts live (DESIGN §19.3); not while its start is held.
 */
export class HardRefresh implements ModelCommand {
  constructor(readonly server: string) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    // A held live start would hold the hard refresh of a provisional server too.
    return isServer(model, this.server) && !model.gated(this.server);
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
    trackSessions(model, real);
  }
  toString(): string {
    return `hardRefresh(${this.server})`;
  }
}
