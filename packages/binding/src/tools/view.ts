/**
 * The one projection of a tool descriptor into what a model sees. Every place that builds model
 * tools (a snapshot's {@link toModelTools}, the runtime's step view) goes through {@link modelToolOf}.
 *
 * @packageDocumentation
 */
import type { ToolDescriptor } from '../snapshot.js';
import type { ObjectSchema } from '../validation.js';

/** A provider-neutral model tool: name, description, JSON Schema of the arguments. */
export interface ModelTool {
  /** The model-facing name (`server__tool`, DESIGN §8). */
  readonly name: string;
  /** The tool's description, or `''` when it has none (or a non-string one). */
  readonly description: string;
  /** The frozen raw input schema. */
  readonly inputSchema: ObjectSchema;
}

/** The frozen model tool of `descriptor` under `modelName`. */
export function modelToolOf(modelName: string, descriptor: ToolDescriptor): ModelTool {
  const description: unknown = descriptor.raw.description;
  return Object.freeze({
    name: modelName,
    description: typeof description === 'string' ? description : '',
    inputSchema: descriptor.raw.inputSchema,
  });
}
