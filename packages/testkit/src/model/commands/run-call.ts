import type { PredictedOutcome, RuntimeOracle } from '../oracle.js';
import { agree, outcomeOf, trackSessions, type ModelCommand, type ModelSystem } from '../system.js';

/**
 * `runCall(call#C)`: runs the C-th prepared call (again, if it ran before). Needs call C to exist,
 * from a step of the runtime now open, and not be waiting already. Compares the outcome, the
 * receipt, how many `tools/call` requests reached a server (one when the call may run, none when
 * it is refused) and which process ran it (the one the step captured, or for a provisional step
 * the live one its start published). A call to a provisional tool whose live start is held waits:
 * `releaseLiveStart` compares how it ends.
 */
export class RunCall implements ModelCommand {
  constructor(readonly call: number) {}
  check(model: Readonly<RuntimeOracle>): boolean {
    return model.isCurrentCall(this.call) && !model.isPending(this.call);
  }
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const entry = real.calls[this.call];
    if (entry === undefined) throw new Error(`${this.toString()}: run although its check failed`);
    const expected: PredictedOutcome = model.run(this.call);
    const { call } = entry;
    if (expected === 'PENDING') {
      real.pending.set(this.call, outcomeOf(call.run({})));
      return;
    }
    const allBefore = real.processes.instances(call.server).map((i) => i.calls());
    let receiptOk = true;
    const revision = model.receiptRevision(this.call);
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
      const target = real.sessions.get(model.sessionOf(this.call) ?? -1);
      const instances = real.processes.instances(call.server);
      const where = instances.findIndex((i, k) => i.calls() !== (allBefore[k] ?? 0));
      agree(real, `process that ran ${call.modelName}`, instances[where]?.id, target?.id);
    }
  }
  toString(): string {
    return `runCall(call#${this.call})`;
  }
}
