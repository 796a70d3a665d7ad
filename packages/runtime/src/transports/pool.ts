/**
 * One HTTP transport's own connection pool (an undici `Agent` handed to Node's `fetch` as its
 * dispatcher), so closing the transport closes every socket it opened, idle keep-alive ones
 * included: Node's shared global pool would keep them open past `close()`.
 *
 * undici is loaded on the first request, not at import: it costs about 100 ms to load, and a
 * runtime with only stdio servers never needs it.
 */
import type { Agent } from 'undici';

let load: Promise<new () => Agent> | undefined;

/** undici's `Agent` class, imported once. */
function agentClass(): Promise<new () => Agent> {
  load ??= import('undici').then((undici) => undici.Agent);
  return load;
}

/** A lazily created connection pool, destroyed by {@link ConnectionPool.destroy}. */
export class ConnectionPool {
  #agent: Promise<Agent> | undefined;
  #destroyed = false;

  /** `{ dispatcher }` for a `fetch` init: this pool, created on first use. */
  async dispatcher(): Promise<{ readonly dispatcher: Agent }> {
    if (this.#destroyed) throw new Error('the HTTP connection is closed');
    this.#agent ??= agentClass().then((AgentClass) => new AgentClass());
    return { dispatcher: await this.#agent };
  }

  /** Closes every socket of the pool at once (idempotent; nothing to do when never used). */
  async destroy(): Promise<void> {
    this.#destroyed = true;
    const agent = this.#agent;
    if (agent === undefined) return;
    await agent.then((a) => a.destroy()).catch(() => undefined);
  }
}
