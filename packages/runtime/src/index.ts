export { discoverSnapshot } from './discover.js';
export type { DiscoverSnapshotOptions, Discovery } from './discover.js';
export { enumerateTools } from './enumerate.js';
export type { EnumerateToolsOptions } from './enumerate.js';
export { parseConfig, SERVER_NAME_PATTERN } from './config.js';
export type {
  HttpServerConfig,
  RuntimeConfig,
  ServerConfig,
  ServerLimits,
  StdioServerConfig,
} from './config.js';
export { CLIENT_INFO, connectServer, mapSdkError, SdkConnection } from './sdk.js';
export { createRedactor, redactHeaders, redactUrl } from './redact.js';
export type { Redactor } from './redact.js';
export type { SessionLoss } from './http-session.js';
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
  McpRuntimeOptions,
  ReconnectOptions,
  RuntimeEvent,
  RuntimeStatus,
  ServerConnector,
  ServerStatus,
} from './runtime.js';
export { connectTransport } from './sdk.js';
export type { ConnectTransportOptions } from './sdk.js';
