export { discoverSnapshot } from './discover.js';
export type { DiscoverSnapshotOptions, Discovery } from './discover.js';
export { enumerateTools } from './enumerate.js';
export type { EnumerateToolsOptions } from './enumerate.js';
export { parseConfig, SERVER_NAME_PATTERN } from './config.js';
export type {
  HttpServerConfig,
  JournalConfig,
  RuntimeConfig,
  ServerConfig,
  ServerLimits,
  StdioServerConfig,
} from './config.js';
export { CLIENT_INFO, connectServer, mapSdkError, SdkConnection } from './sdk.js';
export type { CallRequestOptions, ConnectOptions, RawCallResult, ServerHello } from './sdk.js';
export {
  catalogReportJson,
  discoverCatalogs,
  formatCatalogReport,
  loadConfigFile,
} from './cli/catalog.js';
export type { DiscoverCatalogsOptions, ServerCatalogReport } from './cli/catalog.js';
export { runCli } from './cli/run.js';
export type { CliIo } from './cli/run.js';
export { McpRuntime } from './runtime.js';
export type {
  CaptureOptions,
  JournalTuning,
  McpRuntimeOptions,
  RuntimeEvent,
  RuntimeJournalOptions,
  RuntimeStatus,
  ServerConnector,
  ServerStatus,
} from './runtime.js';
export { connectTransport } from './sdk.js';
export type { ConnectTransportOptions } from './sdk.js';
export {
  JOURNAL_APPLICATION_ID,
  JOURNAL_SCHEMA_VERSION,
  openSqliteJournal,
  SqliteJournalStore,
} from './journal/sqlite.js';
export type { SqliteJournalOptions } from './journal/sqlite.js';
