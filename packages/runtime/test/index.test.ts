import * as runtime from '@stepbind/runtime';
import { describe, expect, it } from 'vitest';

describe('@stepbind/runtime public surface', () => {
  it('exports exactly these values (a new export is a deliberate act)', () => {
    expect(Object.keys(runtime).sort()).toEqual([
      'CLIENT_INFO',
      'McpRuntime',
      'SERVER_NAME_PATTERN',
      'SdkConnection',
      'catalogReportJson',
      'connectServer',
      'connectTransport',
      'createRedactor',
      'discoverCatalogs',
      'discoverSnapshot',
      'enumerateTools',
      'formatCatalogReport',
      'loadConfigFile',
      'mapSdkError',
      'parseConfig',
      'redactHeaders',
      'redactUrl',
      'runCli',
    ]);
  });
});
