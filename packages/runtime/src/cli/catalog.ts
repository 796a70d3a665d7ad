import { open } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import PQueue from 'p-queue';
import {
  CatalogRegistry,
  ErrorCode,
  RuntimeError,
  SchemaValidatorCache,
  StepbindError,
  type CatalogSnapshot,
  type ToolEnumeration,
} from '@stepbind/binding/internal';
import { parseConfig, type RuntimeConfig, type ServerConfig } from '../config.js';
import { listCatalog, type DiscoveryProgress } from '../catalog-listing.js';
import { identityOf } from '../transports/index.js';
import { connectServer } from '../connect.js';
import type { ProtocolEra } from '../connection.js';

/** The outcome of discovering one configured server. */
export type ServerCatalogReport =
  | {
      readonly name: string;
      readonly ok: true;
      /** The protocol era the server spoke (`modern`: 2026-07-28; `legacy`: `initialize`). */
      readonly era: ProtocolEra;
      readonly enumeration: ToolEnumeration;
      /** The published snapshot (generation 1 of a registry private to this discovery). */
      readonly snapshot: CatalogSnapshot;
    }
  | {
      readonly name: string;
      readonly ok: false;
      readonly error: StepbindError;
    };

/** Options for {@link discoverCatalogs}. */
export interface DiscoverCatalogsOptions {
  /** Cancels every start and enumeration still running; connections are closed. */
  readonly signal?: AbortSignal;
  /** Called after every page of every server (for live progress). */
  readonly onPage?: (progress: DiscoveryProgress) => void;
}

/**
 * Starts every configured server (at most `config.concurrency` at once), enumerates its tools and
 * closes it again, on every path. Never rejects for a server failure: each server gets a report.
 */
export async function discoverCatalogs(
  config: RuntimeConfig,
  options: DiscoverCatalogsOptions = {},
): Promise<readonly ServerCatalogReport[]> {
  const queue = new PQueue({ concurrency: config.concurrency });
  const shared: Shared = {
    registry: new CatalogRegistry(),
    validatorCache: new SchemaValidatorCache(),
  };
  const jobs = [...config.servers].map(([name, server]) =>
    queue.add(() => discoverOne(name, server, shared, options)),
  );
  return Promise.all(jobs);
}

interface Shared {
  readonly registry: CatalogRegistry;
  readonly validatorCache: SchemaValidatorCache;
}

async function discoverOne(
  name: string,
  server: ServerConfig,
  shared: Shared,
  options: DiscoverCatalogsOptions,
): Promise<ServerCatalogReport> {
  const { signal, onPage } = options;
  try {
    signal?.throwIfAborted();
    const connection = await connectServer(name, server, signal === undefined ? {} : { signal });
    try {
      const { enumeration, snapshot } = await listCatalog(connection, {
        name,
        config: server,
        identity: identityOf(name, server, connection),
        policyEpoch: shared.registry.policyEpoch,
        validatorCache: shared.validatorCache,
        ...(signal === undefined ? {} : { signal }),
        ...(onPage === undefined ? {} : { onPage }),
      });
      if (snapshot === undefined) throw new Error('listCatalog skipped a first listing');
      const published = shared.registry.publish(snapshot, { expectedGeneration: 0 });
      return { name, ok: true, era: connection.era, enumeration, snapshot: published };
    } finally {
      await connection.close();
    }
  } catch (error) {
    return { name, ok: false, error: toStepbindError(error, name, signal) };
  }
}

function toStepbindError(
  error: unknown,
  server: string,
  signal: AbortSignal | undefined,
): StepbindError {
  if (error instanceof StepbindError) return error;
  if (signal?.aborted === true) {
    return new RuntimeError(ErrorCode.ABORTED, `Discovery of server "${server}" was cancelled.`, {
      detail: { server },
      cause: error,
    });
  }
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
            tools: report.enumeration.tools.map((tool) => tool.name),
            pageSizes: report.enumeration.pageSizes,
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
      const { tools, pageSizes } = report.enumeration;
      lines.push(
        `✔ ${report.name}: ${tools.length} tool${tools.length === 1 ? '' : 's'} in ${pageSizes.length} page${pageSizes.length === 1 ? '' : 's'} (sizes ${pageSizes.join(', ')}), ${report.snapshot.state}, generation ${report.snapshot.generation}, ${eraText(report.era, report.snapshot.identity.protocolVersion)}`,
      );
      if (tools.length === 0) lines.push('    (no tools)');
      for (const t of report.snapshot.tools) {
        lines.push(`    ${t.name}  [${t.effectClass}]  model name ${t.modelName}`);
      }
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

/** The largest configuration file {@link loadConfigFile} reads: 1 MiB. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * Reads and validates a configuration file of at most {@link MAX_CONFIG_BYTES} (read with a bound,
 * so `/dev/zero` or a huge file fails fast).
 *
 * @throws RuntimeError `INVALID_CONFIG` with the file name in the message.
 */
export async function loadConfigFile(path: string): Promise<RuntimeConfig> {
  const absolute = resolve(path);
  let text: string;
  try {
    text = await readBounded(absolute, MAX_CONFIG_BYTES);
  } catch (error) {
    if (error instanceof StepbindError) throw error;
    throw new RuntimeError(
      ErrorCode.INVALID_CONFIG,
      `Cannot read configuration file ${absolute}: ${error instanceof Error ? error.message : String(error)}`,
      {
        detail: { path: absolute },
        cause: error,
      },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    // V8 quotes the text around the error, which may be a secret: report only where it is.
    const at = position(text, error);
    throw new RuntimeError(
      ErrorCode.INVALID_CONFIG,
      `Configuration file ${absolute} is not valid JSON${at === undefined ? '' : ` (line ${at.line}, column ${at.column})`}.`,
      { detail: { path: absolute, ...(at === undefined ? {} : at) } },
    );
  }
  try {
    const config = parseConfig(json);
    // A relative journal path is relative to the configuration file, wherever the process runs.
    if (config.journal === undefined || isAbsolute(config.journal.path)) return config;
    return Object.freeze({
      ...config,
      journal: Object.freeze({
        ...config.journal,
        path: resolve(dirname(absolute), config.journal.path),
      }),
    });
  } catch (error) {
    if (error instanceof StepbindError) {
      throw new RuntimeError(error.code, `${absolute}: ${error.message}`, {
        detail: error.detail,
        cause: error,
      });
    }
    throw error;
  }
}

async function readBounded(path: string, limit: number): Promise<string> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(limit + 1);
    let length = 0;
    while (length <= limit) {
      const { bytesRead } = await handle.read(buffer, length, limit + 1 - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > limit) {
      throw new RuntimeError(
        ErrorCode.INVALID_CONFIG,
        `Configuration file ${path} is larger than ${limit} bytes; a configuration this large is not a stepbind configuration. Check the --config path.`,
        { detail: { path, limit } },
      );
    }
    return buffer.toString('utf8', 0, length);
  } finally {
    await handle.close();
  }
}

/** Line and column of a `JSON.parse` error, from the position V8 puts in its message. */
function position(text: string, error: unknown): { line: number; column: number } | undefined {
  const match = /position (\d+)/.exec(error instanceof Error ? error.message : '');
  if (match?.[1] === undefined) return undefined;
  const offset = Math.min(Number(match[1]), text.length);
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}
