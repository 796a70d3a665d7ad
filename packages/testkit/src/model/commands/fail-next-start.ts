import type { RuntimeOracle } from '../oracle.js';
import { isServer, type ModelCommand, type ModelSystem } from '../system.js';

/** `failNextStart(server)`: the next start of a configured server fails once. */
export class FailNextStart implements ModelCommand {
  constructor(readonly server: string) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return isServer(model, this.server);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.failNextStart(this.server);
    real.processes.failNextConnect(this.server);
  }
  toString(): string {
    return `failNextStart(${this.server})`;
  }
}
