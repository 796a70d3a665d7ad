import type { RuntimeOracle } from '../oracle.js';
import { isServer, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `changeConfig(server)`: the configuration of a configured server changes its transport identity
 * (a new process at the next refresh).
 */
export class ChangeConfig implements ModelCommand {
  constructor(readonly server: string) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    // A held start would hold the start of the new identity too.
    return isServer(model, this.server) && !model.gated(this.server);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.changeConfig(this.server);
    const versions = real.configVersions;
    versions.set(this.server, (versions.get(this.server) ?? 0) + 1);
    real.runtime.updateConfig(real.processes.config(versions));
  }
  toString(): string {
    return `changeConfig(${this.server})`;
  }
}
