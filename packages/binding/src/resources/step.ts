/**
 * A step's resources and prompts (DESIGN §20.3): the lists it captured, the resource links its
 * tool results returned, and the requests that read, subscribe, get prompts and complete
 * arguments, each on the connection the step captured for that server.
 *
 * @packageDocumentation
 */
import { checkJsonValue, DEFAULT_CALL_LIMITS } from '../bounds.js';
import { CallError, ErrorCode, type StepbindError } from '../errors.js';
import { assignModelNames } from '../names.js';
import { toolNameMatches } from '../nearest.js';
import type { McpContentBlock, McpResourceContents } from '../tools/content.js';
import { isRecord } from './lists.js';
import type {
  CapturedFeatures,
  FeatureLists,
  FeatureMethod,
  FeatureSource,
  StepPrompt,
  StepResource,
  StepResourceTemplate,
} from './types.js';

/** Options of `McpBinding.readResource`. */
export interface ReadResourceOptions {
  /**
   * The server to read from, for a uri the step neither listed nor got as a link from a tool
   * (a uri built from a resource template). @default the server that listed or returned it
   */
  readonly server?: string;
  readonly signal?: AbortSignal;
  /** @default the server's `callTimeoutMs` */
  readonly timeoutMs?: number;
  /**
   * Largest contents accepted, in bytes (text in UTF-8, blobs decoded).
   * @default the server's `limits.maxOutputBytes` (16 MiB)
   */
  readonly maxBytes?: number;
}

/** The contents of one resource, as `resources/read` returned them. Frozen. */
export interface ResourceContents {
  /** The server that was asked. */
  readonly server: string;
  /** The uri that was asked for. */
  readonly uri: string;
  /** Text or base64 blob items (a directory-like resource may return several). */
  readonly contents: readonly McpResourceContents[];
}

/** One message of a prompt (`prompts/get`). */
export interface PromptMessage {
  readonly role: 'user' | 'assistant';
  readonly content: McpContentBlock;
}

/** A prompt filled in by its server. Frozen. */
export interface PromptResult {
  readonly server: string;
  /** The step's name of the prompt (`server__prompt`). */
  readonly modelName: string;
  readonly description?: string;
  readonly messages: readonly PromptMessage[];
}

/** Options of `getPrompt`, `complete` and `subscribeResource`. */
export interface FeatureCallOptions {
  readonly signal?: AbortSignal;
  /** @default the server's `callTimeoutMs` */
  readonly timeoutMs?: number;
}

/**
 * What `complete` completes: an argument of a prompt of this step (by its `server__prompt` name),
 * or a variable of a resource template of this step (by its uri template; `server` when two servers
 * list the same template).
 */
export type CompletionRef =
  | { readonly type: 'ref/prompt'; readonly name: string }
  | { readonly type: 'ref/resource'; readonly uri: string; readonly server?: string };

/** The values `completion/complete` offered. Frozen. */
export interface CompletionResult {
  readonly values: readonly string[];
  readonly total?: number;
  readonly hasMore?: boolean;
}

/** Called with the uri of each `notifications/resources/updated` of a subscribed resource. */
export type ResourceUpdatedListener = (uri: string) => void;

/** The most values `completion/complete` may return (the specification's bound). */
const MAX_COMPLETION_VALUES = 100;
/** Depth bound of a prompt result. */
const MAX_PROMPT_DEPTH = 32;

interface Subscription {
  readonly uri: string;
  readonly server: string;
  readonly off: () => void;
  active: boolean;
}

/**
 * The resources and prompts of one step. Built at capture from each bound server's
 * {@link FeatureSource}; O(items) once, frozen lists shared with nobody.
 */
export class StepFeatures {
  readonly resources: readonly StepResource[];
  readonly resourceTemplates: readonly StepResourceTemplate[];
  readonly prompts: readonly StepPrompt[];
  readonly #stepId: string;
  readonly #servers = new Map<string, CapturedFeatures & { readonly maxBytes: number }>();
  readonly #promptsByName: ReadonlyMap<string, StepPrompt>;
  /** uri → the servers whose tool results (in this step) returned it as a link or embedded. */
  readonly #links = new Map<string, Set<string>>();
  readonly #subscriptions = new Set<Subscription>();
  readonly #released: () => boolean;

