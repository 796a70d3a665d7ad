/**
 * The listener side every `Connection` offers, written once for both eras: `list_changed`
 * (with its counter, the {@link ChangeFeed} discovery watches), close (called once; a listener
 * added after the close is called on a microtask), transport errors, server log messages and the
 * stderr feed. Each adapter owns one, emits into it and forwards its `on…` members to it. This
 * file imports no SDK module.
 */
import type { ChangeFeed } from '@stepbind/binding/internal';
import type { ServerLogMessage } from './connection.js';

/** The lines a stdio server writes to stderr (nothing for HTTP), and the last of them. */
export interface StderrFeed {
  /** Calls `listener` with each line from now on; returns an unsubscribe function. */
  onLine(listener: (line: string) => void): () => void;
  /** The last lines, for error messages. */
  readonly text: string;
}

/** The listeners of one connection; see the module comment. */
export class ConnectionListeners {
  readonly #stderr: StderrFeed;
  /** The `list_changed` counter: `version` is the number received so far. */
  readonly #changes = { version: 0 };
  #closed = false;
  readonly #listChanged = new Set<() => void>();
  readonly #close = new Set<() => void>();
  readonly #error = new Set<(error: Error) => void>();
  readonly #log = new Set<(message: ServerLogMessage) => void>();

  constructor(stderr: StderrFeed) {
    this.#stderr = stderr;
  }

  /** True once {@link markClosed} ran. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The `list_changed` counter as the {@link ChangeFeed} a discovery watches. */
  get changes(): ChangeFeed {
    return this.#changes;
  }

  /** The last lines the server wrote to stderr. */
  get stderrTail(): string {
    return this.#stderr.text;
  }

  /** See `Connection.onListChanged`. */
  onListChanged(listener: () => void): () => void {
    this.#listChanged.add(listener);
    return () => this.#listChanged.delete(listener);
  }

  /** See `Connection.onClose`. */
  onClose(listener: () => void): () => void {
    if (this.#closed) {
      queueMicrotask(listener);
      return () => undefined;
    }
    this.#close.add(listener);
    return () => this.#close.delete(listener);
  }

  /** See `Connection.onError`. */
  onError(listener: (error: Error) => void): () => void {
    this.#error.add(listener);
    return () => this.#error.delete(listener);
  }

  /** See `Connection.onLog`. */
  onLog(listener: (message: ServerLogMessage) => void): () => void {
    this.#log.add(listener);
    return () => this.#log.delete(listener);
  }

  /** See `Connection.onStderr`. */
  onStderr(listener: (line: string) => void): () => void {
    return this.#stderr.onLine(listener);
  }

  /** A `notifications/tools/list_changed` arrived: the counter moves, then the listeners run. */
  listChanged(): void {
    this.#changes.version++;
    for (const listener of this.#listChanged) listener();
  }

  /** A transport error (already redacted by the adapter). */
  error(error: Error): void {
    for (const listener of this.#error) listener(error);
  }

  /** A `notifications/message` from the server. */
  log(message: ServerLogMessage): void {
    for (const listener of this.#log) listener(message);
  }

  /**
   * Marks the connection closed, runs `before` (what the adapter ends first, seeing the connection
   * closed: its pending requests), then, unless `notify` is false, calls each close listener once.
   * @returns false when it was closed already (nothing happens).
   */
  markClosed(options: { readonly before?: () => void; readonly notify?: boolean } = {}): boolean {
    if (this.#closed) return false;
    this.#closed = true;
    options.before?.();
    if (options.notify !== false) for (const listener of this.#close) listener();
    this.#close.clear();
    return true;
  }

  /** Drops the `list_changed` listeners (a connection that is closing reports no more changes). */
  stopListChanged(): void {
    this.#listChanged.clear();
  }
}
