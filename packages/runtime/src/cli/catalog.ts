import {
  ErrorCode,
  MAX_TIMER_MS,
  RuntimeError,
  StepbindError,
  type CatalogSnapshot,
} from '@stepbind/binding/internal';
import type { RuntimeConfig, ServerConfig } from '../config.js';
import type { DiscoveryProgress } from '../events.js';
import type { ProtocolEra } from '../connection.js';
import type { ServerStatus } from '../options.js';
import { McpRuntime } from '../runtime.js';
import { loadConfigFile } from './config-file.js';
import { cliCacheOption, type CatalogCacheOption } from '../cache/option.js';
import { commandLineOf, formatTable, NO_CACHE_OPTION, type CommandSpec } from './grammar.js';
import type { CliIo } from './io.js';
import { printError } from './options.js';

/** The outcome of discovering one configured server. */
export type ServerCatalogReport =
  | {
      readonly name: string;
      readonly ok: true;
      /** The protocol era the server spoke (`modern`: 2026-07-28; `legacy`: `initialize`). */
      readonly era: ProtocolEra;
      /**
       * The published snapshot (generation 1 of the registry of a runtime private to this
       * discovery): its tools are those a step sees (after the configured `tools` filter).
       */
      readonly snapshot: CatalogSnapshot;
    }
  | {
      readonly name: string;
      readonly ok: false;
      readonly error: StepbindError;
    };

/** Options for {@link discoverCatalogs}. */
export interface DiscoverCatalogsOptions {
  /** Cancels every start and discovery still running; connections are closed. */
  readonly signal?: AbortSignal;
  /** Called after every page of every server (for live progress). */
  readonly onPage?: (progress: DiscoveryProgress) => void;
  /** The runtime's `cache` option (DESIGN §19.1). @default the configuration's `cache`, else none */
  readonly cache?: CatalogCacheOption;
}

/**
 * Discovers every configured server through a {@link McpRuntime} of its own, so the report is what
 * the runtime would publish: opens it (at most `config.concurrency` starts at once), waits until
 * every server is ready or failed, reads each published catalog from `runtime.registry` and the
 * protocol era from `status()`, and closes it on every path. Every server is started as optional
 * (a failure is reported, it does not stop the others), with an in-memory journal and no fleet
 * store (a report journals nothing); the catalog cache is `options.cache`, else the
 * configuration's. Never rejects for a server failure: each server gets a report.
 */
export async function discoverCatalogs(
  config: RuntimeConfig,
  options: DiscoverCatalogsOptions = {},
): Promise<readonly ServerCatalogReport[]> {
  const { signal, onPage, cache } = options;
  const failures = new Map<string, StepbindError>();
  const servers = new Map<string, ServerConfig>();
  for (const [name, server] of config.servers) servers.set(name, { ...server, required: false });
  const reportConfig: RuntimeConfig = {
    ...config,
    servers,
    journal: undefined,
    store: undefined,
  };
  let runtime: McpRuntime | undefined;
  try {
    signal?.throwIfAborted();
    runtime = await McpRuntime.open(reportConfig, {
      // The first capture waits for every server (all optional) to be ready or failed.
      optionalGraceMs: MAX_TIMER_MS,
      onEvent: (event) => {
        if (event.type === 'server-failed') failures.set(event.server, event.error);
        else if (event.type === 'discovery-page') onPage?.(event);
      },
      ...(signal === undefined ? {} : { signal }),
      ...(cache === undefined ? {} : { cache }),
    });
    // The report is of live listings: a server shown from the catalog cache is listed now (its
    // failure is reported through its `server-failed` event), and the cache keeps the result.
    const opened = runtime;
    await Promise.all(
      opened
        .status()
        .servers.filter((s) => s.state === 'provisional')
        .map((s) =>
          opened.hardRefresh(s.name, signal === undefined ? {} : { signal }).catch(() => false),
        ),
    );
    const binding = await runtime.captureBinding(signal === undefined ? {} : { signal });
    binding.release();
    return opened.status().servers.map((status) => reportOf(opened, status, config, failures));
  } catch (error) {
    // Cancelled, or the runtime could not open: a server that failed keeps its error, the rest get
    // ABORTED when cancelled, else the error that stopped the discovery.
    return [...config.servers.keys()].map((name) => ({
      name,
      ok: false,
      error: failures.get(name) ?? toStepbindError(error, name, signal),
    }));
  } finally {
    await runtime?.close();
  }
}

/** The report of a server the runtime settled (ready with a published catalog, or failed). */
function reportOf(
  runtime: McpRuntime,
  status: ServerStatus,
  config: RuntimeConfig,
  failures: ReadonlyMap<string, StepbindError>,
): ServerCatalogReport {
  const { name } = status;
  const audience = config.servers.get(name)?.audience;
  const snapshot = audience === undefined ? undefined : runtime.registry.current(name, audience);
  if (status.state !== 'failed' && status.era !== undefined && snapshot !== undefined) {
    return { name, ok: true, era: status.era, snapshot };
  }
  const error =
    failures.get(name) ??
    new RuntimeError(
      ErrorCode.SERVER_START_FAILED,
      `Server "${name}" did not publish a catalog (${status.state}${status.error === undefined ? '' : `: ${status.error.code} ${status.error.message}`}).`,
      { detail: { server: name } },
    );
  return { name, ok: false, error };
}

