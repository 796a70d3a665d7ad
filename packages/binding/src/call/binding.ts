/**
 * The frozen binding of one model sampling step (DESIGN §2, §6).
 *
 * @packageDocumentation
 */
import { CallError, ErrorCode } from '../errors.js';
import { toolNameMatches } from '../nearest.js';
import type { CallJournal } from '../journal/journal.js';
import { searchTools, type ToolSearchHit, type ToolSearchOptions } from '../tools/search.js';
import type { BindingView, LeftOutServer, ModelTool } from '../tools/view.js';
import { admissionVerdict } from './admission.js';
import {
  StepFeatures,
  type CompletionRef,
  type CompletionResult,
  type FeatureCallOptions,
  type PromptResult,
  type ReadResourceOptions,
  type ResourceContents,
  type ResourceUpdatedListener,
} from '../resources/step.js';
import type { StepPrompt, StepResource, StepResourceTemplate } from '../resources/types.js';
import { PreparedCall } from './prepared.js';
import { maybeDrained, releasedError, type BindingState } from './state.js';
import type { CallPolicy } from './types.js';

/** Status of one server in a binding. */
export type BindingServerStatus =
  | {
      readonly name: string;
      readonly bound: true;
      readonly catalogState: string;
      readonly generation: number;
      readonly revision: number;
      readonly sourceRevision: string | undefined;
      readonly toolCount: number;
      /**
       * True while this step shows the server's cached catalog (DESIGN §19.2): a call waits for
       * the live catalog and runs only if its tool is unchanged there.
       */
      readonly provisional: boolean;
    }
  | ({ readonly bound: false } & LeftOutServer);

/** Options of {@link createBinding}. */
export interface CreateBindingOptions {
  readonly stepId: string;
  readonly policy: CallPolicy;
  /** Called once when the binding is released and its last call finished. */
  readonly onDrained?: () => void;
  /** Records every run's outcome and holds idempotency keys. @default none (no keys, no receipts log) */
  readonly journal?: CallJournal;
  /**
   * Aborts when the binding's owner closes (`McpRuntime.close()`): a run waiting in its `prepare`
   * hook then ends `ABORTED` (`delivery: 'not-sent'`) without waiting for the hook, and no run
   * sends after it. @default never
   */
  readonly closeSignal?: AbortSignal;
  /**
   * Called when the journal could not record the outcome of a call that is reported anyway (a
   * result that came back while the disk was full).
   */
  readonly onJournalError?: (error: unknown) => void;
}

/**
 * Creates the frozen binding of one sampling step over `view`. O(servers), never O(tools).
 */
export function createBinding(view: BindingView, options: CreateBindingOptions): McpBinding {
  return new McpBinding(view, options);
}

/**
 * The tools one model sampling step saw, and the exact clients that run them. Frozen. Release it
 * (or `await using` it) when the step ends so retired connections can close.
 */
export class McpBinding {
  /** Identifier of the step, echoed in receipts. */
  readonly stepId: string;
  /** Policy epoch in force at capture. */
  readonly policyEpoch: number;
  /** Model-facing tools: `{ name, description, inputSchema }`. */
  readonly tools: readonly ModelTool[];
  /** Every configured server: bound (with catalog generation and revision) or left out (why). */
  readonly servers: readonly BindingServerStatus[];
  readonly #view: BindingView;
  readonly #policy: CallPolicy;
  readonly #state: BindingState;
  /**
   * The resources this step was shown: every bound server's `resources/list` as it stood at
   * capture (DESIGN §20.3). A later `list_changed` changes the next step's list, never this one.
   */
  readonly resources: readonly StepResource[];
  /** The resource templates this step was shown (`resources/templates/list` at capture). */
  readonly resourceTemplates: readonly StepResourceTemplate[];
  /** The prompts this step was shown (`prompts/list` at capture), by `server__prompt` name. */
  readonly prompts: readonly StepPrompt[];
  readonly #features: StepFeatures;

