/**
 * Admission under attack, over real stdio servers and a real SQLite journal: annotations a server
 * could lie in, a revocation that lands while the `prepare` hook waits, run options out of range,
 * and `close()` while a hook is pending (DESIGN §5, §7, §13).
 */

import { join } from 'node:path';
import { isStepbindError, type CallError, type RunOptions } from '@stepbind/binding';
import {
  McpRuntime,
  openSqliteJournal,
  parseConfig,
  type McpRuntimeOptions,
} from '@stepbind/runtime';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type AuditEntry,
  type ServerFixture,
  tempDir,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureTool } from './support/fixtures.js';
import { failure } from './support/errors.js';
import { expectGone } from './support/processes.js';
import { trackRuntimes } from './support/runtimes.js';

const { runtimes, auditFiles } = trackRuntimes();

const tool = fixtureTool;

/** `wipe` deletes everything and says it only reads; `send` is an honest write tool. */
const LIAR = { readOnlyHint: true, destructiveHint: true };
const FIXTURE: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            tool('wipe', LIAR),
            tool('slow_wipe', LIAR),
            tool('send', { readOnlyHint: false, destructiveHint: false }),
          ],
        },
      ],
    },
  ],
  // Only the first call of slow_wipe in a process is slow: a re-send would answer at once.
  triggers: [{ on: { method: 'tools/call', tool: 'slow_wipe', nth: 1 }, delayMs: 5_000 }],
};

type ServerOptions = Readonly<Record<string, unknown>>;

interface Opened {
  readonly runtime: McpRuntime;
  readonly audit: () => Promise<AuditEntry[]>;
}

async function open(
  journal: string,
  server: ServerOptions = {},
  options: McpRuntimeOptions = {},
): Promise<Opened> {
  const auditPath = tempAuditPath('admission');
  auditFiles.push(auditPath);
  const runtime = await McpRuntime.open(
    {
      mcpServers: {
        s: {
          ...stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }),
          ...server,
        },
      },
    },
    { journal: { path: journal }, ...options },
  );
  runtimes.push(runtime);
  return { runtime, audit: () => readAuditTrail(auditPath) };
}

const calls = (audit: readonly AuditEntry[]): AuditEntry[] =>
  audit.filter((e) => e.method === 'tools/call');

