/**
 * The `stepbind` dispatcher: picks the subcommand, answers `help` / `--help` / `--version`, and
 * hands the rest of the command line to the subcommand, which parses it with the one grammar of
 * `grammar.ts` (DESIGN §17.5).
 *
 * @packageDocumentation
 */
import { AUTH_COMMANDS, runAuthCommand } from './auth.js';
import { CALL_COMMAND, runCallCommand } from './call.js';
import { CATALOG_COMMAND, runCatalogCommand } from './catalog.js';
import { CONFIG_CHECK_COMMAND, runConfigCheckCommand } from './config-check.js';
import { FLEET_COMMANDS, runFleetCommand } from './fleet.js';
import { commandHelp, usageLine, type CommandSpec } from './grammar.js';
import type { CliIo } from './io.js';
import { nearestName } from '@stepbind/binding/internal';
import { RECEIPTS_COMMANDS, runReceiptsCommand } from './receipts.js';
import { TOOLS_COMMAND, runToolsCommand } from './tools.js';
import { packageVersion } from './version.js';

export type { CliIo } from './io.js';

/** Every subcommand, in the order the CLI's help lists them. */
export const COMMANDS: readonly CommandSpec[] = [
  CATALOG_COMMAND,
  CONFIG_CHECK_COMMAND,
  TOOLS_COMMAND,
  CALL_COMMAND,
  ...RECEIPTS_COMMANDS,
  ...AUTH_COMMANDS,
  ...FLEET_COMMANDS,
];

/** The CLI's help: every subcommand's usage line and summary. */
function usage(): string {
  const lines = ['Usage:'];
  for (const spec of COMMANDS) lines.push(`  ${usageLine(spec)}`, `      ${spec.summary}`);
  lines.push(
    '  stepbind help [COMMAND]     this help, or a command\'s (the same as "stepbind COMMAND --help")',
    '  stepbind --version          print the version',
    '',
    'CONFIG is the configuration file (mcp.json); --config FILE says the same.',
    'Exit code 2 for usage, configuration or journal errors; each command says the rest in its --help.',
    '',
  );
  return lines.join('\n');
}

/** The subcommands named by `words` (`["receipts", "list"]`, or a group such as `["policy"]`). */
function specsNamed(words: readonly string[]): readonly CommandSpec[] {
  const name = words.join(' ');
  const exact = COMMANDS.find((c) => c.name === name);
  if (exact !== undefined) return [exact];
  return name === '' ? [] : COMMANDS.filter((c) => c.name.startsWith(`${name} `));
}

/**
 * Runs the `stepbind` command line with `argv` (without node and the script) and resolves to the
 * exit code. Never calls `process.exit`; every server it starts is closed before it resolves.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h') {
    io.stdout(usage());
    return command === undefined ? 2 : 0;
  }
  if (command === 'help') return help(rest, io);
  if (command === '--version' || command === '-V' || command === 'version') {
    io.stdout(`${await packageVersion()}\n`);
    return 0;
  }
  // `stepbind receipts --help`, `stepbind policy -h`: a group's usage lines.
  const group = specsNamed([command]);
  if (group.length > 1 && (rest[0] === undefined || rest[0] === '--help' || rest[0] === '-h')) {
    io[rest[0] === undefined ? 'stderr' : 'stdout'](groupHelp(command, group));
    return rest[0] === undefined ? 2 : 0;
  }
  switch (command) {
    case 'catalog':
      return runCatalogCommand(rest, io);
    case 'config':
      if (rest[0] !== 'check') {
        io.stderr(
          `stepbind config: expected "config check"\n\n${groupHelp('config', [CONFIG_CHECK_COMMAND])}`,
        );
        return 2;
      }
      return runConfigCheckCommand(rest.slice(1), io);
    case 'tools':
      return runToolsCommand(rest, io);
    case 'call':
      return runCallCommand(rest, io);
    case 'login':
    case 'logout':
    case 'auth':
      return runAuthCommand(command, rest, io);
    case 'store':
    case 'policy':
      return runFleetCommand(command, rest, io);
    case 'receipts':
      return runReceiptsCommand(rest, io);
    default: {
      const near = nearestName(command, new Set(COMMANDS.map((c) => c.name.split(' ')[0] ?? '')));
      io.stderr(
        `stepbind: unknown command "${command}"${near === undefined ? '' : ` (did you mean "${near}"?)`}\n\n${usage()}`,
      );
      return 2;
    }
  }
}

/** `stepbind help [COMMAND...]`. */
function help(words: readonly string[], io: CliIo): number {
  if (words.length === 0) {
    io.stdout(usage());
    return 0;
  }
  const specs = specsNamed(words);
  const [only] = specs;
  if (only !== undefined && specs.length === 1) {
    io.stdout(commandHelp(only));
    return 0;
  }
  if (specs.length > 1) {
    io.stdout(groupHelp(words.join(' '), specs));
    return 0;
  }
  io.stderr(`stepbind help: no command "${words.join(' ')}"\n\n${usage()}`);
  return 2;
}

function groupHelp(group: string, specs: readonly CommandSpec[]): string {
  return [
    `stepbind ${group}:`,
    ...specs.flatMap((s) => [`  ${usageLine(s)}`, `      ${s.summary}`]),
    `(stepbind ${specs[0]?.name ?? group} --help for one command's options)`,
    '',
  ].join('\n');
}
