export {
  ErrorCode,
  StepbindError,
  CatalogError,
  CallError,
  ConfigError,
  RuntimeError,
  JournalError,
  isStepbindError,
} from './errors.js';
export type { BaseErrorDetail, Delivery, StepbindErrorOptions } from './errors.js';
export { canonicalJson, digestOf, sha256Hex } from './canonical.js';
export {
  CATALOG_REVISION_META_KEY,
  DEFAULT_ENUMERATE_LIMITS,
  enumerateCatalog,
  resolveEnumerateLimits,
} from './discovery.js';
export type {
  ChangeFeed,
  EnumerateOptions,
  ListPageRequest,
  RawTool,
  RevisionProof,
  ToolEnumeration,
  ToolListSource,
} from './discovery.js';
export {
  DEFAULT_SCHEMA_DIALECTS,
  SCHEMA_DIALECT_URIS,
  SchemaValidatorCache,
  dialectOf,
} from './schema.js';
export type {
  SchemaCacheStats,
  SchemaDialect,
  SchemaProblem,
  SchemaValidator,
  ValidationResult,
} from './schema.js';
export {
  DEFAULT_MAX_SCHEMA_BYTES,
  TOOL_NAME_PATTERN,
  validateCatalog,
  validateTool,
} from './validation.js';
export type {
  CheckedSchema,
  McpToolDefinition,
  ObjectSchema,
  ToolAnnotations,
  UnenforcedPattern,
  ValidatedTool,
  ValidationOptions,
} from './validation.js';
export { DEFAULT_CALL_LIMITS } from './bounds.js';
export type { CallLimits } from './bounds.js';
export {
  CATALOG_SNAPSHOT_SCHEMA,
  DEFAULT_SNAPSHOT_TTL_MS,
  computeTransportDigest,
  createCatalogSnapshot,
  createSnapshotBuilder,
  effectClassOf,
  withGeneration,
} from './snapshot.js';
export type {
  CatalogSnapshot,
  CreateCatalogSnapshotInput,
  EffectClass,
  ServerIdentity,
  ServerInfo,
  SnapshotBuilder,
  SnapshotBuilderOptions,
  SnapshotFinishInput,
  ToolDescriptor,
} from './snapshot.js';
export {
  CATALOG_TRANSITIONS,
  CatalogState,
  DiscoveryTracker,
  classifyRevisions,
  isLegalTransition,
  isTerminalState,
  transition,
} from './states.js';
export type { RevisionClassification, RevisionIncompleteReason } from './states.js';
export {
  MAX_MODEL_NAME_LENGTH,
  MODEL_NAME_HASH_LENGTH,
  assignModelNames,
  sanitizeNamePart,
  toModelTools,
} from './names.js';
export type { ModelNameEntry, ModelNameTable, QualifiedToolName } from './names.js';
export { modelToolOf } from './tools/view.js';
export type { ModelTool } from './tools/view.js';
export type {
  McpAnnotations,
  McpAudioContent,
  McpContentBlock,
  McpEmbeddedResource,
  McpImageContent,
  McpResourceContents,
  McpResourceLink,
  McpTextContent,
} from './tools/content.js';
export {
  STRICT_MAX_DEPTH,
  STRICT_MAX_ENUM_VALUES,
  STRICT_MAX_PROPERTIES,
  toStrictSchema,
} from './tools/strict.js';
export type {
  JsonSchemaObject,
  NonStrictSchema,
  StrictConversion,
  StrictSchema,
} from './tools/strict.js';
export {
  toAnthropicTools,
  toGeminiFunctionDeclarations,
  toOpenAIChatTools,
  toOpenAIResponsesTools,
} from './tools/formats.js';
export type {
  AnthropicTool,
  FormattedTools,
  GeminiFunctionDeclaration,
  NotStrictTool,
  OmittedTool,
  OpenAIChatTool,
  OpenAIResponsesTool,
  OpenAIToolsOptions,
} from './tools/formats.js';
export {
  toAnthropicToolResult,
  toGeminiFunctionResponse,
  toOpenAIChatToolMessages,
  toOpenAIResponsesOutput,
  toolResultParts,
} from './tools/results.js';
export type {
  AnthropicToolResultBlock,
  AnthropicToolResultContent,
  GeminiFunctionResponseOptions,
  GeminiFunctionResponsePart,
  OpenAIChatContentPart,
  OpenAIChatToolMessage,
  OpenAIChatUserMessage,
  OpenAIFunctionCallOutput,
  OpenAIResponsesOutputPart,
  ToolResultLike,
  ToolResultPart,
} from './tools/results.js';
export { CatalogRegistry, sameIdentity } from './registry.js';
export type {
  CatalogRegistryOptions,
  HeldSnapshot,
  PublishConflictReason,
  PublishOptions,
  SnapshotLifecycle,
} from './registry.js';
export { acquireMutex, RevisionLock } from './lock.js';
export { onAbort } from './signals.js';
export type { LockAcquireOptions, Release } from './lock.js';
export { CatalogSlot, createBinding, McpBinding, PreparedCall, toToolResult } from './binding.js';
export type {
  ApprovalMode,
  BindingServerStatus,
  BindingView,
  BoundServer,
  BoundTool,
  CallOutcome,
  CallPolicy,
  CallReceipt,
  CreateBindingOptions,
  ErrorToolResult,
  LeftOutServer,
  PrepareContext,
  RunOptions,
  ToolCallResult,
  ToolCaller,
} from './binding.js';
export { CallJournal, JournalClaim } from './journal/journal.js';
export type {
  BeginOptions,
  BeginResult,
  CallIntent,
  CallJournalOptions,
  ResolveInput,
} from './journal/journal.js';
export { MemoryJournalStore } from './journal/memory.js';
export type { MemoryJournalStoreOptions } from './journal/memory.js';
export {
  GENESIS_ANCHOR,
  GENESIS_DIGEST,
  chainReceipt,
  receiptDigest,
  receiptText,
  verifyChain,
} from './journal/chain.js';
export type { ChainVerification } from './journal/chain.js';
export { JOURNAL_STATES } from './journal/store.js';
export type {
  CallContext,
  ChainAnchor,
  JournalRecord,
  JournalState,
  JournalStore,
  PruneOptions,
  ReadReceiptsOptions,
  ReceiptBody,
  ReceiptEntry,
  ReceiptSource,
  RecordedOutcome,
  Resolution,
  StoredReceipt,
  UpdateResult,
} from './journal/store.js';
