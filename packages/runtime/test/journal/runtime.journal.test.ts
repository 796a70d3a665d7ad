import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import {
  toToolResult,
  type CallError,
  type JournalRecord,
  type ReceiptBody,
  type StepbindError,
} from '@stepbind/binding';
import {
  McpRuntime,
  openSqliteJournal,
  parseConfig,
  type McpRuntimeOptions,
  type RuntimeEvent,
} from '@stepbind/runtime';
import { loadConfigFile } from '../../src/cli/config-file.js';
import { resolveJournalDriver } from '../../src/journal/sqlite-driver.js';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type AuditEntry,
  type ServerFixture,
  tempDir,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { READ, WRITE, fixtureTool } from '../support/fixtures.js';
import { failure } from '../support/errors.js';
import { context, record } from '../support/journal.js';
import { trackRuntimes } from '../support/runtimes.js';
import { auditEntry } from '../support/audit.js';
import { expectTestEra } from '../support/era.js';

const { runtimes, auditFiles } = trackRuntimes();

const tool = fixtureTool;

/** A server with a write tool `send`, a read tool `lookup`, and their slow (then fast) twins. */
const TOOLS = [
  tool('send', WRITE),
  tool('lookup', READ),
  tool('crash', WRITE),
  tool('slow_send', WRITE),
  tool('slow_lookup', READ),
  tool('oops', WRITE),
  tool('bump', WRITE),
];
const FIXTURE: ServerFixture = {
  generations: [{ pages: [{ tools: TOOLS }] }, { pages: [{ tools: [...TOOLS, tool('extra')] }] }],
  calls: { oops: { text: 'it went wrong', isError: true } },
  triggers: [
    { on: { method: 'tools/call', tool: 'crash' }, exit: 3 },
    // `bump` changes the catalog silently: the next hard refresh swaps it.
    { on: { method: 'tools/call', tool: 'bump' }, setGeneration: 1 },
    // Only the first call of each slow tool in a process is slow: the retry answers at once.
    { on: { method: 'tools/call', tool: 'slow_send', nth: 1 }, delayMs: 5_000 },
    { on: { method: 'tools/call', tool: 'slow_lookup', nth: 1 }, delayMs: 5_000 },
  ],
};

interface Opened {
  readonly runtime: McpRuntime;
  readonly events: RuntimeEvent[];
  readonly audit: () => Promise<AuditEntry[]>;
  /** The server's audit trail file (see {@link auditEntry}). */
  readonly auditPath: string;
}

async function open(
  journal: string,
  options: McpRuntimeOptions & { readonly retryReads?: boolean; readonly auditPath?: string } = {},
): Promise<Opened> {
  // `retryReads` and `auditPath` are this helper's, not the runtime's (which refuses unknown keys).
  const { retryReads, auditPath: givenAuditPath, ...runtimeOptions } = options;
  const auditPath = givenAuditPath ?? tempAuditPath('journal');
  auditFiles.push(auditPath);
  const events: RuntimeEvent[] = [];
  const runtime = await McpRuntime.open(
    {
      mcpServers: {
        s: {
          ...stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }),
          // The application vouches for this fixture's annotations (its `lookup` tools are reads).
          ...(retryReads === undefined ? {} : { retryReads, trustAnnotations: true }),
        },
      },
    },
    // Keys and delivery are the subject here: approvals are off unless a test asks for them.
    {
      approval: 'none',
      onEvent: (e) => events.push(e),
      journal: { path: journal },
      ...runtimeOptions,
    },
  );
  runtimes.push(runtime);
  expectTestEra(runtime, ['s']);
  return { runtime, events, audit: () => readAuditTrail(auditPath), auditPath };
}

const callsOf = (audit: readonly AuditEntry[], name: string): AuditEntry[] =>
  audit.filter((e) => e.method === 'tools/call' && e.tool === name);

async function receiptsOf(runtime: McpRuntime): Promise<ReceiptBody[]> {
  const stored = await runtime.journal.receipts();
  return stored.map((r) => JSON.parse(r.text) as ReceiptBody);
}

