import { StepbindError } from '@stepbind/binding';
import {
  catalogReportJson,
  discoverCatalogs,
  formatCatalogReport,
  loadConfigFile,
} from './catalog.js';
import { listReceipts, verifyReceipts } from './receipts.js';

/** Where the CLI writes, and how it is cancelled. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly signal?: AbortSignal;
}

const USAGE = `Usage:
  stepbind catalog --config FILE [--json]                 discover every tool of every configured server
  stepbind receipts verify --journal FILE [--json]        check the journal's receipts chain
  stepbind receipts list --journal FILE [--json] [--key K]  list the journal's receipts
  stepbind help                                           show this help

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
  } catch (error) {
    io.stderr(
      `stepbind: ${error instanceof StepbindError ? `${error.code}: ` : ''}${error instanceof Error ? error.message : String(error)}\n`,
    );
    return 2;
  }
  const reports = await discoverCatalogs(
    config,
    io.signal === undefined ? {} : { signal: io.signal },
  );
  io.stdout(
    json ? `${JSON.stringify(catalogReportJson(reports))}\n` : `${formatCatalogReport(reports)}\n`,
  );
  return reports.every((r) => r.ok) ? 0 : 1;
}

async function receipts(argv: readonly string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'verify' && sub !== 'list') {
    io.stderr(`stepbind receipts: expected "verify" or "list"\n\n${USAGE}`);
    return 2;
  }
  let journal: string | undefined;
  let key: string | undefined;
  let json = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--json') json = true;
    else if (arg === '--journal') journal = rest[++i];
    else if (arg?.startsWith('--journal=') === true) journal = arg.slice('--journal='.length);
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
  try {
    const report =
      sub === 'verify'
        ? await verifyReceipts(journal, json)
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
