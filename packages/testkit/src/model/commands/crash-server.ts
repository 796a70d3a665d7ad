import type { RuntimeOracle } from '../oracle.js';
import { agree, isServer, observe, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `crashServer(server)`: the live process of a server dies (SIGKILL over stdio, a closed transport
 * in memory). Needs a live process. Waits for the runtime to see the connection close, then
 * compares the dirty flag.
 */
export class CrashServer implements ModelCommand {
  constructor(readonly server: string) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return isServer(model, this.server) && model.alive(this.server);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    model.crash(this.server);
    const instance = real.current.get(this.server);
    if (instance === undefined) throw new Error(`no live process of ${this.server}`);
    const closed = real.log.next('connection-closed', (e) => e.server === this.server);
    await instance.crash();
    const event = await observe(closed, `the connection of ${this.server} closing`);
    agree(real, `connection of ${this.server} closed unexpectedly`, event.expected, false);
    agree(real, `dirty after crash of ${this.server}`, real.runtime.dirty, true);
  }
  toString(): string {
    return `crashServer(${this.server})`;
  }
}
