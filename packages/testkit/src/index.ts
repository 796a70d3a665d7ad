/**
 * @stepbind/testkit: scripted MCP servers (stdio child processes and in-memory) with request audit
 * trails, for testing agent loops against real protocol behaviour.
 * @packageDocumentation
 */
export {
  readAuditTrail,
  isProcessAlive,
  processGroupMembers,
  runningProcesses,
  tempAuditPath,
} from './audit.js';
export type { ProcessInfo } from './audit.js';
export { connectInMemory, scriptedTestEra, stdioServerParams } from './connect.js';
export type { InMemoryConnection, StdioServerParams } from './connect.js';
export { hostileServerParams, readHostilePids, startHostileHttpServer } from './hostile.js';
export type {
  HostileHttpServer,
  HostilePid,
  HostileReply,
  HostileServerOptions,
} from './hostile.js';
export { spawnHttpServer } from './http.js';
export type { HttpServerProcess } from './http.js';
export { FixtureError, parseServerFixture } from './fixture.js';
export type {
  FixtureCallResult,
  FixtureGeneration,
  FixturePage,
  FixtureTrigger,
  FixtureTriggerMatch,
  ServerFixture,
  FixtureProgress,
} from './fixture.js';
export { CATALOG_REVISION_META_KEY, scriptedTool } from './scenarios.js';
export { createScriptedServer } from './server/scripted.js';
export type { ScriptedServer, ScriptedServerHooks } from './server/scripted.js';
export type {
  AuditEntry,
  HttpServerEvent,
  HttpServerOptions,
  ScenarioName,
  ScriptedServerEra,
  ScriptedServerOptions,
} from './types.js';
export { createInMemoryFleet } from './fleet.js';
export type { InMemoryFleet, InMemoryFleetOptions, MessageDirection } from './fleet.js';
export {
  arbCatalog,
  arbCursorCycle,
  arbListResult,
  arbNearValidTool,
  arbPageSplit,
  arbTool,
  arbToolName,
} from './arbitraries.js';
export type {
  ArbCatalogOptions,
  ArbCursorCycleOptions,
  ArbNearValidToolOptions,
  ArbPageSplitOptions,
  ArbToolOptions,
  CursorCycle,
  PageSplit,
} from './arbitraries.js';
export { pagedSource, sequenceSource } from './source.js';
export type {
  PagedCatalogOptions,
  PagedSource,
  PagedSourceOptions,
  PagedSourceRequest,
  SequenceSourceOptions,
  SequenceStep,
} from './source.js';
export { propertyParameters } from './seed.js';
export type { PropertyParameters, PropertyParametersOptions } from './seed.js';
export { propertyRun } from './seed.js';
export type { PropertyRun } from './seed.js';
export { RuntimeOracle } from './model/oracle.js';
export { appLoopCommands } from './model/app-loop.js';
export type { AppLoop } from './model/app-loop.js';
export type { ExpectedServer, PredictedOutcome, ServedPages } from './model/oracle.js';
export { agree, observe, OracleDisagreement, trackSessions } from './model/system.js';
export type { ModelCommand, ModelSystem, ProcessControl, ServerProcess } from './model/system.js';
export { createModelSystem, MODEL_INITIAL_CATALOGS, runModel } from './model/run.js';
export type { ModelSystemOptions } from './model/run.js';
export {
  MODEL_TOOL_POOL,
  modelCommandArbitraries,
  modelCommands,
  modelScript,
} from './model/commands/index.js';
export type { ModelCommandOptions } from './model/commands/index.js';
export { warmModelCommands } from './model/warm.js';
export { createEventLog } from './events.js';
export type { EventLog, RuntimeEventOf } from './events.js';
export { tempAudit, tempDir } from './temp.js';
export type { TempAudit, TempDir } from './temp.js';
export { SDK2_SERVER_INFO, SDK2_SERVER_LOG_ENV } from './era/sdk2-catalog.js';
export type { Sdk2ServerOptions } from './era/sdk2-catalog.js';
export type { Sdk2HttpEvent } from './era/sdk2-http.js';
export { sdk2StdioServerParams, spawnSdk2HttpServer } from './era/sdk2-process.js';
export type { Sdk2HttpServerProcess, Sdk2HttpSpawnOptions } from './era/sdk2-process.js';
export { startAuthorizationServer } from './oauth/authorization-server.js';
export type {
  AuthorizationServer,
  AuthorizationServerClients,
  AuthorizationServerCounts,
  AuthorizationServerOptions,
} from './oauth/authorization-server.js';
export { startProtectedMcpServer } from './oauth/protected-server.js';
export type {
  ProtectedMcpServer,
  ProtectedMcpServerCounts,
  ProtectedMcpServerOptions,
} from './oauth/protected-server.js';
export { readTaskEvents, spawnTaskHttpServer, taskServerParams, untilTaskEvent } from './tasks.js';
export type { TaskHttpServer, TaskServerEvent, TaskServerOptions } from './tasks.js';
