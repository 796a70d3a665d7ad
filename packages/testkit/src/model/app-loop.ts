import fc from 'fast-check';
import { isStepbindError, type McpBinding } from '@stepbind/binding/internal';
import type { McpRuntime } from '@stepbind/runtime';
import { agree, trackSessions, type ModelCommand, type ModelSystem } from './system.js';
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
    check(): boolean {
      return true;
    }
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
    toString(): string {
      return 'appCapture';
    }
  }

  class AppReply implements ModelCommand {
    constructor(
      readonly stepPick: number,
      readonly callPicks: readonly number[],
    ) {}
    /** Step `stepPick` is waiting for the model, and each picked tool is one it advertised. */
    check(model: Readonly<RuntimeOracle>): boolean {
      const open = stepsOf(model as RuntimeOracle)[this.stepPick];
      if (open === undefined) return false;
      const tools = model.toolsOf(open.index).length;
      return this.callPicks.every((pick) => pick < tools);
    }
    async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
      const steps = stepsOf(model);
      const [open] = steps.splice(this.stepPick, 1);
      if (open === undefined) throw new Error(`${this.toString()}: run although its check failed`);
      const tools = model.toolsOf(open.index);
      const calls = this.callPicks.flatMap((pick) => tools[pick] ?? []);
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
    toString(): string {
      return `appReply(step#${this.stepPick}, calls ${this.callPicks.join(',')})`;
    }
  }

  // Targets are drawn from small ranges (few steps wait at once; a step has about 5 tools) and a
  // reply that names a step or tool that does not exist is rejected by its check.
  const reply = fc
    .tuple(fc.nat({ max: 1 }), fc.array(fc.nat({ max: 4 }), { minLength: 1, maxLength: 3 }))
    .map(([step, picks]): ModelCommand => new AppReply(step, picks));
  return [fc.constant(new AppCapture()), reply, reply];
}
