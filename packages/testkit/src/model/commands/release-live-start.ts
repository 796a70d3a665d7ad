import type { RuntimeEvent } from '@stepbind/runtime';
import type { RuntimeOracle } from '../oracle.js';
import {
  agree,
  countProvisional,
  isServer,
  observe,
  trackSessions,
  type ModelCommand,
  type ModelSystem,
} from '../system.js';

/**
 * `releaseLiveStart(server)`: the held live start of a provisional server proceeds (DESIGN
 * §19.2). If the runtime had asked for it (eager, or a lazy one a call started), awaits its
 * publication or failure, then settles every call that waited for it and compares each outcome,
 * how many `tools/call` requests reached a server, and which process ran them. Needs a held start.
 */
export class ReleaseLiveStart implements ModelCommand {
  constructor(readonly server: string) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return isServer(model, this.server) && model.gated(this.server);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const asked = model.startRequested(this.server);
    const settled = model.releaseLiveStart(this.server);
    const before = real.processes.instances(this.server).map((i) => i.calls());
    const mine = (e: RuntimeEvent): boolean => 'server' in e && e.server === this.server;
    const ended = asked
      ? Promise.race([
          real.log.next('provisional-confirmed', mine),
          real.log.next('server-failed', mine),
        ])
      : undefined;
    if (asked) await observe(real.gates.waiting(this.server), `a start of ${this.server} held`);
    agree(real, `live start of ${this.server} asked for`, real.gates.isWaiting(this.server), asked);
    real.gates.release(this.server);
    if (ended !== undefined) await observe(ended, `the live start of ${this.server} ending`);
    trackSessions(model, real);
    for (const { call, outcome } of settled) {
      const run = real.pending.get(call);
      real.pending.delete(call);
      if (run === undefined) throw new Error(`call#${call} was not waiting`);
      const actual = await run;
      agree(real, `call#${call} after the live start of ${this.server}`, actual, outcome);
      countProvisional(real, 'waited', actual);
    }
    const after = real.processes.instances(this.server).map((i) => i.calls());
    const sent = after.reduce((n, v) => n + v, 0) - before.reduce((n, v) => n + v, 0);
    const reaching = settled.filter((s) => s.outcome === 'OK' || s.outcome === 'SERVER_ERROR');
    agree(real, `tools/call sent after the live start of ${this.server}`, sent, reaching.length);
    if (reaching.length > 0) {
      const target = real.sessions.get(model.sessionId(this.server))?.id;
      const ran = real.processes
        .instances(this.server)
        .filter((i, k) => i.calls() !== (before[k] ?? 0))
        .map((i) => i.id);
      agree(real, `process that ran the waiting calls of ${this.server}`, ran, [target]);
    }
  }
  toString(): string {
    return `releaseLiveStart(${this.server})`;
  }
}
