import type { RuntimeOracle, ServedPages } from '../oracle.js';
import { isServer, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `editNextCatalog(server, pages)`: the catalog the next process of a server serves changes (its
 * fixture is rewritten), while no live process serves it: the catalog a warm start shows from the
 * cache then differs from the live one (DESIGN §19.2). Needs a server without a live process and
 * in-memory servers (left out with `mutations: false`).
 */
export class EditNextCatalog implements ModelCommand {
  constructor(
    readonly server: string,
    readonly pages: ServedPages,
  ) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return isServer(model, this.server) && !model.alive(this.server);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.editNextCatalog(this.server, this.pages);
    if (real.processes.setNextCatalog === undefined) {
      throw new Error(`the fixture of ${this.server} cannot change`);
    }
    real.processes.setNextCatalog(this.server, this.pages);
  }
  toString(): string {
    return `editNextCatalog(${this.server}, ${JSON.stringify(this.pages)})`;
  }
}
