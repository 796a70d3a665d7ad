import * as binding from '@stepbind/binding';
import * as internal from '@stepbind/binding/internal';
import type * as Internal from '@stepbind/binding/internal';
import type * as Public from '@stepbind/binding';
import { describe, expect, expectTypeOf, it } from 'vitest';

describe('@stepbind/binding public surface', () => {
  it('exports exactly these values for applications (a new export is a deliberate act)', () => {
    expect(Object.keys(binding).sort()).toEqual([
      'CallError',
      'CallJournal',
      'CatalogError',
      'CatalogState',
      'ConfigError',
      'ErrorCode',
      'GENESIS_ANCHOR',
      'GENESIS_DIGEST',
      'JOURNAL_STATES',
      'JournalError',
      'McpBinding',
      'MemoryJournalStore',
      'PreparedCall',
      'RuntimeError',
      'SEARCH_DEFAULT_LIMIT',
      'SEARCH_MAX_LIMIT',
      'SEARCH_MAX_QUERY_CHARS',
      'SEARCH_TOOLS_NAME',
      'STRICT_MAX_DEPTH',
      'STRICT_MAX_ENUM_VALUES',
      'STRICT_MAX_PROPERTIES',
      'StepbindError',
      'canonicalJson',
      'chainReceipt',
      'digestOf',
      'estimateTokens',
      'isStepbindError',
      'pruneReceipt',
      'receiptDigest',
      'receiptText',
      'resourceParts',
      'resultDigestOf',
      'stampReceipt',
      'toAnthropicDeferredTools',
      'toAnthropicPromptMessages',
      'toAnthropicResourceBlocks',
      'toAnthropicToolResult',
      'toAnthropicTools',
      'toGeminiDeferredTools',
      'toGeminiFunctionDeclarations',
      'toGeminiFunctionResponse',
      'toGeminiPromptContents',
      'toGeminiResourceParts',
      'toOpenAIChatDeferredTools',
      'toOpenAIChatPromptMessages',
      'toOpenAIChatResourceParts',
      'toOpenAIChatToolMessages',
      'toOpenAIChatTools',
      'toOpenAIResponsesDeferredTools',
      'toOpenAIResponsesOutput',
      'toOpenAIResponsesResourceParts',
      'toOpenAIResponsesTools',
      'toStrictSchema',
      'toToolResult',
      'toolResultParts',
      'verifyChain',
      'verifyJournal',
    ]);
  });

  it('gives every error code a stable string value equal to its key', () => {
    for (const [key, value] of Object.entries(binding.ErrorCode)) expect(value).toBe(key);
  });
});

describe('@stepbind/binding/internal', () => {
  it('re-exports the public surface, the same objects', () => {
    for (const [name, value] of Object.entries(binding)) {
      expect((internal as Record<string, unknown>)[name], name).toBe(value);
    }
  });

  it("keeps the journal's protocol types in /internal only (what a JournalStore needs stays public)", () => {
    expectTypeOf<Internal.CallIntent>().toHaveProperty('argsDigest');
    expectTypeOf<Internal.BeginResult>().toHaveProperty('kind');
    expectTypeOf<Internal.BeginOptions>().toHaveProperty('deferWrite');
    expectTypeOf<Internal.ResolveInput>().toHaveProperty('outcome');
    expectTypeOf<Internal.JournalClaim>().toHaveProperty('key');
    // @ts-expect-error CallIntent is internal
    expectTypeOf<Public.CallIntent>().not.toBeAny();
    // @ts-expect-error BeginResult is internal
    expectTypeOf<Public.BeginResult>().not.toBeAny();
    // @ts-expect-error BeginOptions is internal
    expectTypeOf<Public.BeginOptions>().not.toBeAny();
    // @ts-expect-error ResolveInput is internal
    expectTypeOf<Public.ResolveInput>().not.toBeAny();
    // @ts-expect-error JournalClaim is internal
    expectTypeOf<Public.JournalClaim>().not.toBeAny();
    expectTypeOf<Public.JournalStore>().toHaveProperty('update');
    expectTypeOf<Public.JournalRecord>().toHaveProperty('state');
    expectTypeOf<Public.ReceiptBody>().toHaveProperty('delivery');
  });

  it('adds exactly these runtime-only values (kept out of the public surface)', () => {
    expect(
      Object.keys(internal)
        .filter((name) => !(name in binding))
        .sort(),
    ).toEqual([
      'CATALOG_REVISION_META_KEY',
      'CATALOG_SNAPSHOT_SCHEMA',
      'CATALOG_TRANSITIONS',
      'CatalogRegistry',
      'CatalogSlot',
      'DEFAULT_CALL_LIMITS',
      'DEFAULT_DISCOVERY_LIMITS',
      'DEFAULT_FEATURE_LIST_LIMITS',
      'DEFAULT_MAX_SCHEMA_BYTES',
      'DEFAULT_SCHEMA_DIALECTS',
      'DEFAULT_SNAPSHOT_TTL_MS',
      'DISCOVERY_LIMIT_MINIMUMS',
      'DiscoveryTracker',
      'JournalClaim',
      'LIST_METHOD',
      'MAX_MODEL_NAME_LENGTH',
      'MAX_PROGRESS_MESSAGE_CHARS',
      'MAX_TIMER_MS',
      'MAX_TOOL_NAME_LENGTH',
      'MODEL_NAME_HASH_LENGTH',
      'NEAR_DISTANCE',
      'ProgressGate',
      'RevisionLock',
      'SCHEMA_DIALECT_URIS',
      'SEARCH_MAX_DESCRIPTION_CHARS',
      'SEARCH_MAX_NAME_CHARS',
      'SEARCH_MAX_PARAMETERS',
      'SEARCH_MAX_PARAMETER_DEPTH',
      'SEARCH_MAX_QUERY_TERMS',
      'SchemaValidatorCache',
      'TOOL_NAME_PATTERN',
      'TermIndex',
      'TermIndexBuilder',
      'abortSignal',
      'abortedError',
      'acquireMutex',
      'armedDeadlines',
      'assignModelNames',
      'bagOf',
      'bindingViewOf',
      'checkOptions',
      'classifyRevisions',
      'computeTransportDigest',
      'createBinding',
      'createCatalogSnapshot',
      'createSnapshotBuilder',
      'describeValue',
      'descriptionOf',
      'dialectOf',
      'discoverToolPages',
      'editDistance',
      'effectClassOf',
      'fn',
      'isLegalTransition',
      'isTerminalState',
      'jsonText',
      'keysOf',
      'listFeature',
      'millis',
      'modelToolOf',
      'nearestName',
      'onAbort',
      'optionProblems',
      'parameterNamesOf',
      'problemIssue',
      'progressRelay',
      'recordFinding',
      'resolveDiscoveryLimits',
      'runOptionsSchema',
      'sameIdentity',
      'sameKeys',
      'sanitizeNamePart',
      'searchTools',
      'searchWordsOf',
      'sha256Hex',
      'toolNameMatches',
      'transition',
      'untilAborted',
      'validateCatalog',
      'validateTool',
      'withGeneration',
      'withMethods',
    ]);
  });
});
