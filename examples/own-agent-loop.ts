/**
 * How an application checks its own agent loop with @stepbind/testkit. The loop below is "app code":
 * capture a binding, send its tools to the model, run the tool calls the model answers with, and
 * turn refusals into tool results for the model. `appLoopCommands` plugs it into the model-based
 * test, cut where the loop waits for the model, so fast-check puts catalog changes, list_changed,
 * crashes, config and policy changes between the capture and the reply, and the independent oracle
 * predicts every call's outcome.
 *
 * Run it: `pnpm build && npx tsx examples/own-agent-loop.ts [runs]`.
 */
import fc from 'fast-check';
import { isStepbindError, toToolResult, type McpBinding } from '@stepbind/binding';
import type { McpRuntime } from '@stepbind/runtime';
import {
  appLoopCommands,
  modelCommands,
  propertyRun,
  runModel,
  type AppLoop,
} from '@stepbind/testkit';

// ---------------------------------------------------------------- the application's agent loop

/** Options of the app's loop. `silentRetry` plants a classic bug: re-running a refused call. */
export interface LoopOptions {
  readonly silentRetry?: boolean;
}

async function runCalls(
  runtime: McpRuntime,
  step: McpBinding,
  toolCalls: readonly string[],
  options: LoopOptions,
): Promise<string[]> {
  const outcomes: string[] = [];
  for (const name of toolCalls) {
    try {
      await step.prepareCall(name).run({});
      outcomes.push('OK');
    } catch (error) {
      if (options.silentRetry === true && isStepbindError(error, 'STALE_CATALOG')) {
        // BUG: runs the call on a catalog the model never saw, behind the model's back.
        await using fresh = await runtime.captureBinding();
        const again = await Promise.resolve()
          .then(() => fresh.prepareCall(name).run({}))
          .then(
            () => 'OK',
            (e: unknown) => (isStepbindError(e) ? e.code : 'THROW'),
          );
        outcomes.push(again);
        continue;
      }
      void toToolResult(error); // what the app sends back to the model
      outcomes.push(isStepbindError(error) ? error.code : 'THROW');
    }
  }
  return outcomes;
}

// ---------------------------------------------------------------- plugging it into the model

/** The app's loop cut where it waits for the model. This is all the plumbing there is. */
export function appLoop(
  options: LoopOptions = {},
): AppLoop<{ runtime: McpRuntime; step: McpBinding }> {
  return {
    capture: async (runtime) => {
      const step = await runtime.captureBinding();
      return { step: { runtime, step }, binding: step };
    },
    reply: ({ runtime, step }, toolCalls) => runCalls(runtime, step, toolCalls, options),
  };
}

/** Runs the model with the app's loop mixed in; resolves to the number of comparisons made. */
export async function checkAppLoop(runs: number, options: LoopOptions = {}): Promise<number> {
  const { seed, numRuns } = propertyRun('own-agent-loop', runs);
  let comparisons = 0;
  await fc.assert(
    fc.asyncProperty(
      modelCommands({ maxCommands: 25, extra: appLoopCommands(appLoop(options)) }),
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
