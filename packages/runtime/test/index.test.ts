import * as binding from '@stepbind/binding';
import * as runtime from '@stepbind/runtime';
import * as aiSdk from '@stepbind/runtime/ai-sdk';
import * as langChain from '@stepbind/runtime/langchain';
import * as openAiAgents from '@stepbind/runtime/openai-agents';
import * as internal from '@stepbind/runtime/internal';
import { describe, expect, it } from 'vitest';
import { KNOWN_LEAKS, unexportedReachableTypes } from './support/public-types.js';

/** What a loop needs from binding, re-exported so it can import from runtime alone. */
const FROM_BINDING = [
  'CallError',
  'CatalogError',
  'ConfigError',
  'ErrorCode',
  'JournalError',
  'RuntimeError',
  'SEARCH_TOOLS_NAME',
  'StepbindError',
  'isStepbindError',
  'toAnthropicDeferredTools',
  'toAnthropicToolResult',
  'toAnthropicTools',
  'toGeminiDeferredTools',
  'toGeminiFunctionDeclarations',
  'toGeminiFunctionResponse',
  'toOpenAIChatDeferredTools',
  'toOpenAIChatToolMessages',
  'toOpenAIChatTools',
  'toOpenAIResponsesDeferredTools',
  'toOpenAIResponsesOutput',
  'toOpenAIResponsesTools',
  'toStrictSchema',
  'toToolResult',
  'toolResultParts',
  'resourceParts',
  'toAnthropicPromptMessages',
  'toAnthropicResourceBlocks',
  'toGeminiPromptContents',
  'toGeminiResourceParts',
  'toOpenAIChatPromptMessages',
  'toOpenAIChatResourceParts',
  'toOpenAIResponsesResourceParts',
];

describe('@stepbind/runtime public surface', () => {
  // The CLI (runCli, the catalog report), the runtime's own listing of one
  // connection (listCatalog) and the connection layer (@stepbind/runtime/internal) are internals:
  // `discoverTools` is the public one-shot discovery.
  it('exports exactly these values (a new export is a deliberate act)', () => {
    expect(Object.keys(runtime).sort()).toEqual(
      [
        'CALLBACK_TIMEOUT_MS',
        'DEFAULT_REDIRECT_URI',
        'FileTokenStore',
        'JOURNAL_APPLICATION_ID',
        'JOURNAL_SCHEMA_VERSION',
        'MAX_CONFIG_BYTES',
        'McpRuntime',
        'MemoryTokenStore',
        'SERVER_NAME_PATTERN',
        'SqliteJournalStore',
        'createRedactor',
        'discoverTools',
        'enumerateTools',
        'listenForCallback',
        'loadConfigFile',
        'loopbackAuthorize',
        'openDefaultTokenStore',
        'openSqliteJournal',
        'parseConfig',
        'redactHeaders',
        'redactUrl',
        'stateDirectory',
        'workspaceFolderOf',
        ...FROM_BINDING,
      ].sort(),
    );
  });

  it('re-exports the very same binding values, not copies', () => {
    const values = runtime as unknown as Record<string, unknown>;
    const originals = binding as unknown as Record<string, unknown>;
    for (const name of FROM_BINDING) expect(values[name]).toBe(originals[name]);
  });

  it('keeps enumerateTools as the very same function as discoverTools', () => {
    expect(runtime.enumerateTools).toBe(runtime.discoverTools);
  });

  it('keeps the AI SDK adapter behind the ai-sdk subpath', () => {
    expect(Object.keys(aiSdk).sort()).toEqual(['stepToAiSdkTools', 'toAiSdkOutput']);
  });

  it('keeps the LangChain adapter behind the langchain subpath', () => {
    expect(Object.keys(langChain).sort()).toEqual(['stepToLangChainTools', 'toLangChainContent']);
  });

  it('keeps the OpenAI Agents adapter behind the openai-agents subpath', () => {
    expect(Object.keys(openAiAgents).sort()).toEqual(['stepToAgentTools', 'stepbindServer']);
  });

  it('keeps the connection layer behind the internal subpath, out of the root', () => {
    const names = Object.keys(internal).sort();
    expect(names).toEqual([
      'CLIENT_CAPABILITIES',
      'CLIENT_INFO',
      'ModernConnection',
      'OPTIONS_SCHEMAS',
      'SERVER_AUTH_FACTORY',
      'SdkConnection',
      'connectServer',
      'connectTransport',
      'mapSdkError',
      'renderOptionsReference',
    ]);
    for (const name of names) expect(Object.keys(runtime)).not.toContain(name);
  });
});

describe('public types', () => {
  it('exports every named type that a public member of McpRuntime, McpBinding or PreparedCall takes or returns, recursively', () => {
    const { walked, missing } = unexportedReachableTypes('src');
    expect(missing).toEqual(KNOWN_LEAKS);
    // The walk really walked: the options, events, statuses, journal view and binding types.
    expect(walked).toBeGreaterThan(30);
  }, 120_000);
});