describe('McpRuntime with the SQLite journal, over real stdio', () => {
  it('replays a completed key after a restart: the same result and receipt, replayed, nothing sent', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const auditPath = tempAuditPath('replay');
    const first = await open(path, { auditPath });
    let original;
    {
      await using step = await first.runtime.captureBinding({ stepId: 'turn-1' });
      original = await step
        .prepareCall('s__send')
        .run({ input: 'hi' }, { idempotencyKey: 'turn-1:call_a' });
    }
    expect(original.replayed).toBe(false);
    expect(original.receipt).toMatchObject({ idempotencyKey: 'turn-1:call_a', outcome: 'ok' });
    await first.runtime.close();
    const second = await open(path, { auditPath });
    await using step = await second.runtime.captureBinding({ stepId: 'after-restart' });
    const again = await step
      .prepareCall('s__send')
      .run({ input: 'hi' }, { idempotencyKey: 'turn-1:call_a' });
    expect(again.replayed).toBe(true);
    expect(again.result).toEqual(original.result);
    expect(again.receipt).toEqual(original.receipt);
    expect(callsOf(await second.audit(), 'send')).toHaveLength(1);
    const receipts = await receiptsOf(second.runtime);
    expect(receipts.map((r) => [r.key, r.outcome, r.delivery, r.replayed])).toEqual([
      ['turn-1:call_a', 'ok', 'sent', false],
      ['turn-1:call_a', 'ok', 'not-sent', true],
    ]);
    expect((await second.runtime.journal.verify()).ok).toBe(true);
  });

  it('refuses a reused key with other arguments or another tool (IDEMPOTENCY_CONFLICT), sending nothing', async () => {
    using dir = tempDir('journal');
    const { runtime, audit } = await open(join(dir.path, 'journal.db'));
    await using step = await runtime.captureBinding();
    await step.prepareCall('s__send').run({ input: 'a' }, { idempotencyKey: 'k' });
    const args = await failure(
      step.prepareCall('s__send').run({ input: 'b' }, { idempotencyKey: 'k' }),
    );
    expect(args.code).toBe('IDEMPOTENCY_CONFLICT');
    // The key ran: the refusal says so (delivery of the key), and never advises a new key blindly.
    expect(args.detail).toMatchObject({
      key: 'k',
      delivery: 'sent',
      keyState: 'COMPLETED',
      differences: ['different arguments'],
    });
    const other = await failure(
      step.prepareCall('s__lookup').run({ input: 'a' }, { idempotencyKey: 'k' }),
    );
    expect(other.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(callsOf(await audit(), 'send')).toHaveLength(1);
    expect(callsOf(await audit(), 'lookup')).toHaveLength(0);
  });

  it('never re-sends a write whose server crashed after receiving it; resolve(ran) makes it replay', async () => {
    using dir = tempDir('journal');
    const { runtime, audit } = await open(join(dir.path, 'journal.db'));
    {
      await using step = await runtime.captureBinding();
      const lost = await failure(step.prepareCall('s__crash').run({}, { idempotencyKey: 'k' }));
      expect(lost.code).toBe('OUTCOME_UNKNOWN');
      expect(lost.detail['delivery']).toBe('sent');
      expect(toToolResult(lost).content[0].text).toMatch(/may or may not have taken effect.*Check/);
    }
    expect((await runtime.journal.get('k'))?.state).toBe('OUTCOME_UNKNOWN');
    {
      await using step = await runtime.captureBinding();
      const refused = await failure(step.prepareCall('s__crash').run({}, { idempotencyKey: 'k' }));
      expect(refused.code).toBe('OUTCOME_UNKNOWN');
      expect(refused.detail).toMatchObject({
        delivery: 'sent',
        replayed: true,
        record: { state: 'OUTCOME_UNKNOWN' },
      });
      expect(callsOf(await audit(), 'crash')).toHaveLength(1);
      const resolved = await runtime.resolve('k', {
        outcome: 'ran',
        by: 'operator',
        result: { content: [{ type: 'text', text: 'sent by hand' }] },
      });
      expect(resolved).toMatchObject({
        state: 'COMPLETED',
        resolution: { outcome: 'ran', by: 'operator' },
      });
      const replay = await step.prepareCall('s__crash').run({}, { idempotencyKey: 'k' });
      expect(replay).toMatchObject({
        replayed: true,
        result: { content: [{ text: 'sent by hand' }] },
      });
    }
    expect(callsOf(await audit(), 'crash')).toHaveLength(1);
    const outcomes = (await receiptsOf(runtime)).map((r) => [r.source, r.outcome]);
    expect(outcomes).toEqual([
      ['run', 'OUTCOME_UNKNOWN'],
      ['run', 'OUTCOME_UNKNOWN'],
      ['resolution', 'ran'],
      ['run', 'ok'],
    ]);
  });

  it('lets a key resolved as not run run again, exactly once more', async () => {
    using dir = tempDir('journal');
    const { runtime, audit } = await open(join(dir.path, 'journal.db'));
    await using step = await runtime.captureBinding();
    const timedOut = await failure(
      step.prepareCall('s__slow_send').run({}, { idempotencyKey: 'k', timeoutMs: 100 }),
    );
    expect(timedOut.code).toBe('TIMEOUT');
    expect(timedOut.detail['delivery']).toBe('sent');
    expect(toToolResult(timedOut).content[0].text).toMatch(
      /may or may not have taken effect; check/,
    );
    expect((await runtime.journal.get('k'))?.state).toBe('OUTCOME_UNKNOWN');
    expect(
      (await failure(step.prepareCall('s__slow_send').run({}, { idempotencyKey: 'k' }))).code,
    ).toBe('OUTCOME_UNKNOWN');
    await runtime.resolve('k', { outcome: 'not-run', note: 'the server log shows no send' });
    const ran = await step.prepareCall('s__slow_send').run({}, { idempotencyKey: 'k' });
    expect(ran.replayed).toBe(false);
    expect((await step.prepareCall('s__slow_send').run({}, { idempotencyKey: 'k' })).replayed).toBe(
      true,
    );
    expect(callsOf(await audit(), 'slow_send')).toHaveLength(2);
    const resolveAgain = await failure(runtime.resolve('k', { outcome: 'not-run' }));
    expect(resolveAgain.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(resolveAgain.detail['reason']).toBe('not-outcome-unknown');
  });

  it('re-sends a read tool with an unknown outcome only when the server allows retryReads', async () => {
    using dir = tempDir('journal');
    for (const retryReads of [false, true]) {
      const { runtime, audit } = await open(join(dir.path, `journal-${retryReads}.db`), {
        retryReads,
      });
      await using step = await runtime.captureBinding();
      const call = (): Promise<unknown> =>
        step.prepareCall('s__slow_lookup').run({}, { idempotencyKey: 'k', timeoutMs: 100 });
      expect((await failure(call())).code).toBe('TIMEOUT');
      if (retryReads) {
        await expect(call()).resolves.toMatchObject({ replayed: false });
        expect(callsOf(await audit(), 'slow_lookup')).toHaveLength(2);
      } else {
        expect((await failure(call())).code).toBe('OUTCOME_UNKNOWN');
        expect(callsOf(await audit(), 'slow_lookup')).toHaveLength(1);
      }
    }
  });

  it('refuses a key already running, in this runtime or in another one on the same journal', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const a = await open(path);
    const b = await open(path);
    await using stepA = await a.runtime.captureBinding();
    await using stepB = await b.runtime.captureBinding();
    const controller = new AbortController();
    const running = stepA
      .prepareCall('s__slow_send')
      .run({}, { idempotencyKey: 'k', signal: controller.signal });
    await auditEntry(a.auditPath, (e) => e.method === 'tools/call' && e.tool === 'slow_send');
    expect(callsOf(await a.audit(), 'slow_send')).toHaveLength(1);
    const here = await failure(stepA.prepareCall('s__slow_send').run({}, { idempotencyKey: 'k' }));
    expect(here.code).toBe('IDEMPOTENCY_IN_PROGRESS');
    const there = await failure(stepB.prepareCall('s__slow_send').run({}, { idempotencyKey: 'k' }));
    expect(there.code).toBe('IDEMPOTENCY_IN_PROGRESS');
    expect(there.detail).toMatchObject({ delivery: 'sent', record: { state: 'SENT' } });
    controller.abort();
    const aborted = await failure(running);
    expect([aborted.code, aborted.delivery]).toEqual(['ABORTED', 'sent']);
    expect(toToolResult(aborted).content[0].text).toMatch(/after it was sent.*check/);
    // The other runtime sees what the first one recorded: sent, no answer.
    const unknown = await failure(
      stepB.prepareCall('s__slow_send').run({}, { idempotencyKey: 'k' }),
    );
    expect(unknown.code).toBe('OUTCOME_UNKNOWN');
    expect(callsOf(await b.audit(), 'slow_send')).toHaveLength(0);
  });

  it('journals one receipt per run outcome, refusals included, in a chain that verifies', async () => {
    using dir = tempDir('journal');
    const { runtime, audit } = await open(join(dir.path, 'journal.db'), {
      approval: 'unproven-writes',
    });
    const step = await runtime.captureBinding();
    const approve = { prepare: (ctx: { approve(): void }) => ctx.approve() };
    const later = step.prepareCall('s__send');
    await step.prepareCall('s__send').run({}, approve);
    await step.prepareCall('s__oops').run({}, { ...approve, idempotencyKey: 'oops' });
    await failure(step.prepareCall('s__send').run({}));
    await failure(step.prepareCall('s__send').run({ input: 7 }, approve));
    // An unproven catalog's readOnlyHint lowers no bar: the read needs its approval too.
    await step.prepareCall('s__lookup').run({ input: 'x' }, { ...approve, idempotencyKey: 'r' });
    await step.prepareCall('s__lookup').run({ input: 'x' }, { ...approve, idempotencyKey: 'r' });
    await runtime.revokeTool('s', 'lookup');
    await failure(step.prepareCall('s__lookup').run({}));
    await step.prepareCall('s__bump').run({}, approve);
    expect(await runtime.hardRefresh('s')).toBe(true);
    const stale = await failure(later.run({}, { ...approve, idempotencyKey: 'stale' }));
    expect(stale.code).toBe('STALE_CATALOG');
    step.release();
    expect((await runtime.journal.get('stale'))?.state).toBe('NOT_SENT');
    expect(callsOf(await audit(), 'send')).toHaveLength(1);
    const receipts = await receiptsOf(runtime);
    expect(receipts.map((r) => [r.modelName, r.key, r.outcome, r.delivery, r.replayed])).toEqual([
      ['s__send', null, 'ok', 'sent', false],
      ['s__oops', 'oops', 'tool-error', 'sent', false],
      ['s__send', null, 'APPROVAL_REQUIRED', 'not-sent', false],
      ['s__send', null, 'INVALID_ARGUMENTS', 'not-sent', false],
      ['s__lookup', 'r', 'ok', 'sent', false],
      ['s__lookup', 'r', 'ok', 'not-sent', true],
      ['s__lookup', null, 'TOOL_DENIED', 'not-sent', false],
      ['s__bump', null, 'ok', 'sent', false],
      ['s__send', 'stale', 'STALE_CATALOG', 'not-sent', false],
    ]);
    for (const r of receipts) {
      expect(r).toMatchObject({ server: 's', generation: 1, policyEpoch: 0, audience: 'default' });
      expect(r.descriptorDigest).toMatch(/^sha256:/);
      expect(r.argsDigest).toMatch(/^sha256:/);
    }
    expect(await runtime.journal.verify()).toMatchObject({ ok: true, count: 9 });
  });

  it('recovers the keys a dead process left in progress on open, and lists them in journal-recovered', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
      encoding: 'utf8',
    });
    const owner = `${hostname()}:${dead.stdout}:${randomUUID()}`;
    const store = openSqliteJournal({ path });
    const far = Date.now() + 3_600_000;
    await store.insert(record('claimed', { owner, leaseExpiresAt: far, context: context('send') }));
    await store.insert(
      record('sent', { owner, state: 'SENT', leaseExpiresAt: far, context: context('send') }),
    );
    await store.close();
    const { runtime, events } = await open(path);
    const recovered = events.find(
      (e): e is Extract<RuntimeEvent, { type: 'journal-recovered' }> =>
        e.type === 'journal-recovered',
    );
    expect(recovered?.records.map((r: JournalRecord) => [r.key, r.state])).toEqual([
      ['claimed', 'NOT_SENT'],
      ['sent', 'OUTCOME_UNKNOWN'],
    ]);
    expect(recovered?.location).toBe(path);
    const receipts = await receiptsOf(runtime);
    expect(receipts.map((r) => [r.source, r.key, r.outcome, r.delivery])).toEqual([
      ['recovery', 'claimed', 'NOT_SENT', 'not-sent'],
      ['recovery', 'sent', 'OUTCOME_UNKNOWN', 'sent'],
    ]);
  });

  it('shows the journal in status() and journal-recovered: a SQLite file on the auto driver with its version, or memory', async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const { runtime, events } = await open(path);
    const auto = resolveJournalDriver('auto', 'test');
    const shown = runtime.status().journal;
    expect(shown).toEqual({
      kind: 'sqlite',
      location: path,
      driver: auto,
      sqliteVersion: expect.stringMatching(/^3\.\d+\.\d+$/),
    });
    expect(events.find((e) => e.type === 'journal-recovered')).toMatchObject({ journal: shown });
    const memory = await McpRuntime.open({ mcpServers: {} });
    runtimes.push(memory);
    expect(memory.status().journal).toEqual({ kind: 'memory', location: 'memory' });
  });

  it("leaves a live holder's keys alone at open: only their expiry frees them", async () => {
    using dir = tempDir('journal');
    const path = join(dir.path, 'journal.db');
    const live = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
      stdio: 'ignore',
    });
    try {
      const store = openSqliteJournal({ path });
      const later = Date.now() + 3_600_000;
      const at = (owner: string, key: string, lease: number): Promise<boolean> =>
        store.insert(record(key, { owner, state: 'SENT', leaseExpiresAt: lease }));
      await at(`${hostname()}:${String(live.pid)}:${randomUUID()}`, 'live', later);
      await at(`elsewhere:1:${randomUUID()}`, 'remote', later);
      await at(`elsewhere:2:${randomUUID()}`, 'expired', Date.now() - 1);
      // This process is alive, but this holder is no journal it has open.
      await at(`${hostname()}:${process.pid}:${randomUUID()}`, 'closed', later);
      await store.close();
      const { runtime, events } = await open(path);
      const recovered = events.find((e) => e.type === 'journal-recovered');
      expect(
        recovered?.type === 'journal-recovered' && recovered.records.map((r) => r.key),
      ).toEqual(['closed', 'expired']);
      expect((await runtime.journal.get('live'))?.state).toBe('SENT');
      expect((await runtime.journal.get('remote'))?.state).toBe('SENT');
    } finally {
      const exited =
        live.exitCode === null && live.signalCode === null ? once(live, 'exit') : undefined;
      live.kill('SIGKILL');
      await exited;
    }
  });

  it('reads the journal from the configuration file, relative to the file', async () => {
    using dir = tempDir('journal');
    const auditPath = tempAuditPath('config');
    auditFiles.push(auditPath);
    const file = join(dir.path, 'stepbind.json');
    writeFileSync(
      file,
      JSON.stringify({
        journal: { path: 'state/journal.db', synchronous: 'normal', busyTimeoutMs: 250 },
        mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) },
      }),
    );
    const config = await loadConfigFile(file);
    expect(config.journal).toEqual({
      path: join(dir.path, 'state', 'journal.db'),
      synchronous: 'normal',
      busyTimeoutMs: 250,
    });
    expect(() =>
      parseConfig({ journal: { path: 'j.db', busyTimeoutMs: Infinity }, mcpServers: {} }),
    ).toThrow(/\$\.journal\.busyTimeoutMs/);
    const missing = await McpRuntime.open(config).then(
      () => undefined,
      (e: StepbindError) => e,
    );
    expect(missing?.code).toBe('JOURNAL_UNAVAILABLE');
    expect(missing?.detail['reason']).toBe('missing-directory');
  });

  it('gives every call error its delivery: not-sent before the request is written, sent after', async () => {
    using dir = tempDir('journal');
    const { runtime } = await open(join(dir.path, 'journal.db'));
    const step = await runtime.captureBinding();
    const unknown = (() => {
      try {
        step.prepareCall('s__nope');
      } catch (error) {
        return error as CallError;
      }
      throw new Error('expected UNKNOWN_TOOL');
    })();
    expect(unknown.delivery).toBe('not-sent');
    expect((await failure(step.prepareCall('s__send').run({ input: 1 }))).delivery).toBe(
      'not-sent',
    );
    const timeout = await failure(step.prepareCall('s__slow_send').run({}, { timeoutMs: 50 }));
    expect([timeout.code, timeout.delivery]).toEqual(['TIMEOUT', 'sent']);
    const crash = await failure(step.prepareCall('s__crash').run({}));
    expect([crash.code, crash.delivery]).toEqual(['OUTCOME_UNKNOWN', 'sent']);
    // The captured connection is gone now: nothing can be written on it.
    const closed = await failure(step.prepareCall('s__send').run({}));
    expect([closed.code, closed.delivery]).toEqual(['CONNECTION_CLOSED', 'not-sent']);
    expect(toToolResult(closed).content[0].text).toMatch(/not sent, so it did not run/);
    const afterRelease = step.prepareCall('s__send');
    step.release();
    const released = await failure(afterRelease.run({}));
    expect([released.code, released.delivery]).toEqual(['BINDING_RELEASED', 'not-sent']);
  });
});
