import * as binding from '@stepbind/binding';
import { describe, expect, it } from 'vitest';

describe('@stepbind/binding public surface', () => {
  it('exports exactly these values (a new export is a deliberate act)', () => {
    expect(Object.keys(binding).sort()).toEqual([
      'CATALOG_REVISION_META_KEY',
      'CATALOG_SNAPSHOT_SCHEMA',
      'CATALOG_TRANSITIONS',
      'CallError',
      'CatalogError',
      'CatalogRegistry',
      'CatalogSlot',
      'CatalogState',
      'ConfigError',
      'DEFAULT_CALL_LIMITS',
      'DEFAULT_ENUMERATE_LIMITS',
      'DEFAULT_MAX_SCHEMA_BYTES',
      'DEFAULT_SCHEMA_DIALECTS',
      'DEFAULT_SNAPSHOT_TTL_MS',
      'DiscoveryTracker',
      'ErrorCode',
      'MAX_MODEL_NAME_LENGTH',
      'MODEL_NAME_HASH_LENGTH',
      'McpBinding',
      'PreparedCall',
      'RevisionLock',
      'RuntimeError',
      'SCHEMA_DIALECT_URIS',
      'SchemaValidatorCache',
      'StepbindError',
      'TOOL_NAME_PATTERN',
      'acquireMutex',
      'assignModelNames',
      'canonicalJson',
      'classifyRevisions',
      'computeTransportDigest',
      'createBinding',
      'createCatalogSnapshot',
      'createSnapshotBuilder',
      'dialectOf',
      'digestOf',
      'effectClassOf',
      'enumerateCatalog',
      'isLegalTransition',
      'isStepbindError',
      'isTerminalState',
      'resolveEnumerateLimits',
      'sameIdentity',
      'sanitizeNamePart',
      'sha256Hex',
      'toAnthropicTools',
      'toModelTools',
      'toOpenAITools',
      'toToolResult',
      'transition',
      'validateCatalog',
      'validateTool',
      'withGeneration',
    ]);
  });

  it('gives every error code a stable string value equal to its key', () => {
    for (const [key, value] of Object.entries(binding.ErrorCode)) expect(value).toBe(key);
  });
});
