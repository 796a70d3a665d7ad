/** Lines of a stdio server's stderr kept for start errors. */
const STDERR_TAIL_LINES = 20;

/** The last stderr lines of a stdio server (for start errors) and a feed of every line. */
export class StderrTail {
  readonly #lines: string[] = [];
  readonly #listeners = new Set<(line: string) => void>();
  readonly #mode: 'pipe' | 'inherit' | 'ignore';

  constructor(mode: 'pipe' | 'inherit' | 'ignore') {
    this.#mode = mode;
  }

  push(line: string): void {
    this.#lines.push(line);
    if (this.#lines.length > STDERR_TAIL_LINES) this.#lines.shift();
    if (this.#mode !== 'pipe') return;
    for (const listener of this.#listeners) listener(line);
  }

  /** The first listener also gets the lines written before it came (the start-up tail). */
  onLine(listener: (line: string) => void): () => void {
    if (this.#listeners.size === 0 && this.#mode === 'pipe')
      for (const line of this.#lines) listener(line);
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get text(): string {
    return this.#lines.join('\n');
  }
}
