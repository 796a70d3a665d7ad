/**
 * @stepbind/binding: the public surface for applications. Errors, the step binding and its
 * prepared calls, the model tools and their provider formats and tool-result messages, the
 * snapshot and descriptor types a step exposes, canonical digests, the call journal, and the
 * journal store interface (with its record types, its in-memory store and the receipt chain) that
 * durable stores implement. The runtime's internals, including the journal's protocol with a
 * prepared call (claims, begin and resolve shapes), are the `@stepbind/binding/internal` subpath.
 *
 * @packageDocumentation
 */
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
export type {
  BaseErrorDetail,
  Delivery,
  ErrorDetail,
  ErrorDetailMap,
  StepbindErrorOf,
  StepbindErrorOptions,
  CallErrorDetail,
  KeyRefusalDetail,
  ToolErrorDetail,
  LimitErrorDetail,
  OptionProblem,
} from './errors.js';
export { canonicalJson, digestOf } from './canonical.js';
export type { CallLimits } from './bounds.js';
export type { SchemaDialect } from './schema/dialects.js';
export type { SchemaValidator, ValidationResult } from './schema/types.js';
export type {
  McpToolDefinition,
  ObjectSchema,
  ToolAnnotations,
  UnenforcedPattern,
} from './validation.js';
export type {
  CatalogSnapshot,
  EffectClass,
  ServerIdentity,
  ServerInfo,
  ToolDescriptor,
} from './snapshot/snapshot.js';
export { CatalogState } from './states.js';
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
export { SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, SEARCH_MAX_QUERY_CHARS } from './tools/search.js';
export type { ToolSearchHit, ToolSearchOptions } from './tools/search.js';
export {
  SEARCH_TOOLS_NAME,
  estimateTokens,
  toAnthropicDeferredTools,
  toGeminiDeferredTools,
  toOpenAIChatDeferredTools,
  toOpenAIResponsesDeferredTools,
} from './tools/deferred.js';
export type {
  AnthropicDeferrableTool,
  AnthropicDeferredTools,
  AnthropicToolReferenceResult,
  DeferralPlan,
  DeferredToolsOptions,
  FoundTool,
  OpenAIResponsesDeferredTools,
  OpenAIResponsesNamespace,
  OpenAIResponsesNamespaceFunction,
  OpenAIResponsesToolSearch,
  OpenAIResponsesToolSearchOutput,
  PortableDeferredTools,
  PortableSearchResult,
  SearchableStep,
} from './tools/deferred.js';
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
export { McpBinding } from './call/binding.js';
export type { BindingServerStatus } from './call/binding.js';
export { PreparedCall } from './call/prepared.js';
export { toToolResult } from './call/result.js';
export type { ErrorToolResult } from './call/result.js';
export type {
  ApprovalMode,
  CallOutcome,
  CallReceipt,
  PrepareContext,
  RunOptions,
  ToolCallResult,
} from './call/types.js';
export type {
  InputAnswer,
  InputKind,
  InputRequestRecord,
  InputRound,
  InputRounds,
  InputStop,
} from './call/input-rounds.js';
export type { LeftOutServer } from './tools/view.js';
export { CallJournal } from './journal/journal.js';
export type { CallJournalOptions } from './journal/journal.js';
export { MemoryJournalStore } from './journal/memory.js';
export type { MemoryJournalOverCap, MemoryJournalStoreOptions } from './journal/memory.js';
export {
  GENESIS_ANCHOR,
  GENESIS_DIGEST,
  chainReceipt,
  pruneReceipt,
  receiptDigest,
  receiptText,
  stampReceipt,
  verifyChain,
} from './journal/chain.js';
export type { ChainVerification } from './journal/chain.js';
export { resultDigestOf, verifyJournal } from './journal/audit.js';
export type {
  JournalAuditInput,
  JournalFinding,
  JournalFindingReason,
  JournalVerification,
  KeyReceipt,
} from './journal/audit.js';
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
  StoreCallOptions,
  StoreClock,
  StoredReceipt,
  UpdateResult,
} from './journal/store.js';
export type { CallProgress, ProgressListener } from './call/types.js';
export type { TaskSupport } from './call/task.js';
export type { TaskCallRequest } from './call/types.js';
export type {
  FeatureSupport,
  StepPrompt,
  StepPromptArgument,
  StepResource,
  StepResourceTemplate,
} from './resources/types.js';
export type {
  CompletionRef,
  CompletionResult,
  FeatureCallOptions,
  PromptMessage,
  PromptResult,
  ReadResourceOptions,
  ResourceContents,
  ResourceUpdatedListener,
} from './resources/step.js';
export {
  resourceParts,
  toAnthropicPromptMessages,
  toAnthropicResourceBlocks,
  toGeminiPromptContents,
  toGeminiResourceParts,
  toOpenAIChatPromptMessages,
  toOpenAIChatResourceParts,
  toOpenAIResponsesResourceParts,
} from './resources/provider.js';
export type {
  AnthropicPromptMessage,
  GeminiPromptContent,
  GeminiResourcePart,
  OpenAIChatPromptMessage,
  ResourceContentsLike,
} from './resources/provider.js';
