/**
 * `stepbind call SERVER TOOL --config FILE [--args JSON] [--approve] [--json]`: starts only SERVER,
 * captures a step and runs one call through the full admission path (revision check, policy,
 * approval of write-class tools on unproven catalogs, input schema, output schema), then prints the
 * result and its receipt.
 *
 * @packageDocumentation
 */
import {
  StepbindError,
  toolResultParts,
  type CallReceipt,
  type ToolCallResult,
} from '@stepbind/binding/internal';
import { McpRuntime } from '../runtime.js';
import { configFrom, describeError, parseArgs } from './options.js';
import type { CliIo } from './io.js';

const USAGE = `Usage: stepbind call SERVER TOOL --config FILE [--args JSON] [--approve] [--json]
  SERVER is a configured server name, TOOL the tool's name on that server (not the model name).
  --args    the arguments as a JSON object (default {})
  --approve approve a call that needs approval (a tool of an unproven catalog, unless it is
            read-only and the server's config says "trustAnnotations": true)
  --json    print { ok, result, receipt } or { ok: false, error } as JSON
Exit code 0 when the call ran and the tool reported no error; 1 when it was refused, failed or the
tool reported an error; 2 for usage or config errors.
`;

/** Human-readable lines for a call result and its receipt. */
export function formatCallText(result: ToolCallResult, receipt: CallReceipt): string {
  const lines = [`result (${result.isError === true ? 'tool error' : 'ok'}):`];
  for (const part of toolResultParts(result)) {
    if (part.kind === 'text') lines.push(...part.text.split('\n').map((l) => `  ${l}`));
    else
      lines.push(
        `  [${part.media} ${part.name}: ${part.mimeType}, ${part.data.length} base64 chars]`,
      );
  }
  if (result.structuredContent !== undefined) {
    lines.push(`structured content: ${JSON.stringify(result.structuredContent)}`);
  }
  const t = receipt.timings;
  lines.push(
    'receipt:',
    `  step        ${receipt.stepId}`,
    `  server      ${receipt.server}`,
    `  tool        ${receipt.tool} (model name ${receipt.modelName})`,
    `  effect      ${receipt.effectClass}`,
    `  catalog     ${receipt.catalogState}, generation ${receipt.generation}, revision ${receipt.revision}`,
    `  descriptor  ${receipt.descriptorDigest}`,
    `  policy      epoch ${receipt.policyEpoch}, audience ${receipt.audience}`,
    `  outcome     ${receipt.outcome}`,
    `  timings     total ${ms(t.totalMs)} (lock ${ms(t.lockWaitMs)}, prepare ${ms(t.prepareMs)}, call ${ms(t.callMs)})`,
  );
  return lines.join('\n');
}

const ms = (value: number): string => `${value.toFixed(1)} ms`;

/** Runs `stepbind call` with the arguments after the command name; resolves to the exit code. */
export async function runCallCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = parseArgs(args, { values: ['config', 'args'], flags: ['approve', 'json'] });
  if ('problem' in parsed) {
    io.stderr(`stepbind call: ${parsed.problem}\n\n${USAGE}`);
    return 2;
  }
  const [server, tool, extra] = parsed.positionals;
  if (server === undefined || tool === undefined || extra !== undefined) {
    io.stderr(`stepbind call: expected SERVER and TOOL\n\n${USAGE}`);
    return 2;
  }
  let callArgs: unknown = {};
  const rawArgs = parsed.values.get('args');
  if (rawArgs !== undefined) {
    try {
      callArgs = JSON.parse(rawArgs);
    } catch (error) {
      io.stderr(`stepbind call: --args is not valid JSON: ${describeError(error)}\n`);
      return 2;
    }
    if (typeof callArgs !== 'object' || callArgs === null || Array.isArray(callArgs)) {
      io.stderr('stepbind call: --args must be a JSON object\n');
      return 2;
    }
  }
  const config = await configFrom(parsed, 'call', USAGE, io);
  if (config === undefined) return 2;
  const serverConfig = config.servers.get(server);
  if (serverConfig === undefined) {
    io.stderr(
      `stepbind call: no server "${server}" in the configuration (configured: ${[...config.servers.keys()].join(', ') || 'none'})\n`,
    );
    return 2;
  }
  const signal = io.signal === undefined ? {} : { signal: io.signal };
  const json = parsed.flags.has('json');
  const fail = (error: unknown): number => {
    if (json) {
      const body =
        error instanceof StepbindError
          ? { code: error.code, message: error.message, detail: error.detail }
          : { code: 'INTERNAL', message: describeError(error) };
      io.stdout(`${JSON.stringify({ ok: false, error: body })}\n`);
    } else {
      io.stderr(`stepbind call: ${describeError(error)}\n`);
    }
    return 1;
  };
  let runtime: McpRuntime;
  try {
    // Only the named server, and required: its failure to start is the command's failure.
    runtime = await McpRuntime.open(
      { servers: new Map([[server, { ...serverConfig, required: true }]]), concurrency: 1 },
      { ...signal },
    );
  } catch (error) {
    return fail(error);
  }
  try {
    await using step = await runtime.captureBinding(signal);
    const modelName = step.tools
      .map((t) => step.prepareCall(t.name))
      .find((c) => c.server === server && c.tool === tool)?.modelName;
    if (modelName === undefined) {
      const names = step.tools.map((t) => step.prepareCall(t.name).tool);
      const shown = names.slice(0, 20).join(', ') + (names.length > 20 ? ', ...' : '');
      io.stderr(
        `stepbind call: server "${server}" has no tool "${tool}" (it has: ${shown || 'no tools'})\n`,
      );
      return 1;
    }
    const approve = parsed.flags.has('approve');
    const { result, receipt } = await step
      .prepareCall(modelName)
      .run(callArgs as Readonly<Record<string, unknown>>, {
        ...signal,
        // --approve is the operator's approval of this one call.
        ...(approve ? { prepare: (ctx: { approve(): void }) => ctx.approve() } : {}),
      });
    io.stdout(
      json
        ? `${JSON.stringify({ ok: true, result, receipt })}\n`
        : `${formatCallText(result, receipt)}\n`,
    );
    return result.isError === true ? 1 : 0;
  } catch (error) {
    const code = fail(error);
    if (!json && error instanceof StepbindError && error.detail['reason'] === 'approval-required') {
      io.stderr('Run it again with --approve to approve this call.\n');
    }
    return code;
  } finally {
    await runtime.close();
  }
}
