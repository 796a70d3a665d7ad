/**
 * bench/journal-floor (issue 20, DESIGN §21.1): the least a keyed call must spend before it may be
 * sent, against the budget the sequential targets leave it, measured in one run.
 *
 * §13 requires the `SENT` record to be durable before a byte of the call is written. So a keyed
 * call costs at least an unkeyed call plus, before its send, the sha256 of its canonical arguments
 * (the payload the key commits to) and ONE SQLite commit of its `SENT` row. This suite measures
 * that floor with no journal JavaScript at all: raw better-sqlite3 (the driver the journal uses on
 * this Node; `node:sqlite` where the journal would pick it), the journal's own schema (a file
 * created by `openSqliteJournal`), WAL, the store's checkpoint interval, and the real `SENT` row
 * (its column values captured from a keyed call of the real journal), inserted under a fresh key
 * by one prepared statement in autocommit: one commit, `synchronous=NORMAL` and `=FULL`.
 * For reference it also measures the completion's commit (the record update, the receipt and the
 * chain head in one transaction, plus the receipt link's sha256), which §13 also requires before
 * a keyed `run` returns, and the keyed calls themselves.
 *
 * Budgets, per round from the same round's medians:
 * - `normal`: keyed ≤ 1.15 × unkeyed, so the journal may add 0.15 × unkeyed;
 * - `full`: keyed ≤ 1.1 × (unkeyed + one fsync), so it may add 0.1 × unkeyed + 1.1 × fsync (the
 *   fsync itself included: the floor's `full` commit contains its fsync).
 * A floor / budget above 1 is the measured reason the target cannot be met while `SENT` must be
 * durable before the send (and the completion's commit, not counted in the floor, only widens it).
 *
 * Sides, interleaved (the order reversed every other round): unkeyed calls over stdio, keyed calls
 * over stdio with the SQLite journal `normal` and `full`, the floor `normal` and `full`, the
 * completion commit, one fsync of a 4 KiB write, and keyed calls over a store that keeps nothing
 * (bench/null-store.ts: the journal's rules and the keyed call path without persistence).
 *
 * Run alone: `npx tsx bench/journal-floor.ts [--strict]`; in `pnpm bench journal-floor`.
 */
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import type { JournalRecord, ReceiptBody } from '@stepbind/binding';
import { canonicalJson, sha256Hex } from '@stepbind/binding/internal';
import { McpRuntime, openSqliteJournal, type SqliteJournalStore } from '@stepbind/runtime';
import { stdioServerParams } from '@stepbind/testkit';
import { rowValues } from '../packages/runtime/src/journal/rows.js';
import {
  openSqliteDatabase,
  resolveJournalDriver,
  type SqliteDatabase,
} from '../packages/runtime/src/journal/sqlite-driver.js';
import { nullJournalStore } from './null-store.js';
import { breathe, isMain, median, row, runStandalone, Scratch, trackChild } from './support.js';
import type { BenchRow } from './support.js';

const SUITE = 'journal-floor';
const ARGS = Object.freeze({ input: 'hello' });
/** Calls per group of the 64-in-flight floor (bench/journal.ts's 64 keyed calls in flight). */
const GROUP = 64;

/** Options of {@link runJournalFloorBench}. */
export interface JournalFloorOptions {
  /** Interleaved rounds. @default 8 */
  readonly rounds?: number;
  /** Calls (or commits) per side per round. @default 200 */
  readonly calls?: number;
}

/** What one keyed call of the real journal wrote: its `SENT` row and its completion. */
interface Captured {
  sent?: JournalRecord;
  completed?: JournalRecord;
  receipt?: ReceiptBody;
}

/** Wraps the store's writes to keep the last `SENT` insert and completion update it was given. */
function capturing(store: SqliteJournalStore, into: Captured): void {
  const insert = store.insert.bind(store);
  const update = store.update.bind(store);
  store.insert = (record, options) => {
    if (record.state === 'SENT') into.sent = record;
    return insert(record, options);
  };
  store.update = (record, expected, options) => {
    if (record.state === 'COMPLETED') {
      into.completed = record;
      into.receipt = options?.receipt;
    }
    return update(record, expected, options);
  };
}

interface StdioSide {
  readonly runtime: McpRuntime;
  readonly keyed: string | undefined;
  calls: number;
}

