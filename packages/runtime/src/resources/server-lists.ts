/**
 * One server's resource, resource-template and prompt lists (DESIGN §20.3), owned by its
 * `ManagedServer`: listed in the background after each connection's tool discovery (never
 * blocking it), again on `notifications/resources/list_changed` / `prompts/list_changed`
 * (debounced like tools), and read once per step by `capture()`. A failed listing is an event and
 * leaves the previous list in force. Imports no SDK module.
 */
import {
  DEFAULT_FEATURE_LIST_LIMITS,
  LIST_METHOD,
  listFeature,
  type CapturedFeatures,
  type DroppedItem,
  type FeatureClient,
  type FeatureListKind,
  type FeatureLists,
  type FeatureListLimits,
  type FeatureSource,
} from '@stepbind/binding/internal';
import type { RuntimeClock } from '../clock.js';
import type { Connection } from '../connection.js';
import type { Emit } from '../events.js';
import { toStepbindError } from '../failures.js';
import { ListChangedDebouncer } from '../server/list-changed.js';

/** What {@link ServerFeatureLists} needs from the server that owns it. */
export interface FeatureListsOptions {
  readonly server: string;
  readonly clock: RuntimeClock;
  readonly emit: Emit;
  /** The quiet period of the `list_changed` debounce. */
  readonly debounceMs: number;
  /** Whether work may still start (the runtime is open, the server not closing). */
  readonly active: () => boolean;
  /** Registers background work, awaited by the runtime's `close()`. */
  readonly track: (work: Promise<void>) => void;
  /** Per-request timeout of a listing page (the server's `requestTimeoutMs`). */
  readonly requestTimeoutMs: () => number;
  /** Default timeout of a step's requests (the server's `callTimeoutMs`). */
  readonly callTimeoutMs: () => number;
  /** Fires at the runtime's `close()`. */
  readonly closeSignal: AbortSignal;
  /** @default DEFAULT_FEATURE_LIST_LIMITS */
  readonly limits?: FeatureListLimits;
  /** The server's connection until {@link ServerFeatureLists.attach} follows another. */
  readonly connection: Connection;
}

const EMPTY: FeatureLists = Object.freeze({
  resources: Object.freeze([]),
  resourceTemplates: Object.freeze([]),
  prompts: Object.freeze([]),
});

/** Most dropped items one `features-listed` event names (the count is always whole). */
const MAX_DROPPED_REPORTED = 10;

/** See the module comment. */
export class ServerFeatureLists implements FeatureSource {
  readonly #options: FeatureListsOptions;
  readonly #resourcesChanged: ListChangedDebouncer;
  readonly #promptsChanged: ListChangedDebouncer;
  #lists: FeatureLists = EMPTY;
  #connection: Connection;
  #client: FeatureClient;
  /** Listings run one at a time, in order. */
  #queue: Promise<void> = Promise.resolve();
  #pending = 0;
  #idle: Promise<void> | undefined;

  constructor(options: FeatureListsOptions) {
    this.#options = options;
    const debounced = (kinds: readonly FeatureListKind[]): ListChangedDebouncer =>
      new ListChangedDebouncer({
        clock: options.clock,
        debounceMs: options.debounceMs,
        active: options.active,
        run: () => this.refresh(kinds),
      });
    this.#resourcesChanged = debounced(['resources', 'resourceTemplates']);
    this.#promptsChanged = debounced(['prompts']);
    this.#connection = options.connection;
    this.#client = clientOf(options.connection);
  }

  /** The lists in force (frozen; empty before the first listing). */
  get lists(): FeatureLists {
    return this.#lists;
  }

  /** Resolves when no listing runs or waits; `undefined` when none does. */
  get idle(): Promise<void> | undefined {
    return this.#idle;
  }

