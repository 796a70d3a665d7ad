/**
 * bench/journal-driver (standalone, report only): the SQLite journal store on each driver the
 * running Node has (`node:sqlite`, better-sqlite3), interleaved ABAB in one run so both see the same
 * disk and load. Per driver: the time to open a new journal file (create, migrate, probe write)
 * and to reopen it, and the journal cost of one keyed call (insert INTENT, update SENT durable,
 * update COMPLETED with its receipt) under `synchronous: 'full'` and `'normal'`; then the ratio
 * node:sqlite / better-sqlite3 of each median. Both drivers are there on Node 22.13+ only.
 *
 * Run: `npx tsx bench/journal-driver.ts [rounds] [calls]` (defaults 6 and 300).
 */
import { openSqliteJournal, type JournalDriver } from '@stepbind/runtime';
import type { JournalRecord, ReceiptBody } from '@stepbind/binding';
import { availableJournalDrivers } from '../packages/runtime/src/journal/sqlite-driver.js';
import { Scratch, spread } from './support.js';

const median = (values: readonly number[]): number => spread(values).median;

const rounds = Number(process.argv[2] ?? 6);
const calls = Number(process.argv[3] ?? 300);

function recordOf(key: string, state: JournalRecord['state'], version: number): JournalRecord {
  return {
    key,
    state,
    version,
    attempt: 1,
    owner: 'bench:1:owner',
    context: { stepId: 'bench' } as JournalRecord['context'],
    argsDigest: 'sha256:args',
    createdAt: 1_000,
    updatedAt: 1_000,
    leaseExpiresAt: 2_000,
    expiresAt: null,
    outcome: null,
    error: null,
    resolution: null,
  };
}

function receiptOf(key: string): ReceiptBody {
  return { key, at: Date.now(), source: 'run', outcome: 'ok' } as unknown as ReceiptBody;
}

/** Microseconds per keyed call (three writes), the median of this round's calls. */
async function cycles(
  path: string,
  driver: JournalDriver,
  sync: 'full' | 'normal',
): Promise<number> {
  const store = openSqliteJournal({ path, driver, synchronous: sync });
  const each: number[] = [];
  for (let i = 0; i < calls; i++) {
    const key = `k${i}`;
    const t0 = process.hrtime.bigint();
    await store.insert(recordOf(key, 'INTENT', 1));
    await store.update(recordOf(key, 'SENT', 2), 1, { durable: true });
    await store.update(recordOf(key, 'COMPLETED', 3), 2, { receipt: receiptOf(key) });
    each.push(Number(process.hrtime.bigint() - t0) / 1_000);
  }
  await store.close();
  return median(each);
}

function openTimes(path: string, driver: JournalDriver): { create: number; reopen: number } {
  const t0 = process.hrtime.bigint();
  const created = openSqliteJournal({ path, driver });
  const t1 = process.hrtime.bigint();
  void created.close();
  const t2 = process.hrtime.bigint();
  const again = openSqliteJournal({ path, driver });
  const t3 = process.hrtime.bigint();
  void again.close();
  return { create: Number(t1 - t0) / 1_000, reopen: Number(t3 - t2) / 1_000 };
}

const drivers = availableJournalDrivers();
const results = new Map<string, number[]>();
const push = (name: string, value: number): void => {
  results.set(name, [...(results.get(name) ?? []), value]);
};
const scratch = new Scratch();
try {
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? drivers : [...drivers].reverse();
    for (const driver of order) {
      const times = openTimes(scratch.path(`open-${driver}-${r}.db`), driver);
      push(`${driver} open new`, times.create);
      push(`${driver} reopen`, times.reopen);
      for (const sync of ['full', 'normal'] as const) {
        push(
          `${driver} call ${sync}`,
          await cycles(scratch.path(`${sync}-${driver}-${r}.db`), driver, sync),
        );
      }
    }
  }
} finally {
  scratch.dispose();
}
console.log(
  `journal-driver: Node ${process.version}, ${rounds} rounds, ${calls} keyed calls per round`,
);
for (const [name, values] of results) {
  console.log(
    `  ${name.padEnd(32)} ${median(values).toFixed(0).padStart(7)} µs (median of rounds)`,
  );
}
if (drivers.length === 2) {
  for (const what of ['open new', 'reopen', 'call full', 'call normal']) {
    const a = median(results.get(`node:sqlite ${what}`) ?? []);
    const b = median(results.get(`better-sqlite3 ${what}`) ?? []);
    console.log(`  ratio node:sqlite / better-sqlite3, ${what.padEnd(12)} ${(a / b).toFixed(2)}`);
  }
}