async function openStdio(
  scratch: Scratch,
  name: string,
  synchronous: 'full' | 'normal' | 'nothing' | undefined,
  capture?: Captured,
): Promise<StdioSide> {
  const params = stdioServerParams({ scenario: 'single' });
  const sqlite =
    synchronous === undefined || synchronous === 'nothing'
      ? undefined
      : openSqliteJournal({ path: scratch.path(`${name}.db`), synchronous });
  if (sqlite !== undefined && capture !== undefined) capturing(sqlite, capture);
  const store = synchronous === 'nothing' ? nullJournalStore() : sqlite;
  const runtime = await McpRuntime.open(
    { mcpServers: { s: { command: params.command, args: params.args, approval: 'none' } } },
    store === undefined ? {} : { journal: { store } },
  );
  for (const pid of runtime.pids()) trackChild(pid);
  return { runtime, keyed: synchronous === undefined ? undefined : name, calls: 0 };
}

/** Median latency (µs) of `calls` sequential calls. */
async function stdioRound(side: StdioSide, calls: number): Promise<number> {
  await using step = await side.runtime.captureBinding();
  const call = step.prepareCall('s__alpha');
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const options =
      side.keyed === undefined ? {} : { idempotencyKey: `${side.keyed}-${side.calls}` };
    side.calls++;
    const t = performance.now();
    await call.run(ARGS, options);
    times.push((performance.now() - t) * 1000);
  }
  return median(times);
}

/** A raw connection to a file with the journal's schema, and the statements of the floor. */
interface RawFloor {
  readonly db: SqliteDatabase;
  /** One commit of the `SENT` row under `key`, after the sha256 of the canonical arguments. */
  readonly sent: (key: string) => void;
  /** The completion of `key`: record update, receipt and chain head in one transaction. */
  readonly complete: (key: string, seq: number) => void;
  /**
   * The writes of `keys.length` calls as group commit makes them: their SENT rows in one commit,
   * then their completions in one.
   */
  readonly group: (keys: readonly string[], firstSeq: number) => void;
  n: number;
}

function openFloor(scratch: Scratch, name: string, sync: 'full' | 'normal', c: Captured): RawFloor {
  const path = scratch.path(`${name}.db`);
  // The schema exactly as the journal creates it; then the journal steps aside.
  void openSqliteJournal({ path }).close();
  const db = openSqliteDatabase(path, path, {}, resolveJournalDriver('auto', path));
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${sync === 'full' ? 'FULL' : 'NORMAL'}`);
  db.pragma('wal_autocheckpoint = 10000'); // the store's WAL_CHECKPOINT_PAGES
  const sent = c.sent as JournalRecord;
  const completed = c.completed as JournalRecord;
  const receipt = c.receipt as ReceiptBody;
  // The column values are made once: what is measured is SQLite's commit, not the journal's JS.
  const sentValues = rowValues(sent);
  const completedValues = rowValues(completed);
  const receiptText = JSON.stringify(receipt);
  const insert = db.prepare(
    `INSERT INTO records (key, state, version, attempt, owner, context, args_digest, created_at,
       updated_at, lease_expires_at, expires_at, outcome, error, resolution, task_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
  );
  const update = db.prepare(
    `UPDATE records SET state = ?, version = ?, attempt = ?, owner = ?, context = ?,
       args_digest = ?, created_at = ?, updated_at = ?, lease_expires_at = ?, expires_at = ?,
       outcome = ?, error = ?, resolution = ?, task_id = ? WHERE key = ? AND version = ?`,
  );
  const append = db.prepare(
    'INSERT INTO receipts (seq, prev_digest, digest, key, at, body) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const setHead = db.prepare('UPDATE chain_head SET seq = ?, digest = ? WHERE id = 1');
  let prev = 'genesis';
  const sentOne = (key: string): void => {
    const digest = `sha256:${sha256Hex(canonicalJson(ARGS))}`;
    if (digest.length === 0 || insert.run(key, ...sentValues).changes !== 1) {
      throw new Error(`floor insert of ${key} wrote nothing`);
    }
  };
  const completeOne = (key: string, seq: number): void => {
    if (update.run(...completedValues, key, sent.version).changes !== 1) throw new Error(key);
    const digest = sha256Hex(`${prev}\n${receiptText}`);
    append.run(seq, prev, digest, key, receipt.at, receiptText);
    setHead.run(seq, digest);
    prev = digest;
  };
  const sentGroup = db.transaction((keys: readonly string[]) => keys.forEach(sentOne));
  const completeGroup = db.transaction((keys: readonly string[], firstSeq: number) =>
    keys.forEach((key, i) => completeOne(key, firstSeq + i)),
  );
  const completion = db.transaction((key: string, seq: number) => {
    if (update.run(...completedValues, key, sent.version).changes !== 1) throw new Error(key);
    const digest = sha256Hex(`${prev}\n${receiptText}`);
    append.run(seq, prev, digest, key, receipt.at, receiptText);
    setHead.run(seq, digest);
    prev = digest;
  });
  return {
    db,
    sent: sentOne,
    complete: (key, seq) => completion.immediate(key, seq),
    group: (keys, firstSeq) => {
      sentGroup.immediate(keys);
      completeGroup.immediate(keys, firstSeq);
    },
    n: 0,
  };
}

/** Medians (µs) of `calls` floor commits, and of the completions that follow them. */
function floorRound(floor: RawFloor, calls: number): { sent: number; completion: number } {
  const sent: number[] = [];
  const completion: number[] = [];
  for (let i = 0; i < calls; i++) {
    const key = `floor-${floor.n++}`;
    const t0 = performance.now();
    floor.sent(key);
    const t1 = performance.now();
    floor.complete(key, floor.n);
    const t2 = performance.now();
    sent.push((t1 - t0) * 1000);
    completion.push((t2 - t1) * 1000);
  }
  return { sent: median(sent), completion: median(completion) };
}

/** Median time (µs) per call of `calls` calls' writes made in groups of `size` (`RawFloor.group`). */
function groupRound(floor: RawFloor, calls: number, size: number): number {
  const perCall: number[] = [];
  for (let done = 0; done < calls; done += size) {
    const keys = Array.from({ length: size }, () => `floor-${floor.n++}`);
    const t0 = performance.now();
    floor.group(keys, floor.n - size + 1);
    perCall.push(((performance.now() - t0) * 1000) / size);
  }
  return median(perCall);
}

/**
 * Median time (µs) of one fsync of a 4 KiB write: rewriting the first 64 KiB of a file in turn (as
 * bench/journal.ts measures it, the target's "one fsync"), or `appending` (the file grows with each
 * write, as the WAL does until a checkpoint lets SQLite start it over).
 */
function fsyncMicros(scratch: Scratch, appending = false, samples = 100): number {
  const fd = openSync(scratch.path(appending ? 'fsync-append.probe' : 'fsync.probe'), 'w');
  const block = Buffer.alloc(4096, 1);
  const times: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      writeSync(fd, block, 0, block.length, (appending ? i : i % 16) * 4096);
      const t = performance.now();
      fsyncSync(fd);
      times.push((performance.now() - t) * 1000);
    }
  } finally {
    closeSync(fd);
  }
  return median(times);
}

