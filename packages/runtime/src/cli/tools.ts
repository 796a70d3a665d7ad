/**
 * `stepbind tools CONFIG [--format openai|responses|anthropic|gemini] [--no-strict] [--json] [--no-cache]`:
 * captures one step over the configured servers and prints the tools the model would see, as a
 * table per server (model name, effect class, description), as JSON (`--json`), or as one
 * provider's tool list (JSON on stdout; notes on stderr).
 *
 * @packageDocumentation
 */
import {
  toAnthropicTools,
  toGeminiFunctionDeclarations,
  toOpenAIChatTools,
  toOpenAIResponsesTools,
  type FormattedTools,
  type McpBinding,
} from '@stepbind/binding/internal';
import type { ProtocolEra } from '../connection.js';
import { McpRuntime } from '../runtime.js';
import { eraText } from './catalog.js';
import { loadConfigFile } from './config-file.js';
import { cliCacheOption } from '../cache/option.js';
import {
  commandLineOf,
  formatTable,
  NO_CACHE_OPTION,
  usageError,
  type CommandSpec,
} from './grammar.js';
import { describeError } from './options.js';
import type { CliIo } from './io.js';

/** The `--format` values of `stepbind tools`. */
export const TOOL_FORMATS = ['openai', 'responses', 'anthropic', 'gemini'] as const;

/** One of {@link TOOL_FORMATS}. */
export type ToolFormat = (typeof TOOL_FORMATS)[number];

/** The grammar and `--help` of `stepbind tools`. */
export const TOOLS_COMMAND: CommandSpec = {
  name: 'tools',
  summary: 'Capture one step and print the tools the model would see.',
  config: 'required',
  arguments: [],
  options: [
    {
      name: 'format',
      value: 'FORMAT',
      description: `a provider's tool list as JSON: ${TOOL_FORMATS.join(', ')}`,
    },
    { name: 'no-strict', description: 'with --format openai|responses: never strict' },
    { name: 'json', description: 'print the step as JSON (shape below)' },
    NO_CACHE_OPTION,
  ],
  notes: `openai: Chat Completions tools; responses: Responses API tools (both strict where the schema
allows, unless --no-strict); anthropic: Messages API tools; gemini: function declarations.
--json: { "servers": [{ "name", "bound": true, "catalogState", "generation", "revision", "toolCount", "provisional" }
          | { "name", "bound": false, "reason", "error": { "code", "message" } | null }],
          "tools": [{ "name", "server", "tool", "effectClass", "description" }] }
Exit code 0 when every server is in the step; 1 when one is left out or the step failed; 2 for usage
or configuration errors.`,
};

/** The step's tools in `format`, exactly what the binding's provider functions return. */
export function formatStepTools(
  step: McpBinding,
  format: ToolFormat,
  strict = true,
): FormattedTools<unknown> {
  switch (format) {
    case 'openai':
      return toOpenAIChatTools(step.tools, { strict });
    case 'responses':
      return toOpenAIResponsesTools(step.tools, { strict });
    case 'anthropic':
      return toAnthropicTools(step.tools);
    case 'gemini':
      return toGeminiFunctionDeclarations(step.tools);
  }
}

/**
 * Human-readable lines for a step: per server its state (and its protocol era, when `eras` has
 * it: the runtime's `status()`), per tool its effect class.
 */
export function formatStepText(
  step: McpBinding,
  eras: ReadonlyMap<
    string,
    { readonly era?: ProtocolEra; readonly protocolVersion?: string }
  > = new Map(),
): string {
  const byServer = new Map<string, string[][]>();
  for (const tool of step.tools) {
    const call = step.prepareCall(tool.name);
    const rows = byServer.get(call.server) ?? [];
    rows.push([tool.name, call.descriptor.effectClass, firstLine(tool.description)]);
    byServer.set(call.server, rows);
  }
  const out: string[] = [];
  for (const server of step.servers) {
    if (server.bound) {
      out.push(
        `✔ ${server.name}: ${server.toolCount} tool${server.toolCount === 1 ? '' : 's'}, ${server.catalogState}, generation ${server.generation}, revision ${server.revision}${server.provisional ? ', cached (its live catalog is not confirmed yet)' : eraOf(eras, server.name)}`,
      );
      const rows = byServer.get(server.name);
      out.push(
        ...(rows === undefined
          ? ['    (no tools)']
          : formatTable(['MODEL NAME', 'EFFECT', 'DESCRIPTION'], rows, '    ')),
      );
    } else {
      const why =
        server.error === undefined ? '' : `: ${server.error.code} ${server.error.message}`;
      out.push(`✘ ${server.name}: left out of this step (${server.reason})${why}`);
    }
  }
  return out.join('\n');
}

