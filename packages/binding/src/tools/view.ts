/**
 * The one projection of bound servers into what a model sees (DESIGN §14): the step view shared by
 * every binding captured until the next publication, its model tools and the name each tool is
 * called by. A non-string description is `''` everywhere, because every model tool is built by
 * {@link modelToolOf}.
 *
 * @packageDocumentation
 */
import type { CallLimits } from '../bounds.js';
import type { CatalogSlot } from '../call/slot.js';
import type { ApprovalMode, ToolCaller } from '../call/types.js';
import { assignModelNames } from '../names.js';
import type { CatalogSnapshot, ToolDescriptor } from '../snapshot/snapshot.js';
import type { FeatureSource } from '../resources/types.js';
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

/** One server as a binding sees it: a frozen catalog at a revision, and the exact client. */
export interface BoundServer {
  readonly name: string;
  readonly slot: CatalogSlot;
  readonly catalog: CatalogSnapshot;
  /** The slot's revision when this view was built. */
  readonly revision: number;
  readonly caller: ToolCaller;
  /** Default per-call timeout for this server's tools. */
  readonly callTimeoutMs: number;
  /** Which calls to this server need an approval from the `prepare` hook. */
  readonly approval: ApprovalMode;
  /** Raw tool names of this server that never need an approval. @default none */
  readonly autoApprove?: ReadonlySet<string>;
  /** Depth and size bounds of this server's call arguments and results (positive integers). */
  readonly callLimits?: Partial<CallLimits>;
  /**
   * `read` tools of this server whose outcome is unknown may be sent again under the same
   * idempotency key. @default false
   */
  readonly retryReads?: boolean;
  /**
   * The application vouches for this server's tool annotations: `readOnlyHint: true` then exempts
   * a tool from approval and lets `retryReads` re-send it even when the catalog is not proven.
   * Without it, annotations of an unproven catalog are untrusted hints that lower no bar.
   * @default false
   */
  readonly trustAnnotations?: boolean;
  /**
   * Set while this server's catalog is provisional (restored from the catalog cache, DESIGN
   * §19.2): `catalog` is the cached one and `caller` sends nothing. A call first waits for the
   * live catalog through it and runs only if that catalog has the same descriptor digest for its
   * tool. @default none (the catalog is live)
   */
  readonly provisional?: ProvisionalServer;
  /**
   * The server's resources and prompts (DESIGN §20.3), read once by each step at capture.
   * @default none (the step shows none of this server's)
   */
  readonly features?: FeatureSource;
}

/**
 * The live side of a provisional server (DESIGN §19.2): the runtime starts it (a lazy server on
 * its first call) and publishes its live catalog.
 */
export interface ProvisionalServer {
  /**
   * Resolves with the server as it is bound now that its live catalog is published (its slot,
   * revision and client), starting it first if it is lazy.
   *
   * @throws the server's start or discovery failure (a `StepbindError`; nothing was sent), or
   *   `signal`'s reason once it fires.
   */
  live(signal: AbortSignal | undefined): Promise<BoundServer>;
}

/** A model-facing tool and where it runs. */
export interface BoundTool {
  readonly modelName: string;
  readonly server: BoundServer;
  readonly descriptor: ToolDescriptor;
}

/** A server that is not part of a step, and why. */
export interface LeftOutServer {
  readonly name: string;
  readonly required: boolean;
  readonly reason: 'starting' | 'failed' | 'closed';
  readonly error?: { readonly code: string; readonly message: string };
}

/**
 * An immutable projection of a ConnectionSet at one set of revisions: built once per publication
 * or catalog swap, shared by every binding captured until the next one. Capture cost is O(1) in the
 * number of tools because bindings only point at a view.
 */
export interface BindingView {
  readonly tools: readonly ModelTool[];
  readonly byModelName: ReadonlyMap<string, BoundTool>;
  readonly servers: readonly BoundServer[];
  readonly leftOut: readonly LeftOutServer[];
}

/**
 * The view of `servers` (and the servers left out of it), built once per publication or catalog
 * swap: every tool of every server under its model name, in server then catalog order. Each
 * snapshot's model names are unique within its server; when two servers' names clash (server
 * `a__b` tool `c` versus server `a` tool `b__c`) every tool is named by one
 * {@link assignModelNames} table over all servers, so the names stay injective.
 */
export function bindingViewOf(
  servers: readonly BoundServer[],
  leftOut: readonly LeftOutServer[],
): BindingView {
  const byModelName = new Map<string, BoundTool>();
  let clash = false;
  for (const server of servers) {
    for (const descriptor of server.catalog.tools) {
      if (byModelName.has(descriptor.modelName)) clash = true;
      byModelName.set(descriptor.modelName, {
        modelName: descriptor.modelName,
        server,
        descriptor,
      });
    }
  }
  if (clash) {
    byModelName.clear();
    const table = assignModelNames(
      servers.flatMap((s) => s.catalog.tools.map((t) => ({ server: s.name, tool: t.name }))),
    );
    for (const server of servers) {
      for (const descriptor of server.catalog.tools) {
        const modelName = table.forward(server.name, descriptor.name);
        if (modelName === undefined) throw new Error('stepbind: the name table is missing a tool');
        byModelName.set(modelName, { modelName, server, descriptor });
      }
    }
  }
  const tools: ModelTool[] = [];
  for (const bound of byModelName.values())
    tools.push(modelToolOf(bound.modelName, bound.descriptor));
  return Object.freeze({
    tools: Object.freeze(tools),
    byModelName,
    servers: Object.freeze([...servers]),
    leftOut: Object.freeze([...leftOut]),
  });
}
