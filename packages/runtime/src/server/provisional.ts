/**
 * A server shown from its cached catalog until its live catalog is published (DESIGN §19.2): the
 * provisional entry of a ConnectionSet, and the live side a binding's calls wait for.
 *
 * @packageDocumentation
 */
import {
  CatalogSlot,
  ErrorCode,
  RuntimeError,
  type BoundServer,
  type CatalogSnapshot,
  type ProvisionalServer as ProvisionalTarget,
  type StepbindError,
  untilAborted,
} from '@stepbind/binding/internal';
import type { ServerConfig } from '../config.js';
import type { ManagedServer } from './managed-server.js';

/** What a provisional server needs from its runtime. */
export interface ProvisionalHost {
  /** Starts `server`'s live connection, discovers it and publishes it into the current set. */
  startLive(server: ProvisionalServer): Promise<ManagedServer>;
  /** The bound form of a live server as a new capture would see it now. */
  boundOf(server: ManagedServer): BoundServer;
}

/** A `ToolCaller` that never sends: a provisional server's calls go to the live one. */
const NOT_LIVE = Object.freeze({
  closed: false,
  fault: undefined,
  callTool(): Promise<never> {
    return Promise.reject(
      new RuntimeError(
        ErrorCode.SERVER_NOT_READY,
        'stepbind: a provisional server was asked to send a call; its live catalog must confirm the tool first.',
        { detail: { delivery: 'not-sent' } },
      ),
    );
  },
});

/**
 * One server published from the catalog cache. Its catalog (the cached one) is never swapped; the
 * live server it starts (at once when eager, on the first call when lazy) publishes through the
 * one publication path and replaces this entry in the current set. Shared by the sets a refresh
 * carries it into, so it starts at most once.
 */
export class ProvisionalServer implements ProvisionalTarget {
  readonly name: string;
  readonly config: ServerConfig;
  /** The identity key a refresh compares to carry it into the next set. */
  readonly identityKey: string;
  /** The cached catalog the model is shown. */
  readonly cached: CatalogSnapshot;
  /** Holds {@link cached}; never swapped, so a provisional step's revision never moves. */
  readonly slot: CatalogSlot;
  /** The `ToolCaller` of its bound form: sends nothing (calls go to the live server). */
  readonly caller = NOT_LIVE;
  readonly #host: ProvisionalHost;
  #live: Promise<ManagedServer> | undefined;
  #failure: StepbindError | undefined;

  constructor(
    host: ProvisionalHost,
    name: string,
    config: ServerConfig,
    identityKey: string,
    cached: CatalogSnapshot,
  ) {
    this.#host = host;
    this.name = name;
    this.config = config;
    this.identityKey = identityKey;
    this.cached = cached;
    this.slot = new CatalogSlot(name, cached);
  }

  /** True once its live start was asked for (eager at publication, lazy on first use). */
  get started(): boolean {
    return this.#live !== undefined;
  }

  /** Its start's failure, once it failed. */
  get failure(): StepbindError | undefined {
    return this.#failure;
  }

  /** Starts the live server once; later calls share the same start. */
  start(): Promise<ManagedServer> {
    this.#live ??= this.#host.startLive(this);
    return this.#live;
  }

  /** Records its start's failure (the host does, before the start's promise rejects). */
  fail(error: StepbindError): void {
    this.#failure ??= error;
  }

  /** {@inheritDoc ProvisionalTarget.live} */
  async live(signal: AbortSignal | undefined): Promise<BoundServer> {
    // The caller tells an abort from a failed start by its signal; the reason is kept as the cause.
    const server = await untilAborted(this.start(), signal, (reason) =>
      reason instanceof Error ? reason : new Error(String(reason)),
    );
    return this.#host.boundOf(server);
  }
}