  /**
   * Follows `connection` from now on (a new one replaces a lost one): lists everything it offers
   * in the background and subscribes to its list notifications. @returns the unsubscribe.
   */
  attach(connection: Connection): () => void {
    if (connection !== this.#connection) this.#client = clientOf(connection);
    this.#connection = connection;
    const off = connection.onFeatureNotification((n) => {
      if (!this.#options.active()) return;
      if (n.kind === 'resources-list-changed') {
        this.#options.emit({
          type: 'feature-list-changed',
          server: this.#options.server,
          list: 'resources',
        });
        this.#resourcesChanged.notify();
      } else if (n.kind === 'prompts-list-changed') {
        this.#options.emit({
          type: 'feature-list-changed',
          server: this.#options.server,
          list: 'prompts',
        });
        this.#promptsChanged.notify();
      }
    });
    this.#options.track(this.refresh(['resources', 'resourceTemplates', 'prompts']));
    return off;
  }

  /** {@inheritDoc FeatureSource.capture} */
  capture(): CapturedFeatures {
    const connection = this.#connection;
    const client = this.#client;
    return Object.freeze({
      lists: this.#lists,
      support: connection.features,
      client,
      timeoutMs: this.#options.callTimeoutMs(),
    });
  }

  /**
   * Lists `kinds` on the current connection (those it offers), after any listing already queued,
   * and installs the result; a failure is a `features-list-failed` event and the previous list
   * stays. Never rejects.
   */
  refresh(kinds: readonly FeatureListKind[]): Promise<void> {
    this.#pending++;
    const run = this.#queue.then(() => this.#list(kinds));
    this.#queue = run;
    const settled = run.finally(() => {
      if (--this.#pending === 0) this.#idle = undefined;
    });
    this.#idle = settled;
    return settled;
  }

  /** Stops the debounces (the server closes). */
  stop(): void {
    this.#resourcesChanged.stop();
    this.#promptsChanged.stop();
  }

  async #list(kinds: readonly FeatureListKind[]): Promise<void> {
    const connection = this.#connection;
    const { server, emit } = this.#options;
    if (connection.closed || !this.#options.active()) return;
    const offered = connection.features;
    const next: { -readonly [K in keyof FeatureLists]: FeatureLists[K] } = { ...this.#lists };
    const dropped: (DroppedItem & { readonly list: FeatureListKind })[] = [];
    let changed = false;
    for (const kind of kinds) {
      if (!(kind === 'prompts' ? offered.prompts : offered.resources)) continue;
      try {
        const listing = await listFeature(
          kind,
          server,
          (cursor) =>
            connection.featureRequest(LIST_METHOD[kind], cursor === undefined ? {} : { cursor }, {
              timeoutMs: this.#options.requestTimeoutMs(),
              signal: this.#options.closeSignal,
            }),
          this.#options.limits ?? DEFAULT_FEATURE_LIST_LIMITS,
        );
        // Typed per kind by listFeature; the lists object only groups them.
        (next as Record<FeatureListKind, unknown>)[kind] = listing.items;
        for (const d of listing.dropped) dropped.push({ ...d, list: kind });
        changed = true;
      } catch (error) {
        if (!this.#options.active()) return;
        emit({
          type: 'features-list-failed',
          server,
          list: kind,
          error: toStepbindError(error),
        });
      }
    }
    // A listing of a connection that was replaced meanwhile says nothing about the new one.
    if (!changed || connection !== this.#connection) return;
    this.#lists = Object.freeze(next);
    emit({
      type: 'features-listed',
      server,
      resources: next.resources.length,
      resourceTemplates: next.resourceTemplates.length,
      prompts: next.prompts.length,
      droppedCount: dropped.length,
      dropped: dropped.slice(0, MAX_DROPPED_REPORTED),
    });
  }
}

/**
 * `connection` as the {@link FeatureClient} a step sends its requests through. Subscriptions are
 * counted per uri: the server is sent `resources/subscribe` for the first step that subscribes and
 * `resources/unsubscribe` when the last one ends, since the subscription belongs to the session.
 */
function clientOf(connection: Connection): FeatureClient {
  const subscribers = new Map<string, number>();
  const request: FeatureClient['request'] = async (method, params, options) => {
    const uri = params['uri'];
    if (typeof uri === 'string' && method === 'resources/subscribe') {
      const count = subscribers.get(uri) ?? 0;
      subscribers.set(uri, count + 1);
      if (count > 0) return {};
      try {
        return await connection.featureRequest(method, params, options);
      } catch (error) {
        release(uri);
        throw error;
      }
    }
    if (typeof uri === 'string' && method === 'resources/unsubscribe' && release(uri) > 0) {
      return {};
    }
    return connection.featureRequest(method, params, options);
  };
  /** One subscriber of `uri` fewer. @returns how many are left. */
  const release = (uri: string): number => {
    const left = (subscribers.get(uri) ?? 1) - 1;
    if (left > 0) subscribers.set(uri, left);
    else subscribers.delete(uri);
    return left;
  };
  return Object.freeze({
    get closed(): boolean {
      return connection.closed;
    },
    request,
    onResourceUpdated: (listener: (uri: string) => void) =>
      connection.onFeatureNotification((n) => {
        if (n.kind === 'resource-updated') listener(n.uri);
      }),
  });
}
