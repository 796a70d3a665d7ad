import * as binding from '@stepbind/binding';
import * as runtime from '@stepbind/runtime';
import * as aiSdk from '@stepbind/runtime/ai-sdk';
import { describe, expect, it } from 'vitest';

/** What a loop needs from binding, re-exported so it can import from runtime alone. */
const FROM_BINDING = [
  'CallError',
  'ConfigError',
  'ErrorCode',
  'RuntimeError',
  'StepbindError',
  'isStepbindError',
  'toAnthropicToolResult',
  'toAnthropicTools',
  'toGeminiFunctionDeclarations',
  'toGeminiFunctionResponse',
  'toOpenAIChatToolMessages',
  'toOpenAIChatTools',
  'toOpenAIResponsesOutput',
  'toOpenAIResponsesTools',
  'toStrictSchema',
  'toToolResult',
  'toolResultParts',
];

describe('@stepbind/runtime public surface', () => {
  // The CLI (runCli, loadConfigFile, the catalog report) and the runtime's own listing of one
  // connection (listCatalog, formerly discoverSnapshot) are internals: `enumerateTools` is the
  // public one-shot enumeration.
  it('exports exactly these values (a new export is a deliberate act)', () => {
    expect(Object.keys(runtime).sort()).toEqual(
      [
        'CLIENT_CAPABILITIES',
        'CLIENT_INFO',
        'JOURNAL_APPLICATION_ID',
        'JOURNAL_SCHEMA_VERSION',
        'McpRuntime',
        'ModernConnection',
        'SERVER_NAME_PATTERN',
        'SdkConnection',
        'SqliteJournalStore',
        'connectServer',
        'connectTransport',
        'createRedactor',
        'enumerateTools',
        'mapSdkError',
        'openSqliteJournal',
        'parseConfig',
        'redactHeaders',
        'redactUrl',
        ...FROM_BINDING,
      ].sort(),
    );
  });

  it('re-exports the very same binding values, not copies', () => {
    const values = runtime as unknown as Record<string, unknown>;
    const originals = binding as unknown as Record<string, unknown>;
    for (const name of FROM_BINDING) expect(values[name]).toBe(originals[name]);
  });

  it('keeps the AI SDK adapter behind the ai-sdk subpath', () => {
    expect(Object.keys(aiSdk).sort()).toEqual(['stepToAiSdkTools', 'toAiSdkOutput']);
  });
});
