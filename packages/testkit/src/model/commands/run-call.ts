import type { PredictedOutcome, RuntimeOracle } from '../oracle.js';
import {
  agree,
  countProvisional,
  outcomeOf,
  trackSessions,
  type ModelCommand,
  type ModelSystem,
} from '../system.js';

/**
 * `runCall(call#C)`: runs the C-th call prepared in the runtime now open (again, if it ran
 * before). Needs call C to exist and not be waiting already. Compares the outcome, the
 * receipt, how many `tools/call` requests reached a server (one when the call may run, none when
 * it is refused) and which process ran it (the one the step captured, or for a provisional step
 * the live one its start published). A call to a provisional tool whose live start is held waits:
 * `releaseLiveStart` compares how it ends.
 */
export class RunCall implements ModelCommand {
  constructor(readonly call: number) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    const c = model.callAt(this.call);
    return c !== undefined && !model.isPending(c);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const c = model.callAt(this.call) ?? -1;
    const entry = real.calls[c];
    if (entry === undefined) throw new Error(`${this.toString()}: run although its check failed`);
    const expected: PredictedOutcome = model.run(c);
    const { call } = entry;
    if (expected === 'PENDING') {
      real.pending.set(c, outcomeOf(call.run({})));
      return;
    }
    const allBefore = real.processes.instances(call.server).map((i) => i.calls());
    let receiptOk = true;
    const revision = model.receiptRevision(c);
    const actual = await outcomeOf(
      call.run({}).then(({ receipt }) => {
        receiptOk =
          receipt.descriptorDigest === call.descriptor.descriptorDigest &&
          receipt.revision === revision &&
          receipt.tool === call.tool;
      }),
    );
    // A lazy server's start (DESIGN §19.3) may have made a new process.
    trackSessions(model, real);
    agree(real, `run(${call.modelName})`, actual, expected);
    if (model.isProvisionalCall(c)) countProvisional(real, 'direct', actual);
    agree(
      real,
      `receipt of ${call.modelName} matches the descriptor the model saw`,
      receiptOk,
      true,
    );
    const allAfter = real.processes.instances(call.server).map((i) => i.calls());
    const sent = allAfter.reduce((n, v) => n + v, 0) - allBefore.reduce((n, v) => n + v, 0);
    const reachesServer = expected === 'OK' || expected === 'SERVER_ERROR';
    agree(real, `tools/call sent for ${call.modelName}`, sent, reachesServer ? 1 : 0);
    if (reachesServer) {
      // Never re-routed: the call reached exactly the process the step captured.
      const target = real.sessions.get(model.sessionOf(c) ?? -1);
      const instances = real.processes.instances(call.server);
      const where = instances.findIndex((i, k) => i.calls() !== (allBefore[k] ?? 0));
      agree(real, `process that ran ${call.modelName}`, instances[where]?.id, target?.id);
    }
  }
  toString(): string {
    return `runCall(call#${this.call})`;
  }
}
