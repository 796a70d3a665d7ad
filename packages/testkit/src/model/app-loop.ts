import fc from 'fast-check';
import { isStepbindError, type McpBinding } from '@stepbind/binding/internal';
import type { McpRuntime } from '@stepbind/runtime';
import { agree, trackSessions, type ModelCommand, type ModelSystem } from './commands.js';
import type { RuntimeOracle } from './oracle.js';

/**
 * Your agent loop, cut where it waits for the model. Between {@link capture} (the step's tools go
 * to the model) and {@link reply} (the model's tool calls come back) anything may happen in
 * production: a `list_changed`, a crash, a config or policy change. Cutting the loop there lets the
 * model-based test put those events in between; a loop written as one command never sees them.
 */
export interface AppLoop<Step> {
  /** Starts a sampling step as your loop does before it calls the model. */
  capture(runtime: McpRuntime): Promise<{ readonly step: Step; readonly binding: McpBinding }>;
  /**
   * The model answered `step` with these tool calls (model-facing names, no arguments): run them as
   * your loop does and resolve to one outcome per call, `"OK"` or the stepbind error code your loop
   * saw (the code of `isStepbindError(e) ? e.code : ...`).
   */
  reply(step: Step, toolCalls: readonly string[]): Promise<readonly string[]>;
  /** Ends the step. @default releases the binding {@link capture} returned */
  end?(step: Step): Promise<void> | void;
}

interface OpenStep<Step> {
  readonly index: number;
  readonly step: Step;
  readonly binding: McpBinding;
}

/**
 * Model commands that drive your loop against the oracle: `appCapture` (your `capture`, compared
 * with the oracle's capture) and `appReply(step, calls)` (your `reply` for one of the steps still
 * waiting for the model; every outcome is compared with the oracle's prediction at that moment).
 * The built-in commands interleave between the two. All bookkeeping (bindings, the process each
 * step captured) is kept here.
 *
 * @example
 * fc.asyncProperty(modelCommands({ extra: appLoopCommands(myLoop) }), (cmds) => runModel(cmds))
 */
export function appLoopCommands<Step>(loop: AppLoop<Step>): fc.Arbitrary<ModelCommand>[] {
  // Open steps per run, keyed by that run's oracle (fast-check hands each run a fresh one).
  const open = new WeakMap<RuntimeOracle, OpenStep<Step>[]>();
  const stepsOf = (model: RuntimeOracle): OpenStep<Step>[] => {
    let steps = open.get(model);
    if (steps === undefined) open.set(model, (steps = []));
    return steps;
  };

  class AppCapture implements ModelCommand {
    check = (): boolean => true;
    async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
      const expected = model.capture() === 'FAILED' ? 'REQUIRED_SERVERS_FAILED' : 'OK';
      let captured: { readonly step: Step; readonly binding: McpBinding } | undefined;
      let outcome = 'OK';
      try {
        captured = await loop.capture(real.runtime);
      } catch (error) {
        outcome = isStepbindError(error) ? error.code : String(error);
      }
      agree(real, 'app capture', outcome, expected);
      if (captured === undefined) return;
      trackSessions(model, real);
      const index = model.bindingCount - 1;
      const tools = model.toolsOf(index).map((t) => `${t.server}__${t.tool}`);
      agree(
        real,
        'app step tools',
        captured.binding.tools.map((t) => t.name),
        tools,
      );
      // Keep the indexes of real and model bindings aligned for the built-in commands.
      real.bindings.push(captured.binding);
      real.boundInstances.push(new Map(real.current));
      stepsOf(model).push({ index, ...captured });
    }
    toString = (): string => 'appCapture';
  }

  class AppReply implements ModelCommand {
    constructor(
      readonly stepPick: number,
      readonly callPicks: readonly number[],
    ) {}
    check = (model: Readonly<RuntimeOracle>): boolean =>
      (open.get(model as RuntimeOracle)?.length ?? 0) > 0;
    async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
      const steps = stepsOf(model);
      const [open] = steps.splice(this.stepPick % steps.length, 1);
      if (open === undefined) throw new Error('appReply: no step is waiting for the model');
      const tools = model.toolsOf(open.index);
      const planned = tools.length === 0 ? [] : this.callPicks.map((p) => tools[p % tools.length]);
      const calls = planned.filter((t) => t !== undefined);
      const predicted = calls.map((t) => model.predictRun(open.index, t.server, t.tool));
      const actual = await loop.reply(
        open.step,
        calls.map((t) => `${t.server}__${t.tool}`),
      );
      agree(real, `app reply to step #${open.index}`, actual, predicted);
      if (loop.end === undefined) open.binding.release();
      else await loop.end(open.step);
      model.releaseBinding(open.index);
    }
    toString = (): string => `appReply(step#${this.stepPick}, calls ${this.callPicks.join(',')})`;
  }

  return [
    fc.constant(new AppCapture()),
    fc
      .tuple(fc.nat(), fc.array(fc.nat(), { minLength: 1, maxLength: 3 }))
      .map(([step, picks]) => new AppReply(step, picks)),
    fc
      .tuple(fc.nat(), fc.array(fc.nat(), { minLength: 1, maxLength: 3 }))
      .map(([step, picks]) => new AppReply(step, picks)),
  ];
}
