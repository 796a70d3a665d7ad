import { join } from 'node:path';
import { toToolResult, verifyChain } from '@stepbind/binding';
import {
  McpRuntime,
  openSqliteJournal as openStore,
  type JournalDriver,
  type SqliteJournalOptions,
  type RuntimeClock,
  type RuntimeEvent,
} from '@stepbind/runtime';
import {
  readAuditTrail,
  stdioServerParams,
  tempAuditPath,
  type AuditEntry,
  type ServerFixture,
  tempDir,
} from '@stepbind/testkit';
import { expect, it } from 'vitest';
import { WRITE } from '../support/fixtures.js';
import { failure } from '../support/errors.js';
import { receipt, record } from '../support/journal.js';
import { trackRuntimes } from '../support/runtimes.js';
import { holdLock as holdJournalLock, type LockHolder } from './busy/hold.js';
import { describeEachDriver } from './drivers.js';

const { runtimes, pids, auditFiles } = trackRuntimes();
const holdLockOn = (driver: JournalDriver, path: string) => holdJournalLock(driver, path, pids);

/** Counts the event loop's 10 ms interval ticks; `until(n)` resolves at the n-th. */
function ticker(): { readonly count: number; until(n: number): Promise<void>; stop(): void } {
  let count = 0;
  const waiting: { n: number; resolve: () => void }[] = [];
  const timer = setInterval(() => {
    count++;
    for (const w of waiting.filter((x) => x.n <= count)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve();
    }
  }, 10);
  return {
    get count() {
      return count;
    },
    until: (n) => new Promise<void>((resolve) => waiting.push({ n, resolve })),
    stop: () => clearInterval(timer),
  };
}

/**
 * A clock whose timers run on the next turn of the event loop and move its time forward by their
 * delay: a bound of seconds is reached at once, and `paused` resolves at the first wait.
 */
function virtualClock(): RuntimeClock & { readonly paused: Promise<void> } {
  let now = 1_000_000;
  let first: () => void = () => undefined;
  const paused = new Promise<void>((resolve) => (first = resolve));
  return {
    paused,
    now: () => now,
    setTimeout: (callback, ms) => {
      first();
      return setImmediate(() => {
        now += ms;
        callback();
      });
    },
    clearTimeout: (handle) => clearImmediate(handle as NodeJS.Immediate),
  };
}

const FIXTURE: ServerFixture = {
  generations: [
    { pages: [{ tools: [{ name: 'send', inputSchema: { type: 'object' }, annotations: WRITE }] }] },
  ],
};

async function openOn(
  driver: JournalDriver,
  path: string,
  busyTimeoutMs?: number,
): Promise<{ runtime: McpRuntime; events: RuntimeEvent[]; sends: () => Promise<AuditEntry[]> }> {
  const auditPath = tempAuditPath('busy');
  auditFiles.push(auditPath);
  const events: RuntimeEvent[] = [];
  const runtime = await McpRuntime.open(
    { mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) } },
    {
      approval: 'none',
      onEvent: (e) => events.push(e),
      journal: { path, driver, ...(busyTimeoutMs === undefined ? {} : { busyTimeoutMs }) },
    },
  );
  runtimes.push(runtime);
  const sends = async (): Promise<AuditEntry[]> =>
    (await readAuditTrail(auditPath)).filter((e) => e.method === 'tools/call');
  return { runtime, events, sends };
}

