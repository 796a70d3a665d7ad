/**
 * The one command line grammar of `stepbind` (DESIGN §17.5): every subcommand is a
 * {@link CommandSpec}, parsed by {@link parseCommandLine} and documented by {@link commandHelp}
 * from the same table, so a subcommand cannot accept an option its `--help` does not list.
 *
 * - The configuration file is the first positional (`stepbind catalog mcp.json`) or `--config FILE`;
 *   both, naming different files, is a usage error.
 * - `--name value`, `--name=value`, boolean `--flag`; `-h`/`--help` on every subcommand.
 * - An unknown option is named with a did-you-mean and the subcommand's `--help`.
 *
 * Parsing never throws and starts nothing: problems come back as a message (exit code 2).
 *
 * @packageDocumentation
 */
import { resolve } from 'node:path';
import { nearestName } from '@stepbind/binding/internal';
import type { CliIo } from './io.js';

/** One option of a subcommand. */
export interface CliOption {
  /** The option without its dashes: `args` for `--args`. */
  readonly name: string;
  /** The value's placeholder (`JSON`, `FILE`); absent for a boolean flag. */
  readonly value?: string;
  /** One line for `--help`. */
  readonly description: string;
}

/** One positional argument of a subcommand (the configuration file is not one: see `config`). */
export interface CliArgument {
  readonly name: string;
  readonly description: string;
  /** True for a trailing argument that may be left out (`policy revoke SERVER [TOOL]`). */
  readonly optional?: boolean;
}

/** A subcommand: how it is parsed and what its `--help` says. */
export interface CommandSpec {
  /** `call`, `receipts list`, ... */
  readonly name: string;
  /** One line for the CLI's help and the head of `--help`. */
  readonly summary: string;
  /**
   * Whether the subcommand reads a configuration file, given as its first positional or with
   * `--config FILE` (`optional`: it works without one). @default none
   */
  readonly config?: 'required' | 'optional';
  readonly arguments: readonly CliArgument[];
  readonly options: readonly CliOption[];
  /** Exit codes, the `--json` shape and anything else `--help` should say. */
  readonly notes?: string;
}

/** A parsed command line. */
export interface CommandLine {
  readonly values: ReadonlyMap<string, string>;
  readonly flags: ReadonlySet<string>;
  /** The positional arguments after the configuration file, in order. */
  readonly positionals: readonly string[];
  /** The configuration file (positional or `--config`), when one was given. */
  readonly config?: string;
  /** True when `-h`/`--help` was given: print {@link commandHelp} and exit 0. */
  readonly help: boolean;
}

const CONFIG_OPTION: CliOption = {
  name: 'config',
  value: 'FILE',
  description: 'the configuration file (the same as giving CONFIG)',
};

/**
 * `--no-cache`: the commands that open a runtime keep the catalog cache (DESIGN §19.1) at the user's
 * cache directory unless it is given (or the configuration's `cache` says otherwise).
 */
export const NO_CACHE_OPTION: CliOption = {
  name: 'no-cache',
  description:
    'neither read nor write the catalog cache (default: $XDG_CACHE_HOME/stepbind/catalogs.json, or the configuration\'s "cache")',
};

const HELP_OPTION = '-h, --help';

/** The options a spec accepts, `--config` included when it reads a configuration. */
function optionsOf(spec: CommandSpec): readonly CliOption[] {
  return spec.config === undefined ? spec.options : [CONFIG_OPTION, ...spec.options];
}

/**
 * Parses `argv` (the arguments after the subcommand's name) against `spec`.
 *
 * @returns the command line, or `{ problem }`: a one-line usage error naming the argument.
 */
