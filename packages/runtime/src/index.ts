/**
 * @stepbind/runtime: the MCP tool runtime. Re-exports everything an agent loop needs from
 * `@stepbind/binding` (errors, `toToolResult`, provider formats and tool-result messages), so a
 * loop imports from this package alone. The AI SDK adapter is the `@stepbind/runtime/ai-sdk` subpath.
 * @packageDocumentation
 */
export {
  CallError,
  CatalogError,
  ConfigError,
  ErrorCode,
  JournalError,
  RuntimeError,
  SEARCH_TOOLS_NAME,
  StepbindError,
  isStepbindError,
  toAnthropicDeferredTools,
  toAnthropicToolResult,
  toAnthropicTools,
  toGeminiDeferredTools,
  toGeminiFunctionDeclarations,
  toGeminiFunctionResponse,
  toOpenAIChatDeferredTools,
  toOpenAIChatToolMessages,
  toOpenAIChatTools,
  toOpenAIResponsesDeferredTools,
  toOpenAIResponsesOutput,
  toOpenAIResponsesTools,
  toStrictSchema,
  toToolResult,
  toolResultParts,
} from '@stepbind/binding/internal';
export type {
  DeferredToolsOptions,
  ToolSearchHit,
  ToolSearchOptions,
} from '@stepbind/binding/internal';
export type {
  BaseErrorDetail,
  CallErrorDetail,
  Delivery,
  ErrorDetail,
  ErrorDetailMap,
  KeyRefusalDetail,
  LimitErrorDetail,
  OptionProblem,
  StepbindErrorOf,
  ToolErrorDetail,
} from '@stepbind/binding/internal';
export type {
  CatalogSnapshot,
  CatalogState,
  EffectClass,
  InputAnswer,
  InputKind,
  InputRequestRecord,
  McpAnnotations,
  McpToolDefinition,
  ObjectSchema,
  SchemaDialect,
  SchemaValidator,
  ServerIdentity,
  ServerInfo,
  ToolAnnotations,
  ToolDescriptor,
  ToolDiscovery,
  UnenforcedPattern,
  ValidationOptions,
  ValidationResult,
} from '@stepbind/binding/internal';
export type {
  CallContext,
  ChainAnchor,
  ChainVerification,
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
  ResolveInput,
  StoreCallOptions,
  StoreClock,
  StoredReceipt,
  UpdateResult,
} from '@stepbind/binding/internal';
export type {
  AnthropicTool,
  AnthropicToolResultBlock,
  BindingServerStatus,
  CallOutcome,
  CallReceipt,
  ErrorToolResult,
  FormattedTools,
  GeminiFunctionDeclaration,
  GeminiFunctionResponsePart,
  InputRound,
  InputRounds,
  McpBinding,
  McpContentBlock,
  ModelTool,
  NotStrictTool,
  OmittedTool,
  OpenAIChatTool,
  OpenAIChatToolMessage,
  OpenAIChatUserMessage,
  OpenAIFunctionCallOutput,
  OpenAIResponsesTool,
  OpenAIToolsOptions,
  PrepareContext,
  PreparedCall,
  RunOptions,
  StrictConversion,
  ToolCallResult,
  ToolResultLike,
  ToolResultPart,
} from '@stepbind/binding/internal';
export { discoverTools, enumerateTools } from './discover-tools.js';
export type { DiscoverToolsOptions, EnumerateToolsOptions } from './discover-tools.js';
export { parseConfig, SERVER_NAME_PATTERN, workspaceFolderOf } from './config.js';
export type {
  CatalogCacheConfig,
  ConfigProblem,
  HttpServerConfig,
  JournalConfig,
  ParseConfigOptions,
  ProtocolPin,
  RuntimeConfig,
  ServerConfig,
  ServerLimits,
  StdioServerConfig,
} from './config.js';
export { loadConfigFile, MAX_CONFIG_BYTES } from './config-file.js';
export type { ConfigSyntaxError, LoadConfigFileOptions } from './config-file.js';
export type {
  CommonServerEntry,
  HttpServerEntry,
  ServerEntry,
  StdioServerEntry,
  StepbindConfig,
  StepbindConfigCommon,
} from './config-input.js';
export type { ToolFilterConfig } from './tool-filter.js';
export type { CatalogCacheOption } from './cache/option.js';
export type { CatalogCacheIgnoredReason } from './events.js';
export type { Connection, ProtocolEra } from './connection.js';
export { createRedactor, redactHeaders, redactUrl } from './redact.js';
export type { LearningRedactor, Redactor } from './redact.js';
export { DEFAULT_REDIRECT_URI } from './auth/types.js';
export type {
  AuthorizeHook,
  AuthorizeRequest,
  AuthStatus,
  BearerAuthConfig,
  ClientRegistration,
  OAuthConfig,
  OAuthTokens,
  ServerAuthConfig,
  ServerAuthorizer,
  StoredLogin,
  StoredLoginSummary,
  TokenEndpointAuthMethod,
  TokenKey,
  TokenStore,
} from './auth/types.js';
export { MemoryTokenStore } from './auth/memory-token-store.js';
export { FileTokenStore, type FileTokenStoreOptions } from './auth/file-token-store.js';
export { openDefaultTokenStore, stateDirectory } from './auth/default-store.js';
export {
  CALLBACK_TIMEOUT_MS,
  listenForCallback,
  loopbackAuthorize,
  type CallbackListener,
  type CallbackListenerOptions,
  type LoopbackAuthorizeOptions,
} from './auth/loopback.js';
export type { SessionLoss } from './transports/http-session.js';
export type {
  CallRequestOptions,
  RawCallResult,
  ServerHello,
  ServerLogMessage,
} from './connection.js';
export type {
  ClientHandlers,
  ClientRoot,
  ElicitationRequest,
  ElicitationResult,
  SamplingRequest,
  SamplingResult,
  ServerRequestContext,
} from './client-capabilities.js';
export { McpRuntime } from './runtime.js';
export type {
  CaptureOptions,
  DiscoveryStatus,
  JournalStatus,
  JournalTuning,
  McpRuntimeOptions,
  ReconnectOptions,
  RegistryView,
  RuntimeClock,
  RuntimeEvent,
  RuntimeJournalOptions,
  RuntimeStatus,
  ServerAuthStatus,
  ServerConnector,
  ServerStatus,
} from './runtime.js';
export type { JournalView } from './journal/view.js';
export {
  JOURNAL_APPLICATION_ID,
  JOURNAL_SCHEMA_VERSION,
  openSqliteJournal,
  SqliteJournalStore,
} from './journal/sqlite.js';
export type { SqliteJournalOptions } from './journal/sqlite.js';
export type { JournalDriver, JournalDriverOption } from './journal/sqlite-driver.js';
export type { CallProgress, ProgressListener } from '@stepbind/binding/internal';
export {
  resourceParts,
  toAnthropicPromptMessages,
  toAnthropicResourceBlocks,
  toGeminiPromptContents,
  toGeminiResourceParts,
  toOpenAIChatPromptMessages,
  toOpenAIChatResourceParts,
  toOpenAIResponsesResourceParts,
} from '@stepbind/binding/internal';
export type {
  AnthropicPromptMessage,
  CompletionRef,
  CompletionResult,
  FeatureCallOptions,
  GeminiPromptContent,
  GeminiResourcePart,
  McpResourceContents,
  OpenAIChatPromptMessage,
  PromptMessage,
  PromptResult,
  ReadResourceOptions,
  ResourceContents,
  ResourceContentsLike,
  ResourceUpdatedListener,
  StepPrompt,
  StepPromptArgument,
  StepResource,
  StepResourceTemplate,
} from '@stepbind/binding/internal';
