import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding/internal';
import { catalogReportJson, discoverCatalogs, formatCatalogReport } from './catalog.js';
import { loadConfigFile } from './config-file.js';
import type { DiscoveryProgress } from '../events.js';
import { configCheckJson, formatConfigCheck } from './config-check.js';
import { runCallCommand } from './call.js';
import { runToolsCommand } from './tools.js';
import { packageVersion } from './version.js';
import type { CliIo } from './io.js';
import { listReceipts, parseExpectedHead, verifyReceipts } from './receipts.js';
import { FLEET_USAGE, runFleetCommand, wantsFleetStore } from './fleet.js';
import { AUTH_USAGE, runAuthCommand } from './auth.js';

export type { CliIo } from './io.js';

const USAGE = `Usage:
  stepbind catalog --config FILE [--json]   discover every tool of every configured server
  stepbind config check FILE [--json]       validate a configuration file without starting anything
  stepbind tools --config FILE [--format openai|responses|anthropic|gemini] [--no-strict]
                                            print the tools of one step (text, or a provider's JSON)
  stepbind call SERVER TOOL --config FILE [--args JSON] [--approve] [--json]
                                            run one call through the full admission path
  stepbind --version                        print the version
  stepbind receipts verify --journal FILE [--json] [--expect-head SEQ:DIGEST]
                                            check the journal's receipts chain
  stepbind receipts list --journal FILE [--json] [--key K]
                                            list the journal's receipts
  stepbind help                             show this help
${AUTH_USAGE}${FLEET_USAGE}
catalog: exit code 0 only if every server succeeded; 1 if any server failed.
receipts verify: exit code 0 only for an intact chain; 1 when it is broken.
Exit code 2 for usage, configuration or journal errors.
`;

