/**
 * What a step knows of a server's resources and prompts (DESIGN §20.3): the frozen list items a
 * step captures, and the small port the binding reaches a server through for them. No I/O here.
 *
 * @packageDocumentation
 */

/** One resource a server listed (`resources/list`), as a step shows it. Frozen. */
export interface StepResource {
  /** The configured server that listed it (and that `readResource` asks). */
  readonly server: string;
  readonly uri: string;
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly mimeType?: string;
  /** Size in bytes, when the server says. */
  readonly size?: number;
}

/** One resource template a server listed (`resources/templates/list`). Frozen. */
export interface StepResourceTemplate {
  readonly server: string;
  readonly uriTemplate: string;
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly mimeType?: string;
}

/** One declared argument of a prompt. */
export interface StepPromptArgument {
  readonly name: string;
  readonly description?: string;
  /** Whether `getPrompt` must be given it. */
  readonly required: boolean;
}

/** One prompt a server listed (`prompts/list`), as a step shows it. Frozen. */
export interface StepPrompt {
  /** The server-qualified name the step knows it by (`server__prompt`, like tools, DESIGN §8). */
  readonly modelName: string;
  readonly server: string;
  /** The prompt's own name on its server. */
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly arguments: readonly StepPromptArgument[];
}

/** One server's resource and prompt lists at one moment (all frozen, possibly empty). */
export interface FeatureLists {
  readonly resources: readonly StepResource[];
  readonly resourceTemplates: readonly StepResourceTemplate[];
  /** Prompts as listed; `modelName` is assigned when a step captures them (here it is `''`). */
  readonly prompts: readonly StepPrompt[];
}

/** What a server declared it can do beyond tools (its `capabilities`). */
export interface FeatureSupport {
  readonly resources: boolean;
  /** `resources.subscribe`: `resources/subscribe` and `notifications/resources/updated`. */
  readonly subscribe: boolean;
  readonly prompts: boolean;
  /** `completions`: `completion/complete`. */
  readonly completions: boolean;
}

/** The requests a step sends for resources and prompts. */
export type FeatureMethod =
  | 'resources/list'
  | 'resources/templates/list'
  | 'prompts/list'
  | 'resources/read'
  | 'resources/subscribe'
  | 'resources/unsubscribe'
  | 'prompts/get'
  | 'completion/complete';

/** Options of one {@link FeatureClient.request}. */
export interface FeatureRequestOptions {
  readonly signal?: AbortSignal;
  readonly timeoutMs: number;
}

/**
 * The one connection a step's resource and prompt requests go through: the connection that was
 * live when the step was captured. Failures are typed `StepbindError`s, scrubbed by the server's
 * redactor.
 */
export interface FeatureClient {
  /** True once nothing more can be sent. */
  readonly closed: boolean;
  /** Sends one request and resolves with its raw result (checked by the caller). */
  request(
    method: FeatureMethod,
    params: Readonly<Record<string, unknown>>,
    options: FeatureRequestOptions,
  ): Promise<unknown>;
  /** Calls `listener` with the uri of every `notifications/resources/updated`. */
  onResourceUpdated(listener: (uri: string) => void): () => void;
}

/** A server's resources and prompts as a step captures them: lists, support and client together. */
export interface CapturedFeatures {
  readonly lists: FeatureLists;
  readonly support: FeatureSupport;
  readonly client: FeatureClient;
  /** Default timeout of this server's requests (its `callTimeoutMs`). */
  readonly timeoutMs: number;
}

/**
 * The runtime's side of one server's resources and prompts: `capture()` hands out the lists in
 * force and the connection that serves them, read once per step.
 */
export interface FeatureSource {
  capture(): CapturedFeatures;
}