  constructor(
    stepId: string,
    servers: readonly {
      readonly name: string;
      readonly features?: FeatureSource;
      readonly maxOutputBytes?: number;
    }[],
    released: () => boolean,
  ) {
    this.#stepId = stepId;
    this.#released = released;
    const captured: FeatureLists[] = [];
    for (const server of servers) {
      if (server.features === undefined) continue;
      const features = server.features.capture();
      this.#servers.set(server.name, {
        ...features,
        maxBytes: server.maxOutputBytes ?? DEFAULT_CALL_LIMITS.maxOutputBytes,
      });
      captured.push(features.lists);
    }
    const joined = joinLists(captured);
    this.resources = joined.resources;
    this.resourceTemplates = joined.resourceTemplates;
    this.prompts = joined.prompts;
    this.#promptsByName = joined.promptsByName;
  }

  /** Records the resource links and embedded resources of a tool result `server` returned. */
  recordResult(server: string, result: { readonly content?: readonly unknown[] }): void {
    const content = result.content;
    if (!Array.isArray(content)) return;
    for (const block of content) {
      if (!isRecord(block)) continue;
      let uri: unknown;
      if (block['type'] === 'resource_link') uri = block['uri'];
      else if (block['type'] === 'resource' && isRecord(block['resource'])) {
        uri = block['resource']['uri'];
      }
      if (typeof uri !== 'string') continue;
      let servers = this.#links.get(uri);
      if (servers === undefined) this.#links.set(uri, (servers = new Set()));
      servers.add(server);
    }
  }

  /** See `McpBinding.readResource`. */
  async readResource(uri: string, options: ReadResourceOptions = {}): Promise<ResourceContents> {
    const what = `resource "${uri}"`;
    this.#checkOpen(what, { uri });
    if (typeof uri !== 'string' || uri.length === 0) {
      throw this.#error(ErrorCode.INVALID_ARGUMENTS, 'readResource needs a uri string.', {});
    }
    const server = this.#serverOfUri(uri, options.server);
    const captured = this.#supported(server, 'resources', what, { uri });
    const maxBytes = options.maxBytes ?? captured.maxBytes;
    const result = await this.#send(server, 'resources/read', { uri }, options);
    const contents = isRecord(result) ? result['contents'] : undefined;
    if (!Array.isArray(contents)) {
      throw this.#error(
        ErrorCode.SERVER_ERROR,
        `Server "${server}" answered resources/read of "${uri}" without a contents array.`,
        { server, uri, delivery: 'sent' },
      );
    }
    let bytes = 0;
    const out: McpResourceContents[] = [];
    for (const item of contents) {
      const checked = checkContents(item);
      if (checked === undefined) {
        throw this.#error(
          ErrorCode.SERVER_ERROR,
          `Server "${server}" answered resources/read of "${uri}" with an item that is neither text nor a base64 blob with a uri.`,
          { server, uri, delivery: 'sent' },
        );
      }
      bytes += checked.bytes;
      if (bytes > maxBytes) {
        throw this.#error(
          ErrorCode.CONTENT_TOO_LARGE,
          `Resource "${uri}" of server "${server}" is larger than ${maxBytes} bytes; it was not returned. Raise maxBytes (or the server's limits.maxOutputBytes) if you need it.`,
          { server, uri, limit: 'maxBytes', max: maxBytes, delivery: 'sent' },
        );
      }
      out.push(checked.item);
    }
    return Object.freeze({ server, uri, contents: Object.freeze(out) });
  }

  /** See `McpBinding.getPrompt`. */
  async getPrompt(
    name: string,
    args: Readonly<Record<string, unknown>> = {},
    options: FeatureCallOptions = {},
  ): Promise<PromptResult> {
    this.#checkOpen(`prompt "${name}"`, { prompt: name });
    const prompt = this.#prompt(name);
    const server = prompt.server;
    this.#supported(server, 'prompts', `prompt "${name}"`, { prompt: name });
    const problems = promptArgumentProblems(prompt, args);
    if (problems.length > 0) {
      throw this.#error(
        ErrorCode.INVALID_ARGUMENTS,
        `Prompt "${name}" of server "${server}" was not requested: ${problems.join('; ')}.`,
        { server, prompt: name, errors: problems.join('; '), delivery: 'not-sent' },
      );
    }
    const result = await this.#send(
      server,
      'prompts/get',
      { name: prompt.name, arguments: { ...args } },
      options,
    );
    const maxBytes = this.#servers.get(server)?.maxBytes ?? DEFAULT_CALL_LIMITS.maxOutputBytes;
    const problem = checkJsonValue(result, MAX_PROMPT_DEPTH, maxBytes);
    if (problem !== undefined) {
      throw this.#error(
        ErrorCode.CONTENT_TOO_LARGE,
        `Prompt "${name}" of server "${server}" answered more than ${problem.kind === 'bytes' ? `${maxBytes} bytes` : `depth ${MAX_PROMPT_DEPTH}`}; it was not returned.`,
        { server, prompt: name, max: problem.kind === 'not-json' ? 0 : problem.limit },
      );
    }
    const messages = isRecord(result) ? result['messages'] : undefined;
    if (!Array.isArray(messages) || !messages.every(isPromptMessage)) {
      throw this.#error(
        ErrorCode.SERVER_ERROR,
        `Server "${server}" answered prompts/get of "${prompt.name}" without valid messages (role user or assistant, a content block).`,
        { server, prompt: name, delivery: 'sent' },
      );
    }
    const description = isRecord(result) ? result['description'] : undefined;
    return Object.freeze({
      server,
      modelName: prompt.modelName,
      ...(typeof description === 'string' ? { description } : {}),
      messages: Object.freeze(messages.map((m) => Object.freeze({ ...m }))),
    });
  }

  /** See `McpBinding.complete`. */
  async complete(
    ref: CompletionRef,
    argument: { readonly name: string; readonly value: string },
    context: Readonly<Record<string, string>> | undefined,
    options: FeatureCallOptions = {},
  ): Promise<CompletionResult> {
    const what = ref.type === 'ref/prompt' ? `prompt "${ref.name}"` : `template "${ref.uri}"`;
    this.#checkOpen(what, {});
    let server: string;
    let wireRef: Record<string, unknown>;
    if (ref.type === 'ref/prompt') {
      const prompt = this.#prompt(ref.name);
      server = prompt.server;
      wireRef = { type: 'ref/prompt', name: prompt.name };
    } else {
      const owners = this.resourceTemplates
        .filter((t) => t.uriTemplate === ref.uri && (ref.server ?? t.server) === t.server)
        .map((t) => t.server);
      if (owners.length !== 1) {
        throw this.#error(
          ErrorCode.UNKNOWN_RESOURCE,
          owners.length === 0
            ? `This step has no resource template "${ref.uri}"${ref.server === undefined ? '' : ` on server "${ref.server}"`}. Complete only templates of this step.`
            : `Resource template "${ref.uri}" is listed by several servers (${owners.join(', ')}); pass ref.server.`,
          { uri: ref.uri, delivery: 'not-sent' },
        );
      }
      server = owners[0] ?? '';
      wireRef = { type: 'ref/resource', uri: ref.uri };
    }
    this.#supported(server, 'completions', what, {});
    if (
      !isRecord(argument) ||
      typeof argument.name !== 'string' ||
      typeof argument.value !== 'string'
    ) {
      throw this.#error(
        ErrorCode.INVALID_ARGUMENTS,
        `complete needs an argument { name, value } of strings (${what}).`,
        { server, delivery: 'not-sent' },
      );
    }
    const result = await this.#send(
      server,
      'completion/complete',
      {
        ref: wireRef,
        argument: { name: argument.name, value: argument.value },
        ...(context === undefined ? {} : { context: { arguments: { ...context } } }),
      },
      options,
    );
    const completion = isRecord(result) ? result['completion'] : undefined;
    const values = isRecord(completion) ? completion['values'] : undefined;
    if (
      !isRecord(completion) ||
      !Array.isArray(values) ||
      values.length > MAX_COMPLETION_VALUES ||
      !values.every((v) => typeof v === 'string')
    ) {
      throw this.#error(
        ErrorCode.SERVER_ERROR,
        `Server "${server}" answered completion/complete for ${what} without up to ${MAX_COMPLETION_VALUES} string values.`,
        { server, delivery: 'sent' },
      );
    }
    const total = completion['total'];
    const hasMore = completion['hasMore'];
    return Object.freeze({
      values: Object.freeze([...values]),
      ...(Number.isSafeInteger(total) ? { total: total as number } : {}),
      ...(typeof hasMore === 'boolean' ? { hasMore } : {}),
    });
  }

  /** See `McpBinding.subscribeResource`. */
  async subscribeResource(
    uri: string,
    listener: ResourceUpdatedListener,
    options: FeatureCallOptions & { readonly server?: string } = {},
  ): Promise<() => Promise<void>> {
    const what = `resource "${uri}"`;
    this.#checkOpen(what, { uri });
    const server = this.#serverOfUri(uri, options.server);
    const captured = this.#supported(server, 'subscribe', what, { uri });
    const off = captured.client.onResourceUpdated((updated) => {
      if (updated === uri && subscription.active) listener(updated);
    });
    const subscription: Subscription = { uri, server, off, active: true };
    try {
      await this.#send(server, 'resources/subscribe', { uri }, options);
    } catch (error) {
      off();
      throw error;
    }
    this.#subscriptions.add(subscription);
    // Released while the subscribe request was in flight: end it now.
    if (this.#released()) this.endSubscriptions();
    return () => this.#unsubscribe(subscription, options.timeoutMs);
  }

  /** Ends every subscription of the step (at release): listeners first, then `resources/unsubscribe`. */
  endSubscriptions(): void {
    for (const subscription of this.#subscriptions) {
      this.#unsubscribe(subscription, undefined).catch(() => undefined);
    }
  }

  async #unsubscribe(subscription: Subscription, timeoutMs: number | undefined): Promise<void> {
    if (!subscription.active) return;
    subscription.active = false;
    subscription.off();
    this.#subscriptions.delete(subscription);
    const captured = this.#servers.get(subscription.server);
    if (captured === undefined || captured.client.closed) return;
    await captured.client.request(
      'resources/unsubscribe',
      { uri: subscription.uri },
      { timeoutMs: timeoutMs ?? captured.timeoutMs },
    );
  }

  /** The server a uri is read from: given, listed, or returned by a tool of this step. */
  #serverOfUri(uri: string, given: string | undefined): string {
    if (given !== undefined) {
      if (!this.#servers.has(given)) {
        throw this.#error(
          ErrorCode.UNKNOWN_RESOURCE,
          `Server "${given}" is not bound in step ${this.#stepId}; read "${uri}" from a server of this step.`,
          { server: given, uri, delivery: 'not-sent' },
        );
      }
      return given;
    }
    const owners = new Set<string>();
    for (const r of this.resources) if (r.uri === uri) owners.add(r.server);
    if (owners.size === 0) for (const s of this.#links.get(uri) ?? []) owners.add(s);
    if (owners.size === 1) return [...owners][0] as string;
    throw this.#error(
      ErrorCode.UNKNOWN_RESOURCE,
      owners.size === 0
        ? `Step ${this.#stepId} was not shown resource "${uri}" and no tool of it returned that uri; pass { server } to read it from a given server.`
        : `Resource "${uri}" comes from several servers of step ${this.#stepId} (${[...owners].join(', ')}); pass { server }.`,
      { uri, delivery: 'not-sent', servers: [...owners] },
    );
  }

  #prompt(name: string): StepPrompt {
    const prompt = this.#promptsByName.get(name);
    if (prompt !== undefined) return prompt;
    throw this.#error(
      ErrorCode.UNKNOWN_PROMPT,
      `Step ${this.#stepId} has no prompt named "${name}". Use the names in step.prompts (server__prompt).`,
      {
        prompt: name,
        delivery: 'not-sent',
        matches: toolNameMatches(
          name,
          this.prompts.map((p) => ({ modelName: p.modelName, tool: p.name })),
        ),
      },
    );
  }

  #supported(
    server: string,
    feature: 'resources' | 'subscribe' | 'prompts' | 'completions',
    what: string,
    detail: Record<string, unknown>,
  ): CapturedFeatures & { readonly maxBytes: number } {
    const captured = this.#servers.get(server);
    if (captured !== undefined && captured.support[feature]) return captured;
    const capability = feature === 'subscribe' ? 'resources.subscribe' : feature;
    throw this.#error(
      ErrorCode.FEATURE_UNSUPPORTED,
      `Server "${server}" does not offer ${capability} (its capabilities or its protocol era), so ${what} was not requested.`,
      { server, capability, ...detail, delivery: 'not-sent' },
    );
  }

  #send(
    server: string,
    method: FeatureMethod,
    params: Record<string, unknown>,
    options: FeatureCallOptions,
  ): Promise<unknown> {
    const captured = this.#servers.get(server);
    if (captured === undefined) throw new Error(`stepbind: server ${server} was not captured`);
    return captured.client.request(method, params, {
      timeoutMs: options.timeoutMs ?? captured.timeoutMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
  }

  #checkOpen(what: string, detail: Record<string, unknown>): void {
    if (!this.#released()) return;
    throw this.#error(
      ErrorCode.BINDING_RELEASED,
      `The binding of step ${this.#stepId} was released; ${what} was not requested. Use the current step.`,
      { ...detail, delivery: 'not-sent' },
    );
  }

  #error(code: ErrorCode, message: string, detail: Record<string, unknown>): StepbindError {
    return new CallError(code, message, { detail: { stepId: this.#stepId, ...detail } });
  }
}

/** Every server's lists joined into a step's, prompts named `server__prompt`. */
interface JoinedLists {
  readonly resources: readonly StepResource[];
  readonly resourceTemplates: readonly StepResourceTemplate[];
  readonly prompts: readonly StepPrompt[];
  readonly promptsByName: ReadonlyMap<string, StepPrompt>;
}

/**
 * The last join, keyed by the identities of the (frozen) lists it joined: steps captured while no
 * list changed share it, so a capture costs O(servers), not O(items).
 */
let lastJoin: { readonly from: readonly FeatureLists[]; readonly joined: JoinedLists } | undefined;

function joinLists(from: readonly FeatureLists[]): JoinedLists {
  if (
    lastJoin !== undefined &&
    lastJoin.from.length === from.length &&
    lastJoin.from.every((lists, i) => lists === from[i])
  ) {
    return lastJoin.joined;
  }
  const prompts = from.flatMap((lists) => lists.prompts);
  const names = assignModelNames(prompts.map((p) => ({ server: p.server, tool: p.name })));
  const promptsByName = new Map<string, StepPrompt>();
  const named = prompts.map((p) => {
    const modelName = names.forward(p.server, p.name) ?? `${p.server}__${p.name}`;
    const prompt = Object.freeze({ ...p, modelName });
    promptsByName.set(modelName, prompt);
    return prompt;
  });
  const joined: JoinedLists = {
    resources: Object.freeze(from.flatMap((lists) => lists.resources)),
    resourceTemplates: Object.freeze(from.flatMap((lists) => lists.resourceTemplates)),
    prompts: Object.freeze(named),
    promptsByName,
  };
  lastJoin = { from, joined };
  return joined;
}

/** Why `args` do not fit `prompt`'s declared arguments (empty when they do). */
function promptArgumentProblems(prompt: StepPrompt, args: unknown): string[] {
  if (!isRecord(args)) return ['the arguments are not an object of strings'];
  const problems: string[] = [];
  const declared = new Set(prompt.arguments.map((a) => a.name));
  for (const a of prompt.arguments) {
    if (a.required && args[a.name] === undefined) problems.push(`"${a.name}" is required`);
  }
  for (const [key, value] of Object.entries(args)) {
    if (!declared.has(key)) problems.push(`"${key}" is not an argument of it`);
    else if (typeof value !== 'string') problems.push(`"${key}" must be a string`);
  }
  return problems;
}

function isPromptMessage(value: unknown): value is PromptMessage {
  return (
    isRecord(value) &&
    (value['role'] === 'user' || value['role'] === 'assistant') &&
    isRecord(value['content']) &&
    typeof value['content']['type'] === 'string'
  );
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** One `resources/read` item and its size in bytes, or `undefined` when it is not valid. */
function checkContents(
  item: unknown,
): { readonly item: McpResourceContents; readonly bytes: number } | undefined {
  if (!isRecord(item) || typeof item['uri'] !== 'string') return undefined;
  const mimeType = item['mimeType'];
  if (mimeType !== undefined && typeof mimeType !== 'string') return undefined;
  const text = item['text'];
  const blob = item['blob'];
  if (typeof text === 'string') {
    return { item: Object.freeze({ ...item, text }) as McpResourceContents, bytes: utf8(text) };
  }
  if (typeof blob === 'string' && blob.length % 4 === 0 && BASE64.test(blob)) {
    const padding = blob.endsWith('==') ? 2 : blob.endsWith('=') ? 1 : 0;
    return {
      item: Object.freeze({ ...item, blob }) as McpResourceContents,
      bytes: (blob.length / 4) * 3 - padding,
    };
  }
  return undefined;
}

function utf8(text: string): number {
  // Exact UTF-8 length without allocating.
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}
