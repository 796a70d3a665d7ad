/**
 * @stepbind/testkit: scripted MCP servers (stdio child processes and in-memory) with request audit
 * trails, for testing agent loops against real protocol behaviour.
 * @packageDocumentation
 */
export { readAuditTrail, isProcessAlive, tempAuditPath } from './audit.js';
export { connectInMemory, stdioServerParams } from './connect.js';
export type { InMemoryConnection, StdioServerParams } from './connect.js';
export { FixtureError, parseServerFixture } from './fixture.js';
export type {
  FixtureCallResult,
  FixtureGeneration,
  FixturePage,
  FixtureTrigger,
  FixtureTriggerMatch,
  ServerFixture,
} from './fixture.js';
export { CATALOG_REVISION_META_KEY, scriptedTool } from './scenarios.js';
export { createScriptedServer } from './server/scripted.js';
export type { ScriptedServer, ScriptedServerHooks } from './server/scripted.js';
export type { AuditEntry, ScenarioName, ScriptedServerOptions } from './types.js';
export { createInMemoryFleet } from './fleet.js';
export type { InMemoryFleet } from './fleet.js';