/**
 * Runs the `stepbind` command line with `argv` (without node and the script) and resolves to the
 * exit code. Never calls `process.exit`; every server it starts is closed before it resolves.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    io.stdout(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'config') return configCommand(rest, io);
  if (command === '--version' || command === '-V' || command === 'version') {
    io.stdout(`${await packageVersion()}\n`);
    return 0;
  }
  if (command === 'tools') return runToolsCommand(rest, io);
  if (command === 'call') return runCallCommand(rest, io);
  if (command === 'login' || command === 'logout' || command === 'auth')
    return runAuthCommand(command, rest, io);
  if (command === 'store' || command === 'policy') return runFleetCommand(command, rest, io);
  if (command === 'receipts' && wantsFleetStore(rest)) return runFleetCommand(command, rest, io);
  if (command === 'receipts') return receipts(rest, io);
  if (command !== 'catalog') {
    io.stderr(`stepbind: unknown command "${command}"\n\n${USAGE}`);
    return 2;
  }
  let configPath: string | undefined;
  let json = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--json') json = true;
    else if (arg === '--config') configPath = rest[++i];
    else if (arg?.startsWith('--config=') === true) configPath = arg.slice('--config='.length);
    else {
      io.stderr(`stepbind catalog: unknown argument "${String(arg)}"\n\n${USAGE}`);
      return 2;
    }
  }
  if (configPath === undefined || configPath === '') {
    io.stderr(`stepbind catalog: --config FILE is required\n\n${USAGE}`);
    return 2;
  }
  let config;
  try {
    config = await loadConfigFile(configPath);
    if (config.servers.size === 0) {
      throw new RuntimeError(
        ErrorCode.INVALID_CONFIG,
        `${configPath}: no servers are configured ("mcpServers" is empty), so there is nothing to discover. Add a server, for example "mcpServers": { "files": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"] } }.`,
        { detail: { path: '$.mcpServers' } },
      );
    }
  } catch (error) {
    printError(error, json, io);
    return 2;
  }
  const pages = new Map<string, DiscoveryProgress>();
  const progress = io.progress;
  const reports = await discoverCatalogs(config, {
    ...(io.signal === undefined ? {} : { signal: io.signal }),
    ...(progress === undefined
      ? {}
      : {
          onPage: (p: DiscoveryProgress) => {
            pages.set(p.server, p);
            progress(
              `discovering: ${[...pages.values()].map((s) => `${s.server} page ${s.page} (${s.totalTools} tools)`).join(' · ')}`,
            );
          },
        }),
  });
  progress?.('');
  io.stdout(
    json ? `${JSON.stringify(catalogReportJson(reports))}\n` : `${formatCatalogReport(reports)}\n`,
  );
  return reports.every((r) => r.ok) ? 0 : 1;
}

async function configCommand(args: readonly string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = args;
  const json = rest.includes('--json');
  const files = rest.filter((a) => a !== '--json');
  const file = files[0];
  if (sub !== 'check' || file === undefined || files.length !== 1) {
    io.stderr(`stepbind config: expected "config check FILE [--json]"\n\n${USAGE}`);
    return 2;
  }
  try {
    const config = await loadConfigFile(file);
    io.stdout(
      json
        ? `${JSON.stringify(configCheckJson(config))}\n`
        : `${formatConfigCheck(file, config)}\n`,
    );
    return 0;
  } catch (error) {
    printError(error, json, io);
    return 2;
  }
}

function printError(error: unknown, json: boolean, io: CliIo): void {
  if (json) {
    const body =
      error instanceof StepbindError
        ? error.toJSON()
        : { code: 'INTERNAL', message: error instanceof Error ? error.message : String(error) };
    io.stdout(`${JSON.stringify({ ok: false, error: body })}\n`);
  } else {
    io.stderr(
      `stepbind: ${error instanceof StepbindError ? `${error.code}: ` : ''}${error instanceof Error ? error.message : String(error)}\n`,
    );
  }
}

async function receipts(argv: readonly string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'verify' && sub !== 'list') {
    io.stderr(`stepbind receipts: expected "verify" or "list"\n\n${USAGE}`);
    return 2;
  }
  let journal: string | undefined;
  let key: string | undefined;
  let expect: string | undefined;
  let json = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--json') json = true;
    else if (arg === '--journal') journal = rest[++i];
    else if (arg?.startsWith('--journal=') === true) journal = arg.slice('--journal='.length);
    else if (sub === 'verify' && arg === '--expect-head') expect = rest[++i] ?? '';
    else if (sub === 'verify' && arg?.startsWith('--expect-head=') === true)
      expect = arg.slice('--expect-head='.length);
    else if (sub === 'list' && arg === '--key') key = rest[++i];
    else if (sub === 'list' && arg?.startsWith('--key=') === true) key = arg.slice('--key='.length);
    else {
      io.stderr(`stepbind receipts ${sub}: unknown argument "${String(arg)}"\n\n${USAGE}`);
      return 2;
    }
  }
  if (journal === undefined || journal === '') {
    io.stderr(`stepbind receipts ${sub}: --journal FILE is required\n\n${USAGE}`);
    return 2;
  }
  if (sub === 'list' && key === '') {
    io.stderr(`stepbind receipts list: --key needs a value\n\n${USAGE}`);
    return 2;
  }
  const expectHead = expect === undefined ? undefined : parseExpectedHead(expect);
  if (expect !== undefined && expectHead === undefined) {
    io.stderr(
      `stepbind receipts verify: --expect-head needs SEQ:DIGEST (as printed after "head:")\n\n${USAGE}`,
    );
    return 2;
  }
  try {
    const report =
      sub === 'verify'
        ? await verifyReceipts(journal, json, expectHead)
        : await listReceipts(journal, { json, ...(key === undefined ? {} : { key }) });
    io.stdout(report.stdout);
    return report.code;
  } catch (error) {
    io.stderr(
      `stepbind: ${error instanceof StepbindError ? `${error.code}: ` : ''}${error instanceof Error ? error.message : String(error)}\n`,
    );
    return 2;
  }
}