export function parseCommandLine(
  spec: CommandSpec,
  argv: readonly string[],
): CommandLine | { readonly problem: string } {
  const options = optionsOf(spec);
  const values = new Map<string, string>();
  const flags = new Set<string>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '-h' || arg === '--help') {
      return { values, flags, positionals, help: true };
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, eq === -1 ? undefined : eq) : arg;
    const option = options.find((o) => o.name === name);
    if (option === undefined) {
      const near = nearestName(arg.slice(0, eq === -1 ? undefined : eq), [
        ...options.map((o) => `--${o.name}`),
        '--help',
      ]);
      return {
        problem: `unknown option "${arg.slice(0, eq === -1 ? undefined : eq)}"${near === undefined ? '' : ` (did you mean "${near}"?)`}; see "stepbind ${spec.name} --help"`,
      };
    }
    if (option.value === undefined) {
      if (eq !== -1) return { problem: `--${name} takes no value` };
      flags.add(name);
      continue;
    }
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || (eq === -1 && options.some((o) => value === `--${o.name}`))) {
      return { problem: `--${name} needs a value (${option.value})` };
    }
    values.set(name, value);
  }
  const required = spec.arguments.filter((a) => a.optional !== true).length;
  let config = values.get('config');
  // CONFIG is the first positional when there is one more than the arguments, or when an optional
  // argument could take its place and it names a JSON file (no server name has a dot).
  const first = positionals[0];
  if (
    spec.config !== undefined &&
    first !== undefined &&
    (positionals.length > spec.arguments.length ||
      (positionals.length > required && /\.jsonc?$/i.test(first)))
  ) {
    const given = positionals.shift() as string;
    if (config !== undefined && resolve(config) !== resolve(given)) {
      return {
        problem: `the configuration is given twice, as "${given}" and as --config "${config}"; give it once`,
      };
    }
    config = given;
  }
  if (config === '') return { problem: '--config needs a value (FILE)' };
  if (positionals.length > spec.arguments.length) {
    return { problem: `unexpected argument "${positionals[spec.arguments.length] ?? ''}"` };
  }
  if (positionals.length < required) {
    const names = spec.arguments.filter((a) => a.optional !== true).map((a) => a.name);
    return { problem: `expected ${names.join(' and ')}` };
  }
  if (spec.config === 'required' && config === undefined) {
    return { problem: 'the configuration file is required: give CONFIG or --config FILE' };
  }
  return { values, flags, positionals, help: false, ...(config === undefined ? {} : { config }) };
}

/** `stepbind call CONFIG SERVER TOOL [--args JSON] ...`: the usage line of `spec`. */
export function usageLine(spec: CommandSpec): string {
  const parts = [`stepbind ${spec.name}`];
  if (spec.config === 'required') parts.push('CONFIG');
  if (spec.config === 'optional') parts.push('[CONFIG]');
  for (const a of spec.arguments) parts.push(a.optional === true ? `[${a.name}]` : a.name);
  for (const o of spec.options)
    parts.push(`[--${o.name}${o.value === undefined ? '' : ` ${o.value}`}]`);
  return parts.join(' ');
}

/** The whole `--help` of `spec`: usage line, summary, arguments, options, notes. */
export function commandHelp(spec: CommandSpec): string {
  const args: [string, string][] = [
    ...(spec.config === undefined
      ? []
      : [
          [
            'CONFIG',
            `the configuration file (mcp.json)${spec.config === 'optional' ? ', if any' : ''}; or --config FILE`,
          ] as [string, string],
        ]),
    ...spec.arguments.map((a): [string, string] => [a.name, a.description]),
  ];
  const opts: [string, string][] = [
    ...optionsOf(spec).map((o): [string, string] => [
      `--${o.name}${o.value === undefined ? '' : ` ${o.value}`}`,
      o.description,
    ]),
    [HELP_OPTION, 'show this help'],
  ];
  const width = Math.max(...[...args, ...opts].map(([left]) => left.length)) + 2;
  const rows = (list: [string, string][]): string[] =>
    list.map(([left, right]) => `  ${left.padEnd(width)}${right}`);
  return [
    `Usage: ${usageLine(spec)}`,
    '',
    spec.summary,
    ...(args.length === 0 ? [] : ['', 'Arguments:', ...rows(args)]),
    '',
    'Options:',
    ...rows(opts),
    ...(spec.notes === undefined ? [] : ['', spec.notes.trimEnd()]),
    '',
  ].join('\n');
}

/**
 * Parses `argv` for `spec`, answering `--help` (exit 0) and usage errors (exit 2) itself.
 *
 * @returns the command line to run, or the exit code when the command is already answered.
 */
export function commandLineOf(
  spec: CommandSpec,
  argv: readonly string[],
  io: CliIo,
): CommandLine | number {
  const parsed = parseCommandLine(spec, argv);
  if ('problem' in parsed) return usageError(spec, parsed.problem, io);
  if (parsed.help) {
    io.stdout(commandHelp(spec));
    return 0;
  }
  return parsed;
}

/** Writes `stepbind NAME: problem` and the usage line to stderr; returns exit code 2. */
export function usageError(spec: CommandSpec, problem: string, io: CliIo): number {
  io.stderr(
    `stepbind ${spec.name}: ${problem}\n\nUsage: ${usageLine(spec)}\n(stepbind ${spec.name} --help for more)\n`,
  );
  return 2;
}

/**
 * Aligned columns under a header row: every table the CLI prints (receipts, tools, catalog, logins)
 * goes through here, so every one has its header.
 */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  indent = '',
): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `${indent}${cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ')}`.trimEnd();
  return [line(header), ...rows.map(line)];
}