describeEachDriver('the SQLite journal while another process holds its write lock', (driver) => {
  // The holder, the runtime and the stores of this suite all run on the suite's driver.
  const holdLock = (path: string) => holdLockOn(driver, path);
  const open = (path: string, busyTimeoutMs?: number) => openOn(driver, path, busyTimeoutMs);
  const openSqliteJournal = (options: SqliteJournalOptions) => openStore({ driver, ...options });

  it('keeps the event loop running while a keyed run waits for the lock, and runs it once when released', async () => {
    using dir = tempDir('busy');
    const path = join(dir.path, 'journal.db');
    const { runtime, sends } = await open(path);
    await using step = await runtime.captureBinding();
    await using holder = await holdLock(path);
    const ticks = ticker();
    let settled = false;
    const run = step
      .prepareCall('s__send')
      .run({}, { idempotencyKey: 'k' })
      .finally(() => (settled = true));
    // Timers fire while the run waits (SQLite's own busy timeout would freeze them for 5 s).
    await Promise.race([ticks.until(5), run]);
    expect(settled).toBe(false);
    expect(await sends()).toHaveLength(0);
    await holder.release();
    const outcome = await run;
    ticks.stop();
    expect(outcome.replayed).toBe(false);
    expect(await sends()).toHaveLength(1);
    expect((await runtime.journal.get('k'))?.state).toBe('COMPLETED');
    expect((await runtime.journal.verify()).ok).toBe(true);
  });

  it('fails JOURNAL_BUSY with nothing sent when the lock outlives the bound, and the key runs once later', async () => {
    using dir = tempDir('busy');
    const path = join(dir.path, 'journal.db');
    const { runtime, events, sends } = await open(path, 50);
    await using step = await runtime.captureBinding();
    const holder = await holdLock(path);
    const busy = await failure(step.prepareCall('s__send').run({}, { idempotencyKey: 'k' }));
    expect(busy.code).toBe('JOURNAL_BUSY');
    expect(busy.detail).toMatchObject({
      location: path,
      operation: 'insert',
      delivery: 'not-sent',
      server: 's',
      tool: 'send',
    });
    expect(busy.detail['waitedMs']).toBeGreaterThanOrEqual(50);
    expect(toToolResult(busy).content[0].text).toMatch(/was not run.*not sent/);
    // The receipt of the refusal met the same lock: reported on the side, never thrown.
    expect(events.filter((e) => e.type === 'journal-error')).toHaveLength(1);
    await holder.release();
    expect(await sends()).toHaveLength(0);
    expect(await runtime.journal.get('k')).toBeUndefined();
    const again = await step.prepareCall('s__send').run({}, { idempotencyKey: 'k' });
    expect(again.replayed).toBe(false);
    expect(await sends()).toHaveLength(1);
  });

  it('leaves a claimed key safe when its SENT write fails busy: not sent, and run once after release', async () => {
    using dir = tempDir('busy');
    const path = join(dir.path, 'journal.db');
    const { runtime, sends } = await open(path, 50);
    await using step = await runtime.captureBinding();
    let holder: LockHolder | undefined;
    // The INTENT is written before the hook; the lock is taken while the hook runs.
    const busy = await failure(
      step.prepareCall('s__send').run(
        {},
        {
          idempotencyKey: 'k',
          prepare: async () => {
            holder = await holdLock(path);
          },
        },
      ),
    );
    expect(busy.code).toBe('JOURNAL_BUSY');
    expect(busy.detail).toMatchObject({ operation: 'update', delivery: 'not-sent' });
    await holder?.release();
    expect(await sends()).toHaveLength(0);
    expect((await runtime.journal.get('k'))?.state).toBe('INTENT');
    const again = await step.prepareCall('s__send').run({}, { idempotencyKey: 'k' });
    expect(again.replayed).toBe(false);
    expect(await sends()).toHaveLength(1);
    expect((await runtime.journal.get('k'))?.state).toBe('COMPLETED');
    expect((await runtime.journal.verify()).ok).toBe(true);
  });

  it('applies an update and its receipt once, whole, when the lock it waited for is released', async () => {
    using dir = tempDir('busy');
    const path = join(dir.path, 'journal.db');
    let paused: () => void = () => undefined;
    const waiting = new Promise<void>((resolve) => (paused = resolve));
    // The real timers, telling when the first pause starts.
    const clock: RuntimeClock = {
      now: () => Date.now(),
      clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
      setTimeout: (callback, ms) => {
        paused();
        return setTimeout(callback, ms);
      },
    };
    const store = openSqliteJournal({ path, clock });
    try {
      expect(await store.insert(record('k'))).toBe(true);
      const holder = await holdLock(path);
      const update = store.update(record('k', { state: 'SENT', version: 2 }), 1, {
        receipt: receipt(1, 'k'),
        durable: true,
      });
      await waiting;
      await holder.release();
      const written = await update;
      expect(written).toMatchObject({ ok: true, receipt: { seq: 1 } });
      expect(await store.get('k')).toMatchObject({ state: 'SENT', version: 2 });
      const chain = await store.readReceipts();
      expect(chain).toHaveLength(1);
      expect(verifyChain(await store.anchor(), chain).ok).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('reaches the bound on the injected clock: JOURNAL_BUSY after busyTimeoutMs by that clock', async () => {
    using dir = tempDir('busy');
    const path = join(dir.path, 'journal.db');
    const clock = virtualClock();
    const store = openSqliteJournal({ path, clock });
    try {
      await using holder = await holdLock(path);
      const error = await failure(store.insert(record('k'), { durable: true }));
      expect(error.code).toBe('JOURNAL_BUSY');
      expect(error.detail).toMatchObject({ location: path, operation: 'insert', waitedMs: 5000 });
      expect(error.message).toMatch(/locked by another process.*busyTimeoutMs/);
      await holder.release();
      expect(await store.get('k')).toBeUndefined();
      expect(await store.insert(record('k'), { durable: true })).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('ends a wait for the lock when the caller aborts (ABORTED, nothing written)', async () => {
    using dir = tempDir('busy');
    const path = join(dir.path, 'journal.db');
    const clock = virtualClock();
    // A bound the virtual clock does not reach before the abort: only the signal ends the wait.
    const store = openSqliteJournal({ path, clock: { ...clock, setTimeout: pauseOnly(clock) } });
    try {
      await using holder = await holdLock(path);
      const controller = new AbortController();
      const insert = failure(store.insert(record('k'), { signal: controller.signal }));
      await clock.paused;
      controller.abort(new Error('the user stopped'));
      const error = await insert;
      expect(error.code).toBe('ABORTED');
      expect(error.detail).toMatchObject({ delivery: 'not-sent' });
      await holder.release();
      expect(await store.get('k')).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it('ends a wait for the lock when the store closes (JOURNAL_UNAVAILABLE closed)', async () => {
    using dir = tempDir('busy');
    const path = join(dir.path, 'journal.db');
    const clock = virtualClock();
    const store = openSqliteJournal({ path, clock: { ...clock, setTimeout: pauseOnly(clock) } });
    // Released on dispose, after the store closed.
    await using _holder = await holdLock(path);
    const insert = failure(store.insert(record('k')));
    await clock.paused;
    await store.close();
    const error = await insert;
    expect(error.code).toBe('JOURNAL_UNAVAILABLE');
    expect(error.detail).toMatchObject({ reason: 'closed' });
  });
});

/** A `setTimeout` that only signals `clock.paused` and never fires: the wait lasts until ended. */
function pauseOnly(clock: RuntimeClock): RuntimeClock['setTimeout'] {
  return (_callback, _ms) => {
    const handle = clock.setTimeout(() => undefined, 0);
    return handle;
  };
}