  /** @internal use {@link createBinding}. */
  constructor(view: BindingView, options: CreateBindingOptions) {
    this.stepId = options.stepId;
    this.policyEpoch = options.policy.policyEpoch;
    this.tools = view.tools;
    this.#view = view;
    this.#policy = options.policy;
    this.#state = {
      released: false,
      inFlight: 0,
      onDrained: options.onDrained,
      journal: options.journal,
      closeSignal: options.closeSignal,
      onJournalError: options.onJournalError ?? (() => undefined),
    };
    this.servers = Object.freeze([
      ...view.servers.map((s): BindingServerStatus =>
        Object.freeze({
          name: s.name,
          bound: true,
          catalogState: s.catalog.state,
          generation: s.catalog.generation,
          revision: s.revision,
          sourceRevision: s.catalog.sourceRevision,
          toolCount: s.catalog.tools.length,
          provisional: s.provisional !== undefined,
        }),
      ),
      ...view.leftOut.map((s): BindingServerStatus => Object.freeze({ ...s, bound: false })),
    ]);
    const features = new StepFeatures(
      this.stepId,
      view.servers.map((s) => ({
        name: s.name,
        ...(s.features === undefined ? {} : { features: s.features }),
        ...(s.callLimits?.maxOutputBytes === undefined
          ? {}
          : { maxOutputBytes: s.callLimits.maxOutputBytes }),
      })),
      () => this.#state.released,
    );
    this.#features = features;
    this.#state.onResult = (server, result) => features.recordResult(server, result);
    this.resources = features.resources;
    this.resourceTemplates = features.resourceTemplates;
    this.prompts = features.prompts;
    Object.freeze(this);
  }

  /**
   * True when runs of this step are journaled, so that `run(args, { idempotencyKey })` is
   * accepted (a runtime's steps always are: its journal is in memory unless one is configured).
   */
  get journaled(): boolean {
    return this.#state.journal !== undefined;
  }

  /** True after {@link release}. */
  get released(): boolean {
    return this.#state.released;
  }

  /**
   * Resolves a model-facing tool name to a call bound to this step's catalog, revision and client.
   *
   * @throws CallError `UNKNOWN_TOOL` when the step did not advertise that name (its `detail.matches`
   *   lists the model names whose tool part is, or is near, the name asked for); `BINDING_RELEASED`
   *   after {@link release}.
   */
  prepareCall(modelName: string): PreparedCall {
    if (this.#state.released) throw releasedError(this.stepId, modelName);
    const bound = this.#view.byModelName.get(modelName);
    if (bound === undefined) {
      throw new CallError(
        ErrorCode.UNKNOWN_TOOL,
        `This step has no tool named "${modelName}". Call only the tools advertised in this step.`,
        {
          detail: {
            modelName,
            stepId: this.stepId,
            delivery: 'not-sent',
            // For the developer (the model-facing text above stays as it is): `read_text_file`
            // was probably meant as `files__read_text_file`.
            matches: toolNameMatches(
              modelName,
              [...this.#view.byModelName.values()].map((b) => ({
                modelName: b.modelName,
                tool: b.descriptor.name,
              })),
            ),
          },
        },
      );
    }
    return new PreparedCall(bound, this.stepId, this.policyEpoch, this.#policy, this.#state);
  }

  /**
   * Whether a run of `modelName` would need an approval now (`ctx.approve()` in its `prepare`
   * hook), by the admission rules `PreparedCall.run` applies (approval mode, catalog state, trusted
   * `read`, `autoApprove`, standing approvals). Reads only: nothing is locked, journaled or sent.
   * For adapters that ask the user before running (the AI SDK's `needsApproval`).
   *
   * @throws CallError as {@link prepareCall} (`UNKNOWN_TOOL`, `BINDING_RELEASED`), and
   *   `TOOL_DENIED` or `POLICY_STALE` when a run would be refused anyway.
   */
  approvalRequired(modelName: string): boolean {
    const call = this.prepareCall(modelName);
    const bound = this.#view.byModelName.get(modelName);
    if (bound === undefined)
      throw new Error('stepbind: unreachable: a prepared call without a tool');
    return admissionVerdict({
      bound,
      policy: this.#policy,
      policyEpoch: this.policyEpoch,
      detail: (extra) => ({
        server: call.server,
        tool: call.tool,
        modelName,
        stepId: this.stepId,
        delivery: 'not-sent',
        ...extra,
      }),
    }).approvalRequired;
  }

  /**
   * The step's tools that best match `query` (a user's or a model's words), best first, ties in
   * {@link tools} order. Every hit is a tool of this step: `prepareCall(hit.name)` runs it with
   * the same stale-call guarantee as any other. The index is built on the first search of a
   * published catalog and shared by every step captured from it (DESIGN §19.4). Works after
   * {@link release} too: searching sends nothing.
   *
   * @throws RuntimeError `INVALID_OPTIONS` when the query is empty or longer than 1,000
   *   characters, or `limit` is not an integer from 1 to 100, or an option is unknown.
   */
  search(query: string, options: ToolSearchOptions = {}): readonly ToolSearchHit[] {
    return searchTools(this.#view, query, options);
  }

  /** Ends the step. Idempotent. Calls already running finish; new ones are refused. */
  release(): void {
    if (this.#state.released) return;
    this.#state.released = true;
    this.#features.endSubscriptions();
    maybeDrained(this.#state);
  }

  /** Same as {@link release}. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.release();
  }

  /**
   * Reads one resource (`resources/read`) on the connection this step captured: from the server
   * that listed it in {@link resources}, or, for a `resource_link` (or embedded resource) a tool
   * of this step returned, from the server whose call returned it; `options.server` names the
   * server for any other uri (one built from a template). Contents are checked (text, or a
   * base64 blob) and bounded, and returned frozen.
   *
   * @throws CallError `BINDING_RELEASED` after {@link release}; `UNKNOWN_RESOURCE` for a uri this
   *   step neither listed nor got from a tool (and no `server`), or one from several servers;
   *   `FEATURE_UNSUPPORTED` when the server offers no resources; `CONTENT_TOO_LARGE` over
   *   `maxBytes`; `SERVER_ERROR` for an answer that is not valid contents; the request's own
   *   `TIMEOUT`, `ABORTED`, `CONNECTION_CLOSED`. Every detail names the server and uri.
   */
  readResource(uri: string, options: ReadResourceOptions = {}): Promise<ResourceContents> {
    return this.#features.readResource(uri, options);
  }

  /**
   * Gets one prompt of this step (`prompts/get`) by its {@link StepPrompt.modelName}, its
   * arguments checked against the ones it declares first (every required one present, each a
   * string, none undeclared).
   *
   * @throws CallError `BINDING_RELEASED`; `UNKNOWN_PROMPT` (with `detail.matches`);
   *   `INVALID_ARGUMENTS` (nothing sent); `FEATURE_UNSUPPORTED`; `CONTENT_TOO_LARGE`;
   *   `SERVER_ERROR`; the request's own failure.
   */
  getPrompt(
    name: string,
    args: Readonly<Record<string, string>> = {},
    options: FeatureCallOptions = {},
  ): Promise<PromptResult> {
    return this.#features.getPrompt(name, args, options);
  }

  /**
   * Asks the server for completions of one argument (`completion/complete`) of a prompt or a
   * resource template of this step; `context` gives the arguments already chosen.
   *
   * @throws CallError `BINDING_RELEASED`; `UNKNOWN_PROMPT` / `UNKNOWN_RESOURCE` for a ref this
   *   step was not shown; `FEATURE_UNSUPPORTED` when the server offers no `completions`;
   *   `SERVER_ERROR`; the request's own failure.
   */
  complete(
    ref: CompletionRef,
    argument: { readonly name: string; readonly value: string },
    context?: Readonly<Record<string, string>>,
    options: FeatureCallOptions = {},
  ): Promise<CompletionResult> {
    return this.#features.complete(ref, argument, context, options);
  }

  /**
   * Subscribes to one resource (`resources/subscribe`, routed as {@link readResource}): `listener`
   * gets its uri on every `notifications/resources/updated` for it. Resolves with the unsubscribe
   * function (sends `resources/unsubscribe`). Every subscription of the step ends at
   * {@link release}: its listener is dropped at once and `resources/unsubscribe` is sent.
   *
   * @throws CallError `BINDING_RELEASED`; `UNKNOWN_RESOURCE`; `FEATURE_UNSUPPORTED` when the
   *   server does not offer `resources.subscribe` (or speaks the 2026-07-28 era); the request's
   *   own failure.
   */
  subscribeResource(
    uri: string,
    listener: ResourceUpdatedListener,
    options: FeatureCallOptions & { readonly server?: string } = {},
  ): Promise<() => Promise<void>> {
    return this.#features.subscribeResource(uri, listener, options);
  }
}