/** Runs the suite and returns its rows. */
export async function runJournalFloorBench(options: JournalFloorOptions = {}): Promise<BenchRow[]> {
  const rounds = options.rounds ?? 8;
  const calls = options.calls ?? 200;
  const scratch = new Scratch();
  const captured: Captured = {};
  const stdio: StdioSide[] = [];
  const floors: RawFloor[] = [];
  try {
    const bare = await openStdio(scratch, 'bare', undefined);
    const normal = await openStdio(scratch, 'normal', 'normal', captured);
    const full = await openStdio(scratch, 'full', 'full');
    const nothing = await openStdio(scratch, 'nothing', 'nothing');
    stdio.push(bare, normal, full, nothing);
    // Warm-up, which also captures the real rows of a keyed call.
    for (const side of stdio) await stdioRound(side, calls);
    if (captured.sent === undefined || captured.completed === undefined) {
      throw new Error('no SENT insert and completion were captured from the keyed calls');
    }
    const floorNormal = openFloor(scratch, 'floor-normal', 'normal', captured);
    const floorFull = openFloor(scratch, 'floor-full', 'full', captured);
    floors.push(floorNormal, floorFull);
    for (const floor of floors) floorRound(floor, calls);
    const m = {
      bare: [] as number[],
      normal: [] as number[],
      full: [] as number[],
      nothing: [] as number[],
      floorNormal: [] as number[],
      floorFull: [] as number[],
      completion: [] as number[],
      fsync: [] as number[],
      fsyncAppend: [] as number[],
      groupNormal: [] as number[],
      groupFull: [] as number[],
    };
    type Step = () => Promise<void>;
    const steps: Step[] = [
      async () => void m.bare.push(await stdioRound(bare, calls)),
      async () => void m.normal.push(await stdioRound(normal, calls)),
      async () => void m.full.push(await stdioRound(full, calls)),
      async () => void m.nothing.push(await stdioRound(nothing, calls)),
      async () => {
        const r = floorRound(floorNormal, calls);
        m.floorNormal.push(r.sent);
        m.completion.push(r.completion);
      },
      async () => void m.floorFull.push(floorRound(floorFull, calls).sent),
      async () => void m.fsync.push(fsyncMicros(scratch)),
      async () => void m.groupNormal.push(groupRound(floorNormal, calls * 4, GROUP)),
      async () => void m.groupFull.push(groupRound(floorFull, calls * 4, GROUP)),
      async () => void m.fsyncAppend.push(fsyncMicros(scratch, true)),
    ];
    for (let r = 0; r < rounds; r++) {
      for (const step of r % 2 === 0 ? steps : [...steps].reverse()) {
        await step();
        await breathe();
      }
    }
    const per = (f: (i: number) => number): number[] => m.bare.map((_, i) => f(i));
    const at = (values: number[], i: number): number => values[i] as number;
    const budgetNormal = per((i) => 0.15 * at(m.bare, i));
    const budgetFull = per((i) => 0.1 * at(m.bare, i) + 1.1 * at(m.fsync, i));
    const note = `${rounds} interleaved rounds × ${calls} calls or commits per side (medians per round); floor = sha256 of the canonical arguments + ONE commit of the journal's real SENT row (raw driver, same schema, WAL), no journal JS.`;
    return [
      row(SUITE, 'seq latency, unkeyed (stdio)', 'µs', m.bare),
      row(SUITE, "seq latency, keyed, SQLite 'normal' (stdio)", 'µs', m.normal),
      row(SUITE, "seq latency, keyed, SQLite 'full' (stdio)", 'µs', m.full),
      row(SUITE, 'seq latency, keyed, store keeping nothing (stdio)', 'µs', m.nothing),
      row(SUITE, "one fsync of a 4 KiB rewrite (the target's fsync)", 'µs', m.fsync),
      row(SUITE, 'one fsync of an appended 4 KiB write', 'µs', m.fsyncAppend),
      row(SUITE, "floor: SENT commit + args sha256, 'normal'", 'µs', m.floorNormal, { note }),
      row(SUITE, "floor: SENT commit + args sha256, 'full'", 'µs', m.floorFull),
      row(SUITE, "completion commit (update + receipt + head), 'normal'", 'µs', m.completion),
      row(
        SUITE,
        `floor at ${GROUP} in flight: both writes per call in groups of ${GROUP}, 'normal'`,
        'µs',
        m.groupNormal,
        {
          note: `The SENT rows of ${GROUP} calls in one commit, then their completions in one (group commit's best case), raw driver, per call. Against bench/journal.ts's 64-in-flight target (≥ 0.80× unkeyed throughput), the journal may add at most 0.25 / (unkeyed calls/s) per call on the event loop this synchronous driver blocks.`,
        },
      ),
      row(
        SUITE,
        `floor at ${GROUP} in flight: both writes per call in groups of ${GROUP}, 'full'`,
        'µs',
        m.groupFull,
      ),
      row(SUITE, "budget 'normal': 0.15 × unkeyed", 'µs', budgetNormal),
      row(SUITE, "budget 'full': 0.1 × unkeyed + 1.1 × fsync", 'µs', budgetFull),
      row(
        SUITE,
        "floor / budget, 'normal'",
        '×',
        per((i) => at(m.floorNormal, i) / at(budgetNormal, i)),
        {
          note: 'Above 1: the sequential target cannot be met while SENT is durable before the send.',
        },
      ),
      row(
        SUITE,
        "floor / budget, 'full'",
        '×',
        per((i) => at(m.floorFull, i) / at(budgetFull, i)),
      ),
      row(
        SUITE,
        "floor + completion / budget, 'normal'",
        '×',
        per((i) => (at(m.floorNormal, i) + at(m.completion, i)) / at(budgetNormal, i)),
      ),
      row(
        SUITE,
        'keyed over a store keeping nothing / unkeyed',
        '×',
        per((i) => at(m.nothing, i) / at(m.bare, i)),
        {
          note: 'The journal rules and keyed call path alone (bench/null-store.ts), no persistence.',
        },
      ),
      row(
        SUITE,
        "keyed / unkeyed, 'normal'",
        '×',
        per((i) => at(m.normal, i) / at(m.bare, i)),
        {
          target: { op: '<=', value: 1.15 },
        },
      ),
      row(
        SUITE,
        "keyed / (unkeyed + fsync), 'full'",
        '×',
        per((i) => at(m.full, i) / (at(m.bare, i) + at(m.fsync, i))),
        { target: { op: '<=', value: 1.1 } },
      ),
    ];
  } finally {
    for (const floor of floors) floor.db.close();
    for (const side of stdio) await side.runtime.close();
    scratch.dispose();
  }
}

if (isMain(import.meta.url)) {
  await runStandalone('bench/journal-floor', () => runJournalFloorBench());
}
