import { readFile } from 'node:fs/promises';
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
} from '@stepbind/binding';
import { parseConfig, type RuntimeConfig, type ServerConfig } from '../config.js';
import { discoverSnapshot } from '../discover.js';
import { identityOf } from '../identity.js';
import { connectServer } from '../sdk.js';

/** The outcome of discovering one configured server. */
export type ServerCatalogReport =
  | {
      readonly name: string;
      readonly ok: true;
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
    queue.add(() => discoverOne(name, server, shared, options.signal)),
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
  signal: AbortSignal | undefined,
): Promise<ServerCatalogReport> {
  try {
    signal?.throwIfAborted();
    const connection = await connectServer(name, server, signal === undefined ? {} : { signal });
    try {
      const { enumeration, snapshot } = await discoverSnapshot(connection, {
        name,
        config: server,
        identity: identityOf(name, server, connection),
        policyEpoch: shared.registry.policyEpoch,
        validatorCache: shared.validatorCache,
        ...(signal === undefined ? {} : { signal }),
      });
      if (snapshot === undefined) throw new Error('discoverSnapshot skipped a first listing');
      const published = shared.registry.publish(snapshot, { expectedGeneration: 0 });
      return { name, ok: true, enumeration, snapshot: published };
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
 * The `--json` shape of `stepbind catalog`: per server `{ name, ok: true, tools: [names], pageSizes,
 * state, generation, pageRoot, sourceRevision, descriptors: [{ name, modelName, descriptorDigest,
 * effectClass }] }` or `{ name, ok: false, error: { code, message } }`.
 */
export function catalogReportJson(reports: readonly ServerCatalogReport[]): unknown {
  return {
    servers: reports.map((report) =>
      report.ok
        ? {
            name: report.name,
            ok: true,
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

/** Human-readable lines for `stepbind catalog`. */
export function formatCatalogReport(reports: readonly ServerCatalogReport[]): string {
  const lines: string[] = [];
  for (const report of reports) {
    if (report.ok) {
      const { tools, pageSizes } = report.enumeration;
      lines.push(
        `✔ ${report.name}: ${tools.length} tool${tools.length === 1 ? '' : 's'} in ${pageSizes.length} page${pageSizes.length === 1 ? '' : 's'} (sizes ${pageSizes.join(', ')}), ${report.snapshot.state}, generation ${report.snapshot.generation}`,
      );
      lines.push(`    ${tools.length === 0 ? '(no tools)' : tools.map((t) => t.name).join(', ')}`);
    } else {
      lines.push(`✘ ${report.name}: ${report.error.code}`);
      for (const line of report.error.message.split('\n')) lines.push(`    ${line}`);
    }
  }
  return lines.join('\n');
}

/** Reads and validates a configuration file. @throws ConfigError with the file name in the message. */
export async function loadConfigFile(path: string): Promise<RuntimeConfig> {
  const absolute = resolve(path);
  let text: string;
  try {
    text = await readFile(absolute, 'utf8');
  } catch (error) {
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
    throw new RuntimeError(
      ErrorCode.INVALID_CONFIG,
      `Configuration file ${absolute} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
      {
        detail: { path: absolute },
        cause: error,
      },
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
