/**
 * How an application checks its own agent loop with @stepbind/testkit: the loop below is "app
 * code" (capture a binding, let a planner pick tool calls, run them, turn refusals into tool results
 * for the model). `AppStep` plugs it into the model-based commands, so fast-check interleaves it
 * with catalog changes, list_changed, crashes, config and policy changes, and the independent oracle
 * predicts what every call of the app must do.
 *
 * Run it: `pnpm build && npx tsx examples/own-agent-loop.ts [runs]`.
 */
import fc from 'fast-check';
import { isStepbindError, toToolResult, type McpBinding } from '@stepbind/binding';
import type { McpRuntime } from '@stepbind/runtime';
import {
  agree,
  modelCommands,
  propertyRun,
  runModel,
  trackSessions,
  type ModelCommand,
  type ModelSystem,
  type RuntimeOracle,
} from '@stepbind/testkit';

// ---------------------------------------------------------------- the application's agent loop

/** What the app's planner (an LLM in production) decides: tool names of this step, in order. */
export type Planner = (tools: readonly string[]) => readonly string[];

/** One step of the app's loop; returns, per planned call, `OK` or the refusal code. */
export async function appStep(
  runtime: McpRuntime,
  planner: Planner,
  hooks: { readonly onCapture?: (binding: McpBinding) => void } = {},
): Promise<string[]> {
  await using step: McpBinding = await runtime.captureBinding();
  hooks.onCapture?.(step);
  const outcomes: string[] = [];
  // The model answers with all its calls at once: they are prepared against this step's binding.
  const calls = planner(step.tools.map((t) => t.name)).map((name) => step.prepareCall(name));
  for (const call of calls) {
    try {
      await call.run({});
      outcomes.push('OK');
    } catch (error) {
      // The app feeds this back to the model and carries on with the next step.
      void toToolResult(error);
      outcomes.push(isStepbindError(error) ? error.code : 'THROW');
    }
  }
  return outcomes;
}

// ---------------------------------------------------------------- plugging it into the model

/** The app's step as a model command: the oracle predicts each outcome before the app runs. */
class AppStep implements ModelCommand {
  constructor(readonly picks: readonly number[]) {}
  check = (): boolean => true;
  async run(model: RuntimeOracle, real: ModelSystem): Promise<void> {
    const expected = model.capture();
    if (expected === 'FAILED') {
      const error = await appStep(real.runtime, () => []).then(
        () => 'OK',
        (e: unknown) => (isStepbindError(e) ? e.code : 'THROW'),
      );
      agree(real, 'app step capture', error, 'REQUIRED_SERVERS_FAILED');
      return;
    }
    const index = model.bindingCount - 1;
    const tools = model.toolsOf(index);
    const planned = this.picks
      .map((p) => tools[p % Math.max(1, tools.length)])
      .filter((t) => t !== undefined);
    const predicted = planned.map((t) => model.predictRun(index, t.server, t.tool));
    const actual = await appStep(real.runtime, () => planned.map((t) => `${t.server}__${t.tool}`), {
      // Keep the step's binding in the system so later commands can try to use it (released).
      onCapture: (binding) => {
        trackSessions(model, real);
        real.bindings.push(binding);
        real.boundInstances.push(new Map(real.current));
      },
    });
    model.releaseBinding(index);
    agree(real, 'app step outcomes', actual, predicted);
  }
  toString = (): string => `appStep(${this.picks.join(',')})`;
}

const arbAppStep: fc.Arbitrary<ModelCommand> = fc
  .array(fc.nat(), { minLength: 1, maxLength: 3 })
  .map((picks) => new AppStep(picks));

/** Runs the model with the app's step mixed in; resolves to the number of comparisons made. */
export async function checkAppLoop(runs: number): Promise<number> {
  const { seed, numRuns } = propertyRun('own-agent-loop', runs);
  let comparisons = 0;
  await fc.assert(
    fc.asyncProperty(
      modelCommands({ maxCommands: 25, extra: [arbAppStep, arbAppStep] }),
      async (commands) => {
        comparisons += await runModel(commands);
      },
    ),
    { seed, numRuns },
  );
  return comparisons;
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const comparisons = await checkAppLoop(Number(process.argv[2] ?? 200));
  console.log(`own agent loop: ${comparisons} runtime/oracle comparisons, all agreed`);
}
