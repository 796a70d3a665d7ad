/**
 * The cross-process refresh proof shared by the file store (test/auth/refresh.process.test.ts) and
 * the PostgreSQL store (test/fleet/tokens.pg.test.ts): up to 8 worker processes
 * (`refresh-worker.mjs`, over the built runtime) share one token store and one rotating token
 * endpoint. Each run takes a fresh login (its own key and token family); each round the driver
 * moves the logical clock (the login expires) or not, then releases the workers in a generated
 * order, each either at once or after the previous one answered. Oracle: the family is never
 * revoked (no refresh token was ever reused), it saw exactly one grant per expiry, and every
 * worker ends with the family's current access token, which the endpoint's introspection accepts.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { propertyRun } from '@stepbind/testkit';
import fc from 'fast-check';
import { expect } from 'vitest';
import type { TokenKey, TokenStore } from '../../src/auth/types.js';
import type { TokenEndpoint } from './token-endpoint.js';

const WORKER = fileURLToPath(new URL('./refresh-worker.mjs', import.meta.url));

/** The most worker processes a run uses. */
export const MAX_WORKERS = 8;

interface Reply {
  readonly id: number;
  readonly ok: boolean;
  readonly access?: string;
  readonly refreshed?: boolean;
  readonly code?: string;
  readonly message?: string;
}

/** One worker process; `send` resolves with its answer (or a failure when it exited). */
export class RefreshWorker {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiters = new Map<number, (reply: Reply) => void>();
  readonly ready: Promise<void>;
  readonly gone: Promise<void>;
  #stderr = '';

  constructor(plan: unknown) {
    this.#child = spawn(process.execPath, [WORKER, JSON.stringify(plan)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.#child.stderr.on('data', (d: Buffer) => {
      if (this.#stderr.length < 4000) this.#stderr += d.toString();
    });
    this.gone = new Promise((resolve) =>
      this.#child.once('exit', () => {
        for (const w of this.#waiters.values()) w({ id: -1, ok: false, code: 'EXITED' });
        this.#waiters.clear();
        resolve();
      }),
    );
    let onReady: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (onReady = resolve));
    this.ready = Promise.race([
      ready,
      this.gone.then(() => {
        throw new Error(`refresh worker exited before it was ready: ${this.#stderr}`);
      }),
    ]);
    createInterface({ input: this.#child.stdout }).on('line', (line) => {
      const message = JSON.parse(line) as Reply & { event?: string };
      if (message.event === 'ready') onReady();
      else this.#waiters.get(message.id)?.(message);
    });
  }

  send(id: number, command: Record<string, unknown>): Promise<Reply> {
    const reply = new Promise<Reply>((resolve) => this.#waiters.set(id, resolve));
    this.#child.stdin.write(`${JSON.stringify({ id, ...command })}\n`);
    return reply;
  }

  /** Asks the worker to close its store and exit; resolves when it did. */
  async stop(): Promise<void> {
    this.#child.stdin.write(`${JSON.stringify({ op: 'exit' })}\n`);
    this.#child.stdin.end();
    await this.gone;
  }
}

/** Starts `count` workers on the store `plan` names and waits until each is ready. */
export async function startRefreshWorkers(count: number, plan: unknown): Promise<RefreshWorker[]> {
  const workers = Array.from({ length: count }, () => new RefreshWorker(plan));
  try {
    await Promise.all(workers.map((w) => w.ready));
  } catch (error) {
    await Promise.all(workers.map((w) => w.stop()));
    throw error;
  }
  return workers;
}

/** One round: whether the login expires, and how the workers are released. */
interface Round {
  readonly expire: boolean;
  /** Release order (a permutation of the workers used). */
  readonly order: readonly number[];
  /** Per released worker: wait for the previous one's answer first. */
  readonly after: readonly boolean[];
}

const scenario = fc
  .record({
    processes: fc.integer({ min: 2, max: MAX_WORKERS }),
    latencyMs: fc.constantFrom(0, 0, 2, 10),
    rounds: fc.array(
      fc.record({
        // Mostly expiries (the interesting rounds); a round without one must not refresh.
        expire: fc.oneof(
          { arbitrary: fc.constant(true), weight: 3 },
          { arbitrary: fc.constant(false), weight: 1 },
        ),
        ranks: fc.array(fc.nat(), { minLength: MAX_WORKERS, maxLength: MAX_WORKERS }),
        after: fc.array(fc.boolean(), { minLength: MAX_WORKERS, maxLength: MAX_WORKERS }),
      }),
      { minLength: 1, maxLength: 4 },
    ),
  })
  .map(({ processes, latencyMs, rounds }) => ({
    processes,
    latencyMs,
    rounds: rounds.map((r): Round => ({
      expire: r.expire,
      order: Array.from({ length: processes }, (_, i) => i).sort(
        (a, b) => r.ranks[a]! - r.ranks[b]! || a - b,
      ),
      after: r.after.slice(0, processes),
    })),
  }));

/** What the property needs besides the workers. */
export interface RefreshPropertySetup {
  readonly name: string;
  readonly workers: readonly RefreshWorker[];
  readonly endpoint: TokenEndpoint;
  /** The test's own handle on the shared store (seeds each run's login). */
  readonly store: TokenStore;
  readonly numRuns: number;
}

/** Runs the property (seed printed by `propertyRun`); throws fast-check's report on failure. */
export async function checkSingleFlightRefresh(setup: RefreshPropertySetup): Promise<void> {
  const { seed, numRuns } = propertyRun(setup.name, setup.numRuns);
  let run = 0;
  let nextId = 1;
  await fc.assert(
    fc.asyncProperty(scenario, async ({ latencyMs, rounds }) => {
      setup.endpoint.setLatency(latencyMs);
      const family = setup.endpoint.issue();
      const key: TokenKey = {
        issuer: `${setup.endpoint.url}/run-${++run}`,
        resource: 'https://mcp.example/mcp',
        clientId: 'client-1',
      };
      let now = 0;
      await setup.store.put(key, {
        principal: `${key.issuer} user-1`,
        tokens: {
          accessToken: family.accessToken,
          tokenType: 'Bearer',
          refreshToken: family.refreshToken,
          expiresAt: now + 1,
        },
      });
      let expiries = 0;
      const last = new Map<number, string>();
      for (const round of rounds) {
        if (round.expire) {
          now++;
          expiries++;
        }
        const command = { key, now, endpoint: setup.endpoint.url };
        const pending: Promise<Reply>[] = [];
        let previous: Promise<unknown> = Promise.resolve();
        round.order.forEach((w, i) => {
          const id = nextId++;
          const send = (): Promise<Reply> => setup.workers[w]!.send(id, command);
          const reply = round.after[i] === true ? previous.then(send) : send();
          previous = reply;
          pending.push(
            reply.then((r) => {
              if (r.ok && r.access !== undefined) last.set(w, r.access);
              return r;
            }),
          );
        });
        const replies = await Promise.all(pending);
        expect(replies.filter((r) => !r.ok)).toEqual([]);
      }
      expect(family.reuses, 'a rotated-away refresh token was reused').toBe(0);
      expect(family.revoked).toBe(false);
      expect(family.grants, 'grants per expiry').toBe(expiries);
      for (const access of last.values()) expect(access).toBe(family.accessToken);
      const introspected = await fetch(`${setup.endpoint.url}/introspect`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: family.accessToken }).toString(),
      });
      expect(await introspected.json()).toEqual({ active: true });
    }),
    { seed, numRuns, endOnFailure: true },
  );
}
