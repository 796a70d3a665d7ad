/**
 * The `subscriptions/listen` stream of one {@link ModernConnection}, kept open for the connection's
 * life: when it ends while the connection is open (the server answered it, as one does when it
 * shuts down; its HTTP stream broke off or ended unanswered; the POST could not be sent, as while a
 * server restarts), it is opened again after a backoff with jitter (250 ms doubling to 30 s). The
 * backoff starts afresh only after a stream proved healthy: acknowledged and then open for
 * {@link RELISTEN_HEALTHY_MS}. An acknowledgement alone proves nothing (a server that acknowledges and
 * ends at once would otherwise be re-opened several times a second forever), and neither does a
 * notification, which such a server can send as cheaply. A JSON-RPC error answer from the server
 * (other than an HTTP 5xx) is final: it is reported and the stream stays closed until the next
 * connection. Only the first failure of a run (the streams since the last healthy one) is reported,
 * so a server that stays down does not flood the event stream. The delays come from the runtime's
 * one backoff (`backoff.ts`) and run on the host's clock.
 */
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { StepbindError } from '@stepbind/binding/internal';
import { Backoff } from '../backoff.js';
import { systemClock, type RuntimeClock } from '../clock.js';
import { eraError, withEnvelope, type RpcErrorObject } from './envelope.js';

/** First re-listen delay; it doubles per failed attempt up to {@link RELISTEN_MAX_MS}. */
export const RELISTEN_BASE_MS = 250;
/** Upper bound of the re-listen delay. */
export const RELISTEN_MAX_MS = 30_000;
/** How long an acknowledged stream stays open before its end starts a fresh backoff. */
export const RELISTEN_HEALTHY_MS = 30_000;

/** What the stream needs from its connection. */
export interface ListenHost {
  readonly server: string;
  isClosed(): boolean;
  nextId(): number;
  /** Registers the pending answer of request `id`. */
  expect(
    id: number,
    handlers: {
      readonly resolve: (result: unknown) => void;
      readonly reject: (error: RpcErrorObject | StepbindError) => void;
    },
  ): void;
  send(message: JSONRPCMessage): Promise<void>;
  report(error: Error): void;
  /**
   * The timers of the re-listen backoff and the time a stream stayed open (the runtime's clock).
   * @default systemClock
   */
  readonly clock?: RuntimeClock;
}

/** One connection's listen stream; see the module comment. */
export class ListenStream {
  readonly #host: ListenHost;
  #id: number | undefined;
  readonly #clock: RuntimeClock;
  /** Re-listen delays: doubling from the base to the cap, reset once a stream proved healthy. */
  readonly #backoff: Backoff;
  /** Whether a failure of the current run was reported. */
  #told = false;
  /** When the open stream was acknowledged (`now`), if it was. */
  #ackedAt: number | undefined;
  #stopped = false;

  constructor(host: ListenHost) {
    this.#host = host;
    this.#clock = host.clock ?? systemClock;
    this.#backoff = new Backoff(
      { initialMs: RELISTEN_BASE_MS, maxMs: RELISTEN_MAX_MS },
      this.#clock,
    );
  }

  /** The request id of the open stream, if one is open. */
  get id(): number | undefined {
    return this.#id;
  }

  /** Opens the stream unless one is open, a re-open is scheduled, or the stream was stopped. */
  open(): void {
    if (this.#id !== undefined || this.#backoff.scheduled || this.#stopped) return;
    if (this.#host.isClosed()) return;
    const id = this.#host.nextId();
    this.#id = id;
    this.#ackedAt = undefined;
    const ended = (error?: RpcErrorObject | StepbindError | Error): void => {
      if (this.#id !== id) return;
      this.#id = undefined;
      const ackedAt = this.#ackedAt;
      this.#ackedAt = undefined;
      if (this.#stopped || this.#host.isClosed()) return;
      if (ackedAt !== undefined && this.#now() - ackedAt >= RELISTEN_HEALTHY_MS) {
        this.#backoff.reset();
        this.#told = false;
      }
      // A StepbindError (the stream broke) or a send failure is an Error; an answer is not.
      const final = error !== undefined && !(error instanceof Error) && !transient(error);
      if (error !== undefined && (final || !this.#told)) {
        this.#told = true;
        this.#host.report(
          error instanceof Error
            ? error
            : eraError(error, { server: this.#host.server, method: 'subscriptions/listen' }),
        );
      }
      if (final) return;
      this.#schedule();
    };
    this.#host.expect(id, { resolve: () => ended(), reject: ended });
    this.#host
      .send({
        jsonrpc: '2.0',
        id,
        method: 'subscriptions/listen',
        params: withEnvelope({ notifications: { toolsListChanged: true } }),
      })
      .catch((error: unknown) => ended(error instanceof Error ? error : new Error(String(error))));
  }

  /**
   * The server acknowledged the open stream: once it has stayed open {@link RELISTEN_HEALTHY_MS}
   * more, its end starts a fresh backoff.
   */
  acknowledged(): void {
    if (this.#id !== undefined) this.#ackedAt ??= this.#now();
  }

  #now(): number {
    return this.#clock.now();
  }

  /** Stops for good (the connection closes). @returns the id of the open stream, to cancel it. */
  stop(): number | undefined {
    this.#stopped = true;
    this.#backoff.cancel();
    const id = this.#id;
    this.#id = undefined;
    return id;
  }

  #schedule(): void {
    // No attempt limit: the delay is always defined.
    const delay = this.#backoff.fail() ?? RELISTEN_MAX_MS;
    // Jitter (half to full delay), so a fleet of clients does not re-listen in step.
    this.#backoff.schedule(Math.round(delay * (0.5 + Math.random() / 2)), () => this.open(), {
      // The connection's close stops it; an app that never closes may still exit.
      unref: true,
    });
  }
}

/** An answer that says the stream broke, not that the server refuses it: an HTTP 5xx. */
function transient(error: RpcErrorObject): boolean {
  const data = error.data as { httpStatus?: unknown } | undefined;
  return typeof data?.httpStatus === 'number' && data.httpStatus >= 500;
}
