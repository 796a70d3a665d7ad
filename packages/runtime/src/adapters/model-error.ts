/**
 * The one rendering of a refusal or failure for the adapters' models: a `CallError` with the
 * original's code and detail (the original as `cause`) whose message is the text `toToolResult`
 * writes for models.
 *
 * @packageDocumentation
 */
import { CallError, StepbindError, toToolResult } from '@stepbind/binding/internal';

/**
 * The `CallError` an adapter's tool throws to its framework. AI SDK 6 shows the model
 * `error.message`, AI SDK 7 `String(error)` (`CallError: ...`); with `toString` returning the
 * message, both show the same text.
 */
class ModelShownCallError extends CallError {
  override toString(): string {
    return this.message;
  }
}

/**
 * `error` as the model should see it: a stepbind error keeps its code and detail; anything else
 * (a hook that threw) is `TOOL_DENIED` naming the tool.
 */
export function forModel(error: unknown, modelName: string): StepbindError {
  const text = toToolResult(error).content[0].text;
  if (error instanceof StepbindError) {
    return new ModelShownCallError(error.code, text, { detail: error.detail, cause: error });
  }
  return new ModelShownCallError('TOOL_DENIED', text, { detail: { modelName }, cause: error });
}