/** The `--json` shape of `stepbind tools` (documented in its `--help`). */
export function stepJson(step: McpBinding): unknown {
  return {
    servers: step.servers.map((server) =>
      server.bound
        ? {
            name: server.name,
            bound: true,
            catalogState: server.catalogState,
            generation: server.generation,
            revision: server.revision,
            toolCount: server.toolCount,
            provisional: server.provisional,
          }
        : {
            name: server.name,
            bound: false,
            reason: server.reason,
            error:
              server.error === undefined
                ? null
                : { code: server.error.code, message: server.error.message },
          },
    ),
    tools: step.tools.map((tool) => {
      const call = step.prepareCall(tool.name);
      return {
        name: tool.name,
        server: call.server,
        tool: call.tool,
        effectClass: call.descriptor.effectClass,
        description: tool.description,
      };
    }),
  };
}

function eraOf(
  eras: ReadonlyMap<string, { readonly era?: ProtocolEra; readonly protocolVersion?: string }>,
  server: string,
): string {
  const status = eras.get(server);
  return status?.era === undefined ? '' : `, ${eraText(status.era, status.protocolVersion)}`;
}

function firstLine(text: string): string {
  const line = text.split('\n', 1)[0] ?? '';
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}

/** Runs `stepbind tools` with the arguments after the command name; resolves to the exit code. */
export async function runToolsCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = commandLineOf(TOOLS_COMMAND, args, io);
  if (typeof parsed === 'number') return parsed;
  const format = parsed.values.get('format');
  if (format !== undefined && !(TOOL_FORMATS as readonly string[]).includes(format)) {
    return usageError(
      TOOLS_COMMAND,
      `unknown --format "${format}" (the formats are ${TOOL_FORMATS.join(', ')})`,
      io,
    );
  }
  const json = parsed.flags.has('json');
  if (json && format !== undefined) {
    return usageError(TOOLS_COMMAND, '--json and --format both choose the output; give one', io);
  }
  let config;
  try {
    config = await loadConfigFile(parsed.config ?? '');
  } catch (error) {
    io.stderr(`stepbind tools: ${describeError(error)}\n`);
    return 2;
  }
  const signal = io.signal === undefined ? {} : { signal: io.signal };
  let runtime: McpRuntime;
  try {
    const cache = cliCacheOption(parsed.flags.has('no-cache'), config);
    runtime = await McpRuntime.open(config, {
      ...signal,
      ...(cache === undefined ? {} : { cache }),
    });
  } catch (error) {
    io.stderr(`stepbind tools: ${describeError(error)}\n`);
    return 1;
  }
  try {
    await using step = await runtime.captureBinding(signal);
    const leftOut = step.servers.filter((s) => !s.bound);
    if (json) {
      io.stdout(`${JSON.stringify(stepJson(step))}\n`);
    } else if (format === undefined) {
      const eras = new Map(runtime.status().servers.map((s) => [s.name, s]));
      io.stdout(`${formatStepText(step, eras)}\n`);
    } else {
      const formatted = formatStepTools(step, format as ToolFormat, !parsed.flags.has('no-strict'));
      io.stdout(`${JSON.stringify(formatted.tools, null, 2)}\n`);
      for (const t of formatted.notStrict) {
        io.stderr(`note: ${t.name} is sent with strict: false: ${t.reason} (at "${t.path}")\n`);
      }
      for (const t of formatted.omitted) io.stderr(`note: ${t.name} is left out: ${t.reason}\n`);
      for (const s of leftOut)
        io.stderr(`note: server ${s.name} is not in this step (${s.reason})\n`);
    }
    return leftOut.length === 0 ? 0 : 1;
  } catch (error) {
    io.stderr(`stepbind tools: ${describeError(error)}\n`);
    return 1;
  } finally {
    await runtime.close();
  }
}
