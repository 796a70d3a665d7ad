import type { RuntimeOracle, ServedPages } from '../oracle.js';
import { agree, isServer, observe, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `mutateCatalog(server, pages, withListChanged | silent)`: the live process of a server replaces
 * its catalog, and with `withListChanged` notifies. Needs a live process (a dead one serves
 * nothing) and in-memory servers (`modelCommands({ mutations: false })` leaves it out for stdio).
 */
export class MutateCatalog implements ModelCommand {
  constructor(
    readonly server: string,
    readonly pages: ServedPages,
    readonly listChanged: boolean,
  ) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return isServer(model, this.server) && model.alive(this.server);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.mutateCatalog(this.server, this.pages, this.listChanged);
    const instance = real.current.get(this.server);
    if (instance?.replaceCatalog === undefined || instance.notifyListChanged === undefined) {
      throw new Error(`the live instance of ${this.server} cannot change its catalog`);
    }
    instance.replaceCatalog(this.pages);
    if (!this.listChanged) return;
    const before = real.log.count('list-changed');
    const delivered = real.log.next('list-changed', (e) => e.server === this.server);
    await instance.notifyListChanged();
    await observe(delivered, `list_changed of ${this.server} reaching the runtime`);
    agree(real, 'list_changed delivered', real.log.count('list-changed'), before + 1);
    await real.runtime.whenIdle();
  }
  toString(): string {
    return `mutateCatalog(${this.server}, ${JSON.stringify(this.pages)}, ${this.listChanged ? 'withListChanged' : 'silent'})`;
  }
}
