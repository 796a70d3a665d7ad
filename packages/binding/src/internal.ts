/**
 * @stepbind/binding/internal: the public surface plus what only `@stepbind/runtime` and
 * `@stepbind/testkit` use (discovery, validation, snapshot building, the registry, slots, views,
 * locks, the discovery state machine, and the journal's protocol with a prepared call: the claim,
 * the begin and resolve shapes, the per-record audit). Not covered by semver: applications import
 * `@stepbind/binding`.
 *
 * @packageDocumentation
 */
export * from './index.js';
export { abortedError } from './errors.js';
export { sha256Hex } from './canonical.js';
export {
  CATALOG_REVISION_META_KEY,
  DEFAULT_DISCOVERY_LIMITS,
  DISCOVERY_LIMIT_MINIMUMS,
  MAX_TIMER_MS,
  discoverToolPages,
  resolveDiscoveryLimits,
} from './discovery.js';
export type {
  ChangeFeed,
  DiscoverOptions,
  ListPageRequest,
  RawTool,
  RevisionProof,
  ToolDiscovery,
  ToolListSource,
} from './discovery.js';
export { DEFAULT_SCHEMA_DIALECTS, SCHEMA_DIALECT_URIS, dialectOf } from './schema/dialects.js';
export { SchemaValidatorCache } from './schema/cache.js';
export type { SchemaCacheStats, SchemaProblem } from './schema/types.js';
export {
  DEFAULT_MAX_SCHEMA_BYTES,
  MAX_TOOL_NAME_LENGTH,
  TOOL_NAME_PATTERN,
  validateCatalog,
  validateTool,
} from './validation.js';
export type { CheckedSchema, ValidatedTool, ValidationOptions } from './validation.js';
export { DEFAULT_CALL_LIMITS } from './bounds.js';
export {
  CATALOG_SNAPSHOT_SCHEMA,
  DEFAULT_SNAPSHOT_TTL_MS,
  computeTransportDigest,
  effectClassOf,
  withGeneration,
} from './snapshot/snapshot.js';
export type {
  CreateCatalogSnapshotInput,
  SnapshotBuilder,
  SnapshotBuilderOptions,
  SnapshotFinishInput,
} from './snapshot/snapshot.js';
export { createCatalogSnapshot, createSnapshotBuilder } from './snapshot/builder.js';
export {
  CATALOG_TRANSITIONS,
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
} from './names.js';
export type { ModelNameEntry, ModelNameTable, QualifiedToolName } from './names.js';
export { NEAR_DISTANCE, editDistance, nearestName, toolNameMatches } from './nearest.js';
export { bindingViewOf, modelToolOf } from './tools/view.js';
export {
  SEARCH_MAX_DESCRIPTION_CHARS,
  SEARCH_MAX_NAME_CHARS,
  SEARCH_MAX_PARAMETERS,
  SEARCH_MAX_PARAMETER_DEPTH,
  SEARCH_MAX_QUERY_TERMS,
  parameterNamesOf,
  searchTools,
  searchWordsOf,
} from './tools/search.js';
export { TermIndex, TermIndexBuilder } from './tools/search-index.js';
export type { BindingView, BoundServer, BoundTool, ProvisionalServer } from './tools/view.js';
export { CatalogRegistry, sameIdentity } from './registry.js';
export type {
  CatalogRegistryOptions,
  HeldSnapshot,
  PublishConflictReason,
  PublishOptions,
  SnapshotLifecycle,
} from './registry.js';
export { acquireMutex, RevisionLock } from './lock.js';
export type { LockAcquireOptions, Release } from './lock.js';
export { armedDeadlines, onAbort, untilAborted } from './signals.js';
export { CatalogSlot } from './call/slot.js';
export { createBinding } from './call/binding.js';
export type { CreateBindingOptions } from './call/binding.js';
export type { CallPolicy, ToolCaller } from './call/types.js';
export type { InputRoundListener } from './call/input-rounds.js';
export { JournalClaim } from './journal/claim.js';
export type {
  BeginOptions,
  BeginResult,
  CallIntent,
  LateDecision,
  PendingClaim,
  ResolveInput,
} from './journal/claim.js';
export { recordFinding } from './journal/audit.js';
export { jsonText } from './journal/chain.js';
export {
  abortSignal,
  bagOf,
  checkOptions,
  describeValue,
  descriptionOf,
  fn,
  keysOf,
  millis,
  optionProblems,
  problemIssue,
  sameKeys,
  withMethods,
} from './options-check.js';
export type { OptionsContext } from './options-check.js';
export { runOptionsSchema } from './call/run-options.js';
export { MAX_PROGRESS_MESSAGE_CHARS, ProgressGate, progressRelay } from './call/progress.js';
export type { CallProgress, ProgressListener } from './call/types.js';
export { DEFAULT_FEATURE_LIST_LIMITS, LIST_METHOD, listFeature } from './resources/lists.js';
export type {
  DroppedItem,
  FeatureListKind,
  FeatureListLimits,
  FeatureListing,
} from './resources/lists.js';
export type {
  CapturedFeatures,
  FeatureClient,
  FeatureLists,
  FeatureMethod,
  FeatureRequestOptions,
  FeatureSource,
} from './resources/types.js';
