/**
 * Single-flight refresh across processes (issue 18): 8 child processes share one token store and
 * hit the access token's expiry at once, against oidc-provider with rotating refresh tokens and
 * reuse detection (a second use of a rotated refresh token revokes the whole login, so a double
 * refresh cannot hide). Every process must stay logged in, without an `authorize` hook, and the
 * authorization server must see exactly one refresh per expiry.
 * The authorization server offers DPoP, so the shared login is DPoP-bound: its key travels with it
 * through the store. The workers run the built `dist/` (the suite runs after `tsc -b`).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FileTokenStore, McpRuntime, type McpRuntimeOptions } from '@stepbind/runtime';
import {
  propertyRun,
  startAuthorizationServer,
  startProtectedMcpServer,
  tempDir,
  type AuthorizationServer,
  type ProtectedMcpServer,
} from '@stepbind/testkit';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { usePostgres } from '../support/postgres.js';
import { within } from '../support/wait.js';

const WORKER = fileURLToPath(new URL('./oidc-fleet-worker.mjs', import.meta.url));
const FILE_STORE_DIST = new URL('../../dist/auth/file-token-store.js', import.meta.url);
const PROCESSES = 8;
/** Spawning 8 runtimes is slow on a shared 2-core machine: a guard against a hang, not a threshold. */
const FLEET_TIMEOUT_MS = 120_000;

type StorePlan =
  | { readonly kind: 'file'; readonly module: string; readonly path: string }
  | { readonly kind: 'fleet'; readonly url: string; readonly schema: string };

interface CallReply {
  readonly ok: boolean;
  readonly sub?: string;
  readonly code?: string;
  readonly message?: string;
}

/** One child process running `oidc-fleet-worker.mjs`. */
class Worker {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiters = new Map<number, (calls: readonly CallReply[]) => void>();
  #stderr = '';
  #next = 0;
  readonly ready: Promise<void>;
  readonly gone: Promise<void>;

  constructor(plan: unknown) {
    this.#child = spawn(process.execPath, [WORKER, JSON.stringify(plan)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.#child.stderr.on('data', (chunk: Buffer) => {
      if (this.#stderr.length < 4000) this.#stderr += chunk.toString();
    });
    this.gone = new Promise((resolve) =>
      this.#child.once('exit', () => {
        for (const waiter of this.#waiters.values()) {
          waiter([{ ok: false, code: 'WORKER_EXITED', message: this.#stderr }]);
        }
        this.#waiters.clear();
        resolve();
      }),
    );
    let onReady: () => void = () => undefined;
    let onFailed: (message: string) => void = () => undefined;
    const ready = new Promise<void>((resolve, reject) => {
      onReady = resolve;
      onFailed = (message) => reject(new Error(message));
    });
    this.ready = Promise.race([
      ready,
      this.gone.then(() => {
        throw new Error(`worker exited before it was ready: ${this.#stderr}`);
      }),
    ]);
    createInterface({ input: this.#child.stdout }).on('line', (line) => {
      const message = JSON.parse(line) as Record<string, unknown>;
      if (message['event'] === 'ready') onReady();
      if (message['event'] === 'failed') {
        onFailed(`worker failed to open: ${String(message['code'])} ${String(message['message'])}`);
      }
      if (typeof message['id'] === 'number') {
        const waiter = this.#waiters.get(message['id']);
        this.#waiters.delete(message['id']);
        waiter?.(message['calls'] as CallReply[]);
      }
    });
  }

