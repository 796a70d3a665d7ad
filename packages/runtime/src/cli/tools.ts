/**
 * `stepbind tools --config FILE [--format openai|responses|anthropic|gemini] [--no-strict]`: captures
 * one step over the configured servers and prints the tools the model would see, as text (name,
 * effect class, catalog state) or as one provider's tool list (JSON on stdout; notes on stderr).
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
import { configFrom, describeError, parseArgs } from './options.js';
import type { CliIo } from './io.js';

/** The `--format` values of `stepbind tools`. */
export const TOOL_FORMATS = ['openai', 'responses', 'anthropic', 'gemini'] as const;

/** One of {@link TOOL_FORMATS}. */
export type ToolFormat = (typeof TOOL_FORMATS)[number];

const USAGE = `Usage: stepbind tools --config FILE [--format openai|responses|anthropic|gemini] [--no-strict]
  openai: Chat Completions tools; responses: Responses API tools (both strict where the schema allows,
  unless --no-strict); anthropic: Messages API tools; gemini: function declarations.
`;

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
  const byServer = new Map<string, string[]>();
  for (const tool of step.tools) {
    const call = step.prepareCall(tool.name);
    const lines = byServer.get(call.server) ?? [];
    const description = tool.description === '' ? '' : `  ${firstLine(tool.description)}`;
    lines.push(`    ${tool.name}  [${call.descriptor.effectClass}]${description}`);
    byServer.set(call.server, lines);
  }
  const out: string[] = [];
  for (const server of step.servers) {
    if (server.bound) {
      out.push(
        `✔ ${server.name}: ${server.toolCount} tool${server.toolCount === 1 ? '' : 's'}, ${server.catalogState}, generation ${server.generation}, revision ${server.revision}${eraOf(eras, server.name)}`,
      );
      out.push(...(byServer.get(server.name) ?? ['    (no tools)']));
    } else {
      const why =
        server.error === undefined ? '' : `: ${server.error.code} ${server.error.message}`;
      out.push(`✘ ${server.name}: left out of this step (${server.reason})${why}`);
    }
  }
  return out.join('\n');
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
  const parsed = parseArgs(args, { values: ['config', 'format'], flags: ['no-strict'] });
  if ('problem' in parsed) {
    io.stderr(`stepbind tools: ${parsed.problem}\n\n${USAGE}`);
    return 2;
  }
  if (parsed.positionals.length > 0) {
    io.stderr(`stepbind tools: unexpected argument "${parsed.positionals[0]}"\n\n${USAGE}`);
    return 2;
  }
  const format = parsed.values.get('format');
  if (format !== undefined && !(TOOL_FORMATS as readonly string[]).includes(format)) {
    io.stderr(`stepbind tools: unknown --format "${format}"\n\n${USAGE}`);
    return 2;
  }
  const config = await configFrom(parsed, 'tools', USAGE, io);
  if (config === undefined) return 2;
  const signal = io.signal === undefined ? {} : { signal: io.signal };
  let runtime: McpRuntime;
  try {
    runtime = await McpRuntime.open(config, signal);
  } catch (error) {
    io.stderr(`stepbind tools: ${describeError(error)}\n`);
    return 1;
  }
  try {
    await using step = await runtime.captureBinding(signal);
    const leftOut = step.servers.filter((s) => !s.bound);
    if (format === undefined) {
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
