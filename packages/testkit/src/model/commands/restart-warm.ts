import type { RuntimeOracle } from '../oracle.js';
import { agree, trackSessions, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `restartWarm(eager | lazy)`: closes the runtime and opens a new one over the same servers and
 * the same catalog cache file (DESIGN §19.1–§19.3); every process keeps serving what it served.
 * Servers with a cached catalog are shown provisionally and their live starts are held until
 * `releaseLiveStart`; `lazy` makes every server lazy. Needs no call waiting for a held start, no
 * held start, and no start failure armed for a server that must start at open (it would fail the
 * open). Compares which servers are provisional and which processes started at open.
 */
export class RestartWarm implements ModelCommand {
  constructor(readonly lazy: boolean) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return (
      !model.hasPending() &&
      model.servers.every((s) => !model.gated(s) && (model.cached(s) || !model.failsNextStart(s)))
    );
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    // Each new process serves what its predecessor served (a fixture rewritten to match).
    for (const s of model.servers) {
      if (model.alive(s)) real.processes.setNextCatalog?.(s, model.serving(s));
    }
    model.restartWarm(this.lazy);
    for (const binding of real.bindings) binding.release();
    const before = model.servers.map((s) => real.processes.instances(s).length);
    await real.restart({ lazy: this.lazy, hold: model.servers.filter((s) => model.gated(s)) });
    const status = real.runtime.status().servers;
    agree(
      real,
      'provisional servers after a warm restart',
      model.servers.map((s) => status.find((x) => x.name === s)?.state === 'provisional'),
      model.servers.map((s) => model.provisional(s)),
    );
    agree(
      real,
      'processes started at open',
      model.servers.map((s, i) => real.processes.instances(s).length - (before[i] ?? 0)),
      model.servers.map((s) => (model.provisional(s) ? 0 : 1)),
    );
    trackSessions(model, real);
  }
  toString(): string {
    return `restartWarm(${this.lazy ? 'lazy' : 'eager'})`;
  }
}
