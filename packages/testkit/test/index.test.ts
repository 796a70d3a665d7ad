import { existsSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as testkit from '@stepbind/testkit';

describe('@stepbind/testkit public surface', () => {
  it('exports exactly these values', () => {
    expect(Object.keys(testkit).sort()).toEqual([
      'CATALOG_REVISION_META_KEY',
      'FixtureError',
      'MODEL_INITIAL_CATALOGS',
      'MODEL_TOOL_POOL',
      'OracleDisagreement',
      'RuntimeOracle',
      'SDK2_SERVER_INFO',
      'SDK2_SERVER_LOG_ENV',
      'agree',
      'appLoopCommands',
      'arbCatalog',
      'arbCursorCycle',
      'arbListResult',
      'arbNearValidTool',
      'arbPageSplit',
      'arbTool',
      'arbToolName',
      'connectInMemory',
      'createEventLog',
      'createInMemoryFleet',
      'createModelSystem',
      'createScriptedServer',
      'hostileServerParams',
      'isProcessAlive',
      'modelCommandArbitraries',
      'modelCommands',
      'modelScript',
      'observe',
      'pagedSource',
      'parseServerFixture',
      'processGroupMembers',
      'propertyParameters',
      'propertyRun',
      'readAuditTrail',
      'readHostilePids',
      'readTaskEvents',
      'runModel',
      'runningProcesses',
      'scriptedTestEra',
      'scriptedTool',
      'sdk2StdioServerParams',
      'sequenceSource',
      'spawnHttpServer',
      'spawnSdk2HttpServer',
      'spawnTaskHttpServer',
      'startAuthorizationServer',
      'startHostileHttpServer',
      'startProtectedMcpServer',
      'stdioServerParams',
      'taskServerParams',
      'tempAudit',
      'tempAuditPath',
      'tempDir',
      'trackSessions',
      'untilTaskEvent',
      'warmModelCommands',
    ]);
  });

  it('stdioServerParams points at the compiled stdio entry, also when run from src', () => {
    const params = testkit.stdioServerParams({ scenario: 'normal' });
    expect(params.command).toBe(process.execPath);
    const [entry, flag, json] = params.args;
    expect(entry).toMatch(/[/\\]packages[/\\]testkit[/\\]dist[/\\]server[/\\]stdio\.js$/);
    expect(isAbsolute(entry ?? '')).toBe(true);
    expect(existsSync(entry ?? '')).toBe(true);
    expect(flag).toBe('--options');
    expect(JSON.parse(json ?? '')).toEqual({ scenario: 'normal' });
  });

  it('stdioServerParams refuses options too long for one argument', () => {
    const tools = Array.from({ length: 3000 }, (_, i) => testkit.scriptedTool(`tool${i}`));
    expect(() =>
      testkit.stdioServerParams({
        scenario: 'fixture',
        fixture: { generations: [{ pages: [{ tools }] }] },
      }),
    ).toThrow(/fixturePath/);
  });
});

describe('the revision _meta key', () => {
  it('is the one @stepbind/binding reads (testkit keeps its own copy so its server starts light)', async () => {
    const binding = await import('@stepbind/binding/internal');
    expect(testkit.CATALOG_REVISION_META_KEY).toBe(binding.CATALOG_REVISION_META_KEY);
  });
});
