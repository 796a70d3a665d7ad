/** Counts the outcomes of a property run, so that each run shows what it covered. */
export class Tally {
  readonly #counts = new Map<string, number>();
  add(label: string): void {
    this.#counts.set(label, (this.#counts.get(label) ?? 0) + 1);
  }
  get(label: string): number {
    return this.#counts.get(label) ?? 0;
  }
  print(name: string): void {
    const parts = [...this.#counts].sort(([a], [b]) => a.localeCompare(b));
    console.log(`[${name}] outcomes: ${parts.map(([k, v]) => `${k}=${v}`).join(' ')}`);
  }
}
