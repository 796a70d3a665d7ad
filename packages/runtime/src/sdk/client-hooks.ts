/**
 * What the 2025-era adapter hooks into an SDK client: the delivery record and progress routing of
 * each `tools/call` (on the transport), and the resource and prompt notifications.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { CallProgressWatch, ProgressRoutes } from '../call-progress.js';
import type { DeliveryRecord, ServerLogMessage } from '../connection.js';
import type { ConnectionListeners } from '../connection-listeners.js';
import type { Redactor } from '../redact.js';
import type { FeatureListeners, FeatureNotification } from '../resources/notifications.js';

/**
 * Marks a `tools/call` as sent the moment the transport is asked to write it. The SDK's
 * `request()` spreads our request into the JSON-RPC message, so `params` is our object (we pass
 * no progress handler or task options, which would copy it: progress tokens are our own). Only a synchronous throw from
 * `send` leaves it unsent; a rejected `send` (the transports report failures that way, also a
 * pipe that was already closed) counts as sent, which errs on the safe side: `OUTCOME_UNKNOWN`
 * rather than a retry that could run the call twice.
 */
export function trackDelivery(
  client: Client,
  progress: ProgressRoutes,
  watched: ReadonlyMap<string | number, CallProgressWatch>,
  outgoing: OutgoingCalls,
): void {
  const transport = client.transport;
  if (transport === undefined) return;
  const onmessage = transport.onmessage;
  if (onmessage !== undefined) {
    transport.onmessage = (message, extra) => {
      // Progress is ours (we pass the SDK no `onprogress`): routed by our tokens, in arrival
      // order with the answers, bounded by the call's gate (a malformed report is dropped, not
      // an SDK error). A watched call's answer stops its progress at once, before the SDK's
      // asynchronous dispatch: a report the server wrote after its result is never delivered.
      if ('method' in message && message.method === 'notifications/progress') {
        progress.route(message.params);
        return;
      }
      if (watched.size > 0 && 'id' in message && !('method' in message)) {
        const id = message.id;
        if (id !== undefined) watched.get(id)?.disarm();
      }
      onmessage.call(transport, message, extra);
    };
  }
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const params =
      'method' in message && message.method === 'tools/call' && 'id' in message
        ? message.params
        : undefined;
    const delivery = params === undefined ? undefined : outgoing.take(params);
    // The request's bytes are handed to the transport here: from now on it may have run.
    if (delivery !== undefined) delivery.delivery = 'sent';
    if (delivery !== undefined && 'id' in message && message.id !== undefined) {
      delivery.onId?.(message.id);
    }
    try {
      return send(message, options);
    } catch (error) {
      if (delivery !== undefined) delivery.delivery = 'not-sent';
      throw error;
    }
  };
}

/**
 * The delivery records of the `tools/call` requests a connection is about to write, found by the
 * identity of their `params` when the transport is asked to write them. The SDK writes a request
 * synchronously inside `request()`, so the common case is one slot set before that call and taken
 * by the write, with no per-call WeakMap entry; a request not written by the time the call
 * returns (queued, or a transport that writes later) moves to a WeakMap and is found there.
 * Nothing is ever dropped: a slot still occupied when the next call arrives moves there too.
 */
export class OutgoingCalls {
  #params: object | undefined;
  #record: DeliveryRecord | undefined;
  readonly #later = new WeakMap<object, DeliveryRecord>();

  /** Expects a write of `params` (call {@link settle} once the SDK's `request()` returned). */
  expect(params: object, record: DeliveryRecord): void {
    if (this.#params !== undefined && this.#record !== undefined) {
      this.#later.set(this.#params, this.#record);
    }
    this.#params = params;
    this.#record = record;
  }

  /** The request of `params` was handed to the SDK: if it was not written yet, keep it for later. */
  settle(params: object): void {
    if (this.#params !== params || this.#record === undefined) return;
    this.#later.set(params, this.#record);
    this.#params = undefined;
    this.#record = undefined;
  }

  /** The record of the request whose `params` the transport is writing, if it is ours. */
  take(params: unknown): DeliveryRecord | undefined {
    if (params === this.#params && this.#params !== undefined) {
      const record = this.#record;
      this.#params = undefined;
      this.#record = undefined;
      return record;
    }
    return typeof params === 'object' && params !== null ? this.#later.get(params) : undefined;
  }
}

/** Feeds a connection's resource and prompt notifications (DESIGN §20.3) to `listeners`. */
export function listenFeatures(client: Client, listeners: FeatureListeners): void {
  const emit = (notification: FeatureNotification): void => listeners.emit(notification);
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () =>
    emit({ kind: 'resources-list-changed' }),
  );
  client.setNotificationHandler(PromptListChangedNotificationSchema, () =>
    emit({ kind: 'prompts-list-changed' }),
  );
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    emit({ kind: 'resource-updated', uri: notification.params.uri });
  });
}

/** Feeds a connection's server log, `list_changed`, close and (redacted) errors to `listeners`. */
export function listenConnection(
  client: Client,
  listeners: ConnectionListeners,
  redactor: Redactor,
): void {
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    const { level, logger, data } = notification.params;
    const message: ServerLogMessage = {
      level,
      ...(logger === undefined ? {} : { logger }),
      data,
    };
    listeners.log(message);
  });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    listeners.listChanged();
  });
  client.onclose = () => {
    listeners.markClosed();
  };
  client.onerror = (error) => {
    const safe = redactor.error(error);
    listeners.error(safe);
  };
}