  whoami(times: number): Promise<readonly CallReply[]> {
    const id = ++this.#next;
    const reply = new Promise<readonly CallReply[]>((resolve) => this.#waiters.set(id, resolve));
    this.#child.stdin.write(`${JSON.stringify({ cmd: 'whoami', id, times })}\n`);
    return reply;
  }

  /** Ends the worker (stdin closes, it closes its runtime) and waits for it to exit. */
  async close(): Promise<void> {
    this.#child.stdin.end();
    await this.gone;
  }
}

/** The server entry every process uses: the public client, no hook (refresh or fail). */
function serverEntry(as: AuthorizationServer, mcp: ProtectedMcpServer): Record<string, unknown> {
  return {
    type: 'http',
    url: mcp.url,
    approval: 'none',
    auth: { type: 'oauth', clientId: as.clients.public.clientId },
  };
}

/**
 * One run: log in once (in this process, through the hook), start the processes, then for each
 * round expire every token and make every process call at once.
 */
async function fleetRun(
  rounds: readonly (readonly number[])[],
  storeFor: () => Promise<{
    readonly plan: StorePlan;
    readonly parentOptions: McpRuntimeOptions;
    readonly close: () => Promise<void>;
  }>,
): Promise<void> {
  await using as = await startAuthorizationServer();
  await using mcp = await startProtectedMcpServer({ authorizationServer: as });
  const store = await storeFor();
  const workers: Worker[] = [];
  try {
    const login = await McpRuntime.open(
      { mcpServers: { remote: serverEntry(as, mcp) } },
      {
        ...store.parentOptions,
        approval: 'none',
        authorize: async (request) => as.interact(request.authorizationUrl),
      },
    );
    await login.close();
    expect(as.counts.grants['authorization_code']).toBe(1);

    for (let i = 0; i < PROCESSES; i += 1) {
      workers.push(new Worker({ server: serverEntry(as, mcp), store: store.plan }));
    }
    await within(Promise.all(workers.map((w) => w.ready)), 'every worker ready', FLEET_TIMEOUT_MS);

    let calls = 0;
    for (const [round, callsPerWorker] of rounds.entries()) {
      expect(mcp.expireTokens()).toBeGreaterThan(0);
      const replies = await within(
        Promise.all(
          workers.map((w, i) => w.whoami(callsPerWorker[i % callsPerWorker.length] ?? 1)),
        ),
        `round ${String(round + 1)} of calls`,
        FLEET_TIMEOUT_MS,
      );
      calls += replies.flat().length;
      const failed = replies.flat().filter((r) => !r.ok);
      expect(failed, JSON.stringify(failed)).toEqual([]);
      expect(new Set(replies.flat().map((r) => r.sub))).toEqual(new Set(['alice']));
      // Exactly one refresh per expiry, whichever process won the lock.
      expect(as.counts.refreshes).toBe(round + 1);
    }
    expect(as.counts.refusals['refresh_token'] ?? 0).toBe(0);
    expect(as.counts.grants['authorization_code']).toBe(1);
    process.stdout.write(
      `[oidc fleet] ${store.plan.kind}: ${String(PROCESSES)} processes, ${String(rounds.length)} expiries, ${String(calls)} calls, ${String(as.counts.refreshes)} refreshes seen by the server, 0 refused\n`,
    );
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    await store.close();
  }
}

/** Rounds of expiry; in each, how many calls each process makes at once. */
const arbRounds = fc.array(
  fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: PROCESSES }),
  {
    minLength: 1,
    maxLength: 3,
  },
);

describe('fleet refresh over one FileTokenStore', () => {
  it(
    `keeps ${String(PROCESSES)} processes logged in with exactly one refresh per expiry`,
    async () => {
      expect(existsSync(fileURLToPath(FILE_STORE_DIST)), 'run `pnpm -s build` first').toBe(true);
      const { seed, numRuns } = propertyRun('oidc fleet refresh (file store)', 2);
      await fc.assert(
        fc.asyncProperty(arbRounds, (rounds) =>
          fleetRun(rounds, () => {
            const dir = tempDir('stepbind-oidc-fleet');
            const path = join(dir.path, 'tokens.json');
            return Promise.resolve({
              plan: { kind: 'file', module: FILE_STORE_DIST.href, path },
              parentOptions: { tokenStore: new FileTokenStore({ path }) },
              close: async () => {
                await dir[Symbol.asyncDispose]();
              },
            });
          }),
        ),
        { seed, numRuns, endOnFailure: true },
      );
    },
    FLEET_TIMEOUT_MS * 4,
  );
});

describe('fleet refresh over one PostgreSQL store', () => {
  it(
    `keeps ${String(PROCESSES)} processes logged in with exactly one refresh per expiry`,
    async () => {
      const postgres = await usePostgres('oidc.fleet.test.ts');
      if (postgres === undefined) return;
      try {
        const { seed, numRuns } = propertyRun('oidc fleet refresh (PostgreSQL)', 2);
        await fc.assert(
          fc.asyncProperty(arbRounds, (rounds) =>
            fleetRun(rounds, () => {
              const schema = postgres.schema('oidc');
              return Promise.resolve({
                plan: { kind: 'fleet', url: postgres.url, schema },
                parentOptions: { store: { url: postgres.url, schema } },
                close: () => Promise.resolve(),
              });
            }),
          ),
          { seed, numRuns, endOnFailure: true },
        );
      } finally {
        await postgres.stop();
      }
    },
    FLEET_TIMEOUT_MS * 4,
  );
});
