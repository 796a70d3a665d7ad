import * as runtime from '@stepbind/runtime';
import { describe, expect, it } from 'vitest';

describe('@stepbind/runtime public surface', () => {
  it('exports exactly these values (a new export is a deliberate act)', () => {
    expect(Object.keys(runtime).sort()).toEqual([
      'CLIENT_INFO',
      'JOURNAL_APPLICATION_ID',
      'JOURNAL_SCHEMA_VERSION',
      'McpRuntime',
      'SERVER_NAME_PATTERN',
      'SdkConnection',
      'SqliteJournalStore',
      'catalogReportJson',
      'connectServer',
      'connectTransport',
      'discoverCatalogs',
      'discoverSnapshot',
      'enumerateTools',
      'formatCatalogReport',
      'loadConfigFile',
      'mapSdkError',
      'openSqliteJournal',
      'parseConfig',
      'runCli',
    ]);
  });
});