function toStepbindError(
  error: unknown,
  server: string,
  signal: AbortSignal | undefined,
): StepbindError {
  if (signal?.aborted === true) {
    return new RuntimeError(ErrorCode.ABORTED, `Discovery of server "${server}" was cancelled.`, {
      detail: { server },
      cause: error,
    });
  }
  if (error instanceof StepbindError) return error;
  return new RuntimeError(
    ErrorCode.SERVER_START_FAILED,
    `Server "${server}" failed: ${error instanceof Error ? error.message : String(error)}`,
    { detail: { server }, cause: error },
  );
}

/**
 * The `--json` shape of `stepbind catalog`: per server `{ name, ok: true, era, protocolVersion,
 * tools: [names], pageSizes, state, generation, pageRoot, sourceRevision, descriptors: [{ name,
 * modelName, descriptorDigest, effectClass }] }` or `{ name, ok: false, error: { code, message } }`.
 * `protocolVersion` is `null` when the server did not say.
 */
export function catalogReportJson(reports: readonly ServerCatalogReport[]): unknown {
  return {
    servers: reports.map((report) =>
      report.ok
        ? {
            name: report.name,
            ok: true,
            era: report.era,
            protocolVersion: report.snapshot.identity.protocolVersion ?? null,
            tools: report.snapshot.tools.map((tool) => tool.name),
            pageSizes: report.snapshot.pageSizes,
            state: report.snapshot.state,
            generation: report.snapshot.generation,
            pageRoot: report.snapshot.pageRoot,
            sourceRevision: report.snapshot.sourceRevision ?? null,
            descriptors: report.snapshot.tools.map((t) => ({
              name: t.name,
              modelName: t.modelName,
              descriptorDigest: t.descriptorDigest,
              effectClass: t.effectClass,
            })),
          }
        : {
            name: report.name,
            ok: false,
            error: { code: report.error.code, message: report.error.message },
          },
    ),
  };
}

/**
 * Human-readable lines for `stepbind catalog`: per server its counts, page sizes, catalog state,
 * generation and protocol era (with the version); per tool its name, effect class and model name.
 */
export function formatCatalogReport(reports: readonly ServerCatalogReport[]): string {
  const lines: string[] = [];
  for (const report of reports) {
    if (report.ok) {
      const { tools, pageSizes } = report.snapshot;
      lines.push(
        `✔ ${report.name}: ${tools.length} tool${tools.length === 1 ? '' : 's'} in ${pageSizes.length} page${pageSizes.length === 1 ? '' : 's'} (sizes ${pageSizes.join(', ')}), ${report.snapshot.state}, generation ${report.snapshot.generation}, ${eraText(report.era, report.snapshot.identity.protocolVersion)}`,
      );
      if (tools.length === 0) lines.push('    (no tools)');
      else
        lines.push(
          ...formatTable(
            ['TOOL', 'EFFECT', 'MODEL NAME'],
            tools.map((t) => [t.name, t.effectClass, t.modelName]),
            '    ',
          ),
        );
    } else {
      lines.push(`✘ ${report.name}: ${report.error.code}`);
      for (const line of report.error.message.split('\n')) lines.push(`    ${line}`);
    }
  }
  return lines.join('\n');
}

/** `era modern (2026-07-28)`: how the CLI names a server's protocol era and version. */
export function eraText(era: ProtocolEra, protocolVersion: string | undefined): string {
  return `era ${era}${protocolVersion === undefined ? '' : ` (${protocolVersion})`}`;
}

/** The grammar and `--help` of `stepbind catalog`. */
export const CATALOG_COMMAND: CommandSpec = {
  name: 'catalog',
  summary: 'Discover every tool of every configured server (nothing is journaled).',
  config: 'required',
  arguments: [],
  options: [
    { name: 'json', description: 'print the report as JSON (shape below)' },
    NO_CACHE_OPTION,
  ],
  notes: `--json: { "servers": [{ "name", "ok": true, "era", "protocolVersion", "tools": [names], "pageSizes",
          "state", "generation", "pageRoot", "sourceRevision",
          "descriptors": [{ "name", "modelName", "descriptorDigest", "effectClass" }] }
        | { "name", "ok": false, "error": { "code", "message" } }] }
Exit code 0 only if every server succeeded; 1 if any server failed; 2 for usage or configuration
errors.`,
};

/** Runs `stepbind catalog` with the arguments after the command name; resolves to the exit code. */
export async function runCatalogCommand(args: readonly string[], io: CliIo): Promise<number> {
  const parsed = commandLineOf(CATALOG_COMMAND, args, io);
  if (typeof parsed === 'number') return parsed;
  const json = parsed.flags.has('json');
  const configPath = parsed.config ?? '';
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
  const cache = cliCacheOption(parsed.flags.has('no-cache'), config);
  const reports = await discoverCatalogs(config, {
    ...(io.signal === undefined ? {} : { signal: io.signal }),
    ...(cache === undefined ? {} : { cache }),
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