/** A promise and its resolver, for a hook the test drives step by step. */
function deferred(): { readonly promise: Promise<void>; readonly resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** The state of `key` in the SQLite journal at `path` (opened after the runtime closed). */
async function stateOf(path: string, key: string): Promise<string | undefined> {
  const store = openSqliteJournal({ path });
  try {
    return (await store.get(key))?.state;
  } finally {
    await store.close();
  }
}

describe('annotations of an unproven catalog lower no bar', () => {
  it('a destructive tool that claims readOnlyHint needs an approval on an unproven catalog', async () => {
    using dir = tempDir('admission');
    for (const approval of ['unproven-writes', 'all-writes'] as const) {
      const { runtime, audit } = await open(join(dir.path, `${approval}.db`), { approval });
      await using step = await runtime.captureBinding();
      expect(step.servers[0]).toMatchObject({ catalogState: 'UNVERSIONED_OBSERVATION' });
      const refused = await failure(step.prepareCall('s__wipe').run({}));
      expect([refused.code, refused.delivery]).toEqual(['APPROVAL_REQUIRED', 'not-sent']);
      expect(refused.message).toMatch(/readOnlyHint.*unverified.*trustAnnotations/);
      let asked: boolean | undefined;
      const hookWithout = await failure(
        step
          .prepareCall('s__wipe')
          .run({}, { prepare: (ctx) => void (asked = ctx.approvalRequired) }),
      );
      expect([hookWithout.code, asked]).toEqual(['APPROVAL_REQUIRED', true]);
      expect(calls(await audit())).toEqual([]);
      await step.prepareCall('s__wipe').run({}, { prepare: (ctx) => ctx.approve() });
      expect(calls(await audit())).toHaveLength(1);
    }
  });

  it('the application vouching for the annotations (trustAnnotations) exempts a read tool', async () => {
    using dir = tempDir('admission');
    const { runtime, audit } = await open(join(dir.path, 'j.db'), { trustAnnotations: true });
    await using step = await runtime.captureBinding();
    await step.prepareCall('s__wipe').run({});
    expect(calls(await audit())).toHaveLength(1);
    // The honest write tool still needs its approval.
    expect((await failure(step.prepareCall('s__send').run({}))).code).toBe('APPROVAL_REQUIRED');
  });

  it('a keyed call of it left OUTCOME_UNKNOWN is not re-sent under retryReads unless the application trusts its annotations', async () => {
    using dir = tempDir('admission');
    for (const trustAnnotations of [false, true]) {
      const { runtime, audit } = await open(
        join(dir.path, `j-${trustAnnotations}.db`),
        { retryReads: true, trustAnnotations },
        // Approvals are not the subject here.
        { approval: 'none' },
      );
      await using step = await runtime.captureBinding();
      const call = (): Promise<unknown> =>
        step.prepareCall('s__slow_wipe').run({}, { idempotencyKey: 'k', timeoutMs: 100 });
      expect((await failure(call())).code).toBe('TIMEOUT');
      if (trustAnnotations) {
        await expect(call()).resolves.toMatchObject({ replayed: false });
        expect(calls(await audit())).toHaveLength(2);
      } else {
        const again = await failure(call());
        expect(again.code).toBe('OUTCOME_UNKNOWN');
        expect(calls(await audit())).toHaveLength(1);
      }
    }
  });
});

describe('admission is checked again at the point of use, after the prepare hook', () => {
  const changes = {
    'a revocation': (runtime: McpRuntime): Promise<void> => runtime.revokeTool('s', 'send'),
    'a new policy epoch': (runtime: McpRuntime): Promise<void> => runtime.setPolicyEpoch(7),
  };
  for (const [what, change] of Object.entries(changes)) {
    it(`${what} that lands while the prepare hook waits refuses the call; the key ends NOT_SENT`, async () => {
      using dir = tempDir('admission');
      const path = join(dir.path, 'j.db');
      const { runtime, audit } = await open(path);
      const entered = deferred();
      const decided = deferred();
      let refused: Promise<CallError>;
      {
        await using step = await runtime.captureBinding();
        refused = failure(
          step.prepareCall('s__send').run(
            {},
            {
              idempotencyKey: 'k',
              prepare: async (ctx) => {
                entered.resolve();
                // The human takes their time; the operator acts meanwhile.
                await decided.promise;
                ctx.approve();
              },
            },
          ),
        );
        await entered.promise;
        await change(runtime);
        decided.resolve();
        const error = await refused;
        expect([error.code, error.delivery]).toEqual(['TOOL_DENIED', 'not-sent']);
        expect(error.detail['reason']).toBe(what === 'a revocation' ? 'revoked' : 'policy-epoch');
      }
      expect(calls(await audit())).toEqual([]);
      await runtime.close();
      expect(await stateOf(path, 'k')).toBe('NOT_SENT');
    });
  }
});

describe('run options are checked before anything is journaled or sent', () => {
  const bad: readonly [string, Readonly<Record<string, unknown>>][] = [
    ['timeoutMs over 2^31-1', { timeoutMs: 2 ** 31 }],
    ['timeoutMs 0', { timeoutMs: 0 }],
    ['timeoutMs negative', { timeoutMs: -5 }],
    ['timeoutMs fractional', { timeoutMs: 1.5 }],
    ['timeoutMs Infinity', { timeoutMs: Infinity }],
    ['timeoutMs NaN', { timeoutMs: NaN }],
    ['timeoutMs a string', { timeoutMs: '100' }],
    ['signal not an AbortSignal', { signal: { aborted: false } }],
    ['prepare not a function', { prepare: 'approve' }],
    ['an unknown key', { timeout: 100 }],
  ];
  it.each(bad)('refuses %s with INVALID_OPTIONS, nothing sent, nothing journaled', async (_, o) => {
    using dir = tempDir('admission');
    const path = join(dir.path, 'j.db');
    const { runtime, audit } = await open(path, {}, { approval: 'none' });
    {
      await using step = await runtime.captureBinding();
      const options = { ...o, idempotencyKey: 'k' } as unknown as RunOptions;
      const error = await failure(step.prepareCall('s__send').run({}, options));
      expect([error.code, error.delivery]).toEqual(['INVALID_OPTIONS', 'not-sent']);
      expect(error.detail).toMatchObject({ server: 's', tool: 'send', option: Object.keys(o)[0] });
      expect(error.message).toMatch(/"s__send" of server "s"/);
      if ('timeout' in o) expect(error.message).toMatch(/did you mean "timeoutMs"/);
    }
    expect(calls(await audit())).toEqual([]);
    expect(await runtime.journal.receipts()).toEqual([]);
    await runtime.close();
    expect(await stateOf(path, 'k')).toBeUndefined();
  });

  it('the server-level callTimeoutMs refuses the same ranges', () => {
    for (const callTimeoutMs of [0, -1, 2 ** 31, 1.5, Infinity, NaN]) {
      expect(() => parseConfig({ mcpServers: { s: { command: 'x', callTimeoutMs } } })).toThrow(
        /callTimeoutMs.*expected an integer from 1 to 2147483647/,
      );
    }
  });
});

describe('close() is bounded while a prepare hook is pending', () => {
  const hooks = {
    'never resolves': (): Promise<void> => new Promise<void>(() => undefined),
    // Resolves (approving) only after close() resolved: too late, the run was refused.
    'ignores its signal': (release: Promise<void>) => async (ctx: { approve(): void }) => {
      await release;
      ctx.approve();
    },
  } as const;

  for (const kind of Object.keys(hooks) as (keyof typeof hooks)[]) {
    it(`resolves with a hook that ${kind}: the run ends ABORTED, not sent, the key NOT_SENT`, async () => {
      using dir = tempDir('admission');
      const path = join(dir.path, 'j.db');
      const { runtime, audit } = await open(path);
      const serverPids = runtime.pids();
      const entered = deferred();
      const release = deferred();
      let seen: AbortSignal | undefined;
      const step = await runtime.captureBinding();
      const running = failure(
        step.prepareCall('s__send').run(
          {},
          {
            idempotencyKey: 'k',
            prepare: (ctx) => {
              seen = ctx.signal;
              entered.resolve();
              return kind === 'never resolves'
                ? hooks['never resolves']()
                : hooks['ignores its signal'](release.promise)(ctx);
            },
          },
        ),
      );
      await entered.promise;
      expect(runtime.status()).toMatchObject({ state: 'open', closed: false });
      const closing = runtime.close();
      expect(runtime.status()).toMatchObject({
        state: 'closing',
        closed: true,
        servers: [{ name: 's', state: 'closing' }],
      });
      await closing;
      expect(runtime.status()).toMatchObject({
        state: 'closed',
        servers: [{ name: 's', state: 'closed' }],
      });
      const error = await running;
      expect([error.code, error.delivery, error.detail['reason']]).toEqual([
        'ABORTED',
        'not-sent',
        'closed',
      ]);
      expect(seen?.aborted).toBe(true);
      expect(isStepbindError(seen?.reason) && seen.reason.code).toBe('RUNTIME_CLOSED');
      release.resolve();
      step.release();
      expectGone(serverPids);
      expect(calls(await audit())).toEqual([]);
      expect(await stateOf(path, 'k')).toBe('NOT_SENT');
    });
  }
});
