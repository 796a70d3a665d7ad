/**
 * `stepbind call CONFIG SERVER TOOL [--args JSON] [--key KEY] [--approve] [--json] [--no-cache]`: checks its
 * arguments before anything starts, starts only SERVER, captures a step and runs one call through
 * the full admission path (revision check, policy, approval of write-class tools on unproven
 * catalogs, input schema, output schema) and the configured journal (`journal` or `store`: its
 * receipt is kept, and a `--key` already completed is answered from it without a second send),
 * then prints the result and its receipt.
 *
 * @packageDocumentation
 */
import {
  ErrorCode,
  StepbindError,
  isStepbindError,
  toolResultParts,
  type CallProgress,
  type CallReceipt,
  type ToolCallResult,
} from '@stepbind/binding/internal';
import { McpRuntime } from '../runtime.js';
import { loadConfigFile } from './config-file.js';
import { cliCacheOption } from '../cache/option.js';
import { commandLineOf, NO_CACHE_OPTION, usageError, type CommandSpec } from './grammar.js';
import { describeError } from './options.js';
import type { CliIo } from './io.js';

/** The grammar and `--help` of `stepbind call`. */
export const CALL_COMMAND: CommandSpec = {
  name: 'call',
  summary: 'Run one call through the full admission path and the configured journal.',
  config: 'required',
  arguments: [
    { name: 'SERVER', description: 'a configured server name' },
    {
      name: 'TOOL',
      description: "the tool's name on that server (its model name, SERVER__TOOL, works too)",
    },
  ],
  options: [
    { name: 'args', value: 'JSON', description: 'the arguments as a JSON object (default {})' },
    {
      name: 'key',
      value: 'KEY',
      description:
        'idempotency key (1-512 characters): a key the journal completed returns its result, not sent again',
    },
    {
      name: 'approve',
      description:
        'approve a call that needs approval (a tool of an unproven catalog, unless read-only and trusted)',
    },
    { name: 'json', description: 'print { ok, result, receipt } or { ok: false, error } as JSON' },
    NO_CACHE_OPTION,
  ],
  notes: `--key needs a durable journal: "journal": { "path": ... } or a fleet "store" in the configuration.
The arguments (--args, --key) are checked before any server starts.
--json: { "ok": true, "result": CallToolResult, "receipt": CallReceipt, "replayed": boolean } or
        { "ok": false, "error": { "code", "message", "detail" } }.
Exit code 0 when the call ran (or was replayed) and the tool reported no error; 1 when it was refused,
failed or the tool reported an error; 2 for usage or config errors.
Progress the server reports goes to stderr: a one-line bar on a terminal (cleared at the end),
otherwise one "progress:" line per report; each report restarts the server's callTimeoutMs.`,
};

/** The largest idempotency key, as the binding checks it. */
const MAX_KEY_LENGTH = 512;

/**
 * Human-readable lines for a call result and its receipt (`replayed`: the result came from the
 * journal for a repeated key; the receipt is the original run's).
 */
export function formatCallText(
  result: ToolCallResult,
  receipt: CallReceipt,
  replayed = false,
): string {
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
    `  outcome     ${receipt.outcome}${replayed ? ' (replayed from the journal: not sent again)' : ''}`,
    ...(receipt.idempotencyKey === undefined ? [] : [`  key         ${receipt.idempotencyKey}`]),
    `  timings     total ${ms(t.totalMs)} (lock ${ms(t.lockWaitMs)}, prepare ${ms(t.prepareMs)}, call ${ms(t.callMs)})`,
  );
  return lines.join('\n');
}

const ms = (value: number): string => `${value.toFixed(1)} ms`;

