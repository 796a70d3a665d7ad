export {
  ErrorCode,
  StepbindError,
  CatalogError,
  CallError,
  ConfigError,
  RuntimeError,
  isStepbindError,
} from './errors.js';
export type { BaseErrorDetail, StepbindErrorOptions } from './errors.js';
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
