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