/** Runs `stepbind call` with the arguments after the command name; resolves to the exit code. */
export async function runCallCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = commandLineOf(CALL_COMMAND, args, io);
  if (typeof parsed === 'number') return parsed;
  const [server = '', tool = ''] = parsed.positionals;
  // Everything the command line says is checked here, before the configuration is read or any
  // server is started.
  let callArgs: unknown = {};
  const rawArgs = parsed.values.get('args');
  if (rawArgs !== undefined) {
    try {
      callArgs = JSON.parse(rawArgs);
    } catch (error) {
      return usageError(CALL_COMMAND, `--args is not valid JSON: ${describeError(error)}`, io);
    }
    if (typeof callArgs !== 'object' || callArgs === null || Array.isArray(callArgs)) {
      return usageError(
        CALL_COMMAND,
        `--args must be a JSON object (got ${Array.isArray(callArgs) ? 'an array' : callArgs === null ? 'null' : typeof callArgs}), for example --args '{"path":"/tmp/a.txt"}'`,
        io,
      );
    }
  }
  const key = parsed.values.get('key');
  if (
    key !== undefined &&
    // eslint-disable-next-line no-control-regex
    (key.length === 0 || key.length > MAX_KEY_LENGTH || /[\u0000-\u001f]/.test(key))
  ) {
    return usageError(
      CALL_COMMAND,
      `--key must be 1 to ${MAX_KEY_LENGTH} characters without control characters (got ${key.length} characters)`,
      io,
    );
  }
  const configPath = parsed.config ?? '';
  let config;
  try {
    config = await loadConfigFile(configPath);
  } catch (error) {
    io.stderr(`stepbind call: ${describeError(error)}\n`);
    return 2;
  }
  const serverConfig = config.servers.get(server);
  if (serverConfig === undefined) {
    io.stderr(
      `stepbind call: no server "${server}" in ${configPath} (configured: ${[...config.servers.keys()].join(', ') || 'none'})\n`,
    );
    return 2;
  }
  if (key !== undefined && config.journal === undefined && config.store === undefined) {
    io.stderr(
      `stepbind call: --key needs a durable journal, and ${configPath} names none (a key kept in memory ends with this process). Add "journal": { "path": "stepbind.db" } to it.\n`,
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
  const cache = cliCacheOption(parsed.flags.has('no-cache'), config);
  try {
    // Only the named server, and required: its failure to start is the command's failure.
    // The configured journal and store stay: the receipt is kept and a key is honoured.
    runtime = await McpRuntime.open(
      {
        ...config,
        servers: new Map([[server, { ...serverConfig, required: true }]]),
        concurrency: 1,
      },
      { ...signal, ...(cache === undefined ? {} : { cache }) },
    );
  } catch (error) {
    return fail(error);
  }
  try {
    await using step = await runtime.captureBinding(signal);
    const calls = step.tools.map((t) => step.prepareCall(t.name));
    const modelName = (
      calls.find((c) => c.server === server && c.tool === tool) ??
      // The model name (`ops__status`) names the same tool.
      calls.find((c) => c.server === server && c.modelName === tool)
    )?.modelName;
    if (modelName === undefined) {
      const names = calls.map((c) => c.tool);
      const shown = names.slice(0, 20).join(', ') + (names.length > 20 ? ', ...' : '');
      io.stderr(
        `stepbind call: server "${server}" has no tool "${tool}" (it has: ${shown || 'no tools'})\n`,
      );
      const meant = unknownToolMatches(() => step.prepareCall(tool));
      const byModel = new Map(calls.map((c) => [c.modelName, c.tool]));
      if (meant.length > 0) {
        io.stderr(
          `Did you mean ${meant.map((m) => `"${byModel.get(m) ?? m}" (model name ${m})`).join(', ')}? TOOL is the server's own name for the tool.\n`,
        );
      }
      return 1;
    }
    const approve = parsed.flags.has('approve');
    const shown = progressOutput(tool, io);
    const { result, receipt, replayed } = await step
      .prepareCall(modelName)
      .run(callArgs as Readonly<Record<string, unknown>>, {
        ...signal,
        ...(key === undefined ? {} : { idempotencyKey: key }),
        // --approve is the operator's approval of this one call.
        ...(approve ? { prepare: (ctx: { approve(): void }) => ctx.approve() } : {}),
        // A long tool that reports progress is not timed out while it does (DESIGN §20.1).
        onProgress: shown.onProgress,
        resetTimeoutOnProgress: true,
      })
      .finally(shown.end);
    io.stdout(
      json
        ? `${JSON.stringify({ ok: true, result, receipt, replayed })}\n`
        : `${formatCallText(result, receipt, replayed)}\n`,
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

/** Control characters (a server's message must not move the cursor or recolour the terminal). */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/** Width of the progress bar, in characters. */
const BAR_WIDTH = 24;

/**
 * Where `call` shows a tool's progress (stderr, so `--json` output is unchanged): on a terminal
 * (`io.progress`) one bar redrawn in place and cleared by `end()`, otherwise one line per report.
 * The server's message is untrusted text: control characters are dropped before it is printed.
 */
export function progressOutput(
  tool: string,
  io: CliIo,
): { readonly onProgress: (progress: CallProgress) => void; readonly end: () => void } {
  const live = io.progress;
  let drawn = false;
  return {
    onProgress: (p) => {
      const message = p.message === undefined ? '' : ` ${p.message.replace(CONTROL, '')}`;
      const fraction =
        p.total !== undefined && p.total > 0
          ? Math.min(1, Math.max(0, p.progress / p.total))
          : undefined;
      const count = p.total === undefined ? `${p.progress}` : `${p.progress}/${p.total}`;
      const percent = fraction === undefined ? '' : ` (${Math.round(fraction * 100)}%)`;
      if (live === undefined) {
        io.stderr(`progress: ${tool} ${count}${percent}${message}\n`);
        return;
      }
      const filled = fraction === undefined ? 0 : Math.round(fraction * BAR_WIDTH);
      const bar =
        fraction === undefined ? '' : `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] `;
      drawn = true;
      live(`${tool} ${bar}${count}${percent}${message}`);
    },
    end: () => {
      if (drawn) live?.('');
    },
  };
}

/** The `matches` of the `UNKNOWN_TOOL` that `prepare` throws (none when it does not throw it). */
function unknownToolMatches(prepare: () => unknown): readonly string[] {
  try {
    prepare();
  } catch (error) {
    if (isStepbindError(error, ErrorCode.UNKNOWN_TOOL)) return error.detail.matches ?? [];
  }
  return [];
}
