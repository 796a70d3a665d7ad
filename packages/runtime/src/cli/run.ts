import { ErrorCode, RuntimeError, StepbindError } from '@stepbind/binding';
import {
  catalogReportJson,
  discoverCatalogs,
  formatCatalogReport,
  loadConfigFile,
} from './catalog.js';
import type { DiscoveryProgress } from '../discover.js';
import { configCheckJson, formatConfigCheck } from './config-check.js';
import { runCallCommand } from './call.js';
import { runToolsCommand } from './tools.js';
import { packageVersion } from './version.js';

/** Where the CLI writes, and how it is cancelled. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly signal?: AbortSignal;
  /**
   * Live progress (one line, replaced by the next; `""` clears it). The CLI gives it when stderr is
   * a terminal. @default no progress
   */
  readonly progress?: (line: string) => void;
}

const USAGE = `Usage:
  stepbind catalog --config FILE [--json]   discover every tool of every configured server
  stepbind config check FILE [--json]       validate a configuration file without starting anything
  stepbind tools --config FILE [--format openai|responses|anthropic|gemini] [--no-strict]
                                            print the tools of one step (text, or a provider's JSON)
  stepbind call SERVER TOOL --config FILE [--args JSON] [--approve] [--json]
                                            run one call through the full admission path
  stepbind --version                        print the version
  stepbind help                             show this help

Exit code 0 only if every server succeeded; 1 if any server failed; 2 for usage or config errors.
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
