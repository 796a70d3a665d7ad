/**
 * What a {@link Connection} says about resources and prompts, written once for both eras: the
 * capabilities the server declared beyond tools, and the listeners of its
 * `notifications/resources/list_changed`, `notifications/prompts/list_changed` and
 * `notifications/resources/updated` (DESIGN §20.3). Imports no SDK module.
 */
import type { FeatureSupport } from '@stepbind/binding/internal';

/** The server's resources, prompts and completions capabilities. */
export interface ServerFeatures extends FeatureSupport {
  /** `resources.listChanged`: it sends `notifications/resources/list_changed`. */
  readonly resourcesListChanged: boolean;
  /** `prompts.listChanged`: it sends `notifications/prompts/list_changed`. */
  readonly promptsListChanged: boolean;
}

/** One resources/prompts notification of a connection. */
export type FeatureNotification =
  | { readonly kind: 'resources-list-changed' }
  | { readonly kind: 'prompts-list-changed' }
  | { readonly kind: 'resource-updated'; readonly uri: string };

/** {@link ServerFeatures} of a raw `capabilities` object (`initialize` or `server/discover`). */
export function serverFeaturesOf(
  capabilities: Readonly<Record<string, unknown>> | undefined,
  era: 'legacy' | 'modern',
): ServerFeatures {
  const resources = record(capabilities?.['resources']);
  const prompts = record(capabilities?.['prompts']);
  // The 2026-07-28 era has no per-resource subscription here, and its list changes come through
  // subscriptions/listen, which stepbind opens for tools only: lists refresh with the tools.
  const legacy = era === 'legacy';
  return Object.freeze({
    resources: resources !== undefined,
    subscribe: legacy && resources?.['subscribe'] === true,
    resourcesListChanged: legacy && resources?.['listChanged'] === true,
    prompts: prompts !== undefined,
    promptsListChanged: legacy && prompts?.['listChanged'] === true,
    completions: record(capabilities?.['completions']) !== undefined,
  });
}

/** The feature listeners of one connection. */
export class FeatureListeners {
  readonly #listeners = new Set<(notification: FeatureNotification) => void>();

  /** Calls `listener` with every notification from now on; returns an unsubscribe function. */
  on(listener: (notification: FeatureNotification) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Tells every listener (a throwing listener does not stop the others). */
  emit(notification: FeatureNotification): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(notification);
      } catch {
        // Listeners must not throw; one that does is not allowed to break the connection.
      }
    }
  }

  /** Drops every listener (the connection closed). */
  clear(): void {
    this.#listeners.clear();
  }
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}
