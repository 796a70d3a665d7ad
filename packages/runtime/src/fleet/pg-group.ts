/**
 * One group's transaction of the PostgreSQL store's group commit (`pg-batch.ts`, DESIGN §21.6), in
 * as few round trips as its writes allow: each write is one statement, and a group's statements
 * go as one multi-statement simple-protocol string (values as escaped literals), each write inside
 * its own `SAVEPOINT`, with the `COMMIT` as the string's last statement: one round trip.
 *
 * - Receipts chain after the head, so they are built from the head this store last committed
 *   ({@link HeadCache}). The string's first statement after `BEGIN` takes the group's one lock of
 *   the head row (held to the commit) only if the row still is that head, and fails otherwise
 *   (`STALE_HEAD`); every statement that appends a receipt checks the head again as it sets it.
 *   When another worker appended meanwhile, or nothing is cached, the group starts over with the
 *   head row locked and read first (`ROLLBACK; BEGIN; SELECT … FOR UPDATE`, one round trip more).
 *   The lock is always taken before any record or receipt is written, so two groups never wait
 *   for each other in opposite orders.
 *
 * - The server runs the string in order and stops at the first statement that fails, so the
 *   answer says which write failed (statements completed before the error, counted from the
 *   server's `CommandComplete` messages). That write is rolled back to its savepoint and fails
 *   alone; the writes after it are sent again (the next string starts with the rollback); the
 *   ones before it stand.
 * - A compare-and-set that chains a receipt and loses fails its statement on purpose (a division
 *   by zero, `LOST_CAS`): the receipts after it were chained after its receipt, so they must not
 *   run. It is reported as that write's lost compare-and-set, never as an error. A compare-and-set
 *   without a receipt reports its row count.
 * - The string's `COMMIT` has returned when its answer arrives: writes resolve only after that
 *   (the caller resolves them once this returns). A failure the server reported at a statement
 *   before the `COMMIT` proves nothing committed (a lost connection there is retried whole by
 *   `PgHandle.tx`); any other failure of a string holding the `COMMIT` is `commit-unknown`.
 * - A value that cannot be a literal (a NUL) sends that write alone with parameters, after its
 *   own `SAVEPOINT`, then the rest as strings again.
 */
import type { ChainAnchor, ReceiptBody, ReceiptEntry } from '@stepbind/binding/internal';
import { chainReceipt } from '@stepbind/binding/internal';
import { DB_NOW_SQL, type DatabaseClock } from './db-clock.js';
import { sqlStateOf, type PgPoolClient, type PgQueryResult } from './pg-driver.js';
import { inlined, sqlLiteral } from './pg-literals.js';
import type { PgHandle, TxCommit } from './pg.js';

/** What a statement that compare-and-sets a record and chains its receipt fails with when it loses. */
export const LOST_CAS = '22012';

/** What a statement that appends a receipt fails with when the head moved (`ln(0)`). */
export const STALE_HEAD = '2201E';

/**
 * What a write before a send fails with when the database runs it after its caller's deadline
 * (`sqrt(-1)`, {@link deadlineGuard}).
 */
export const DEADLINE_PASSED = '2201F';

/**
 * The SQL condition that a write runs no later than `deadline` (an SQL expression: the
 * database's epoch milliseconds): true, or it fails with {@link DEADLINE_PASSED}, so a write its
 * caller gave up on (a database that stopped answering, then ran what it had received) never
 * commits after the caller left (DESIGN §21.6).
 */
export function deadlineGuard(deadline: string): string {
  return `sqrt(CASE WHEN ${DB_NOW_SQL} <= ${deadline} THEN 1 ELSE -1 END) >= 0`;
}

/**
 * The SQL guard of a statement that appends the receipt `seq`, `prev` (SQL expressions): true
 * when the head row is the one it chains after, else it fails with {@link STALE_HEAD}.
 */
export function headGuard(seq: string, prev: string): string {
  return `ln((seq = ${seq} - 1 AND digest = ${prev})::int) = 0`;
}

/** The head this store's last group left, to chain the next group's receipts after it. */
export interface HeadCache {
  head: ChainAnchor | undefined;
}

/** One write of a group: a single statement and how to read its answer. */
export interface GroupWrite {
  /** The receipt it appends after the group's head (stamped already), if any. */
  readonly receipt?: ReceiptBody | undefined;
  /** Its statement (`$n` parameters), given its receipt chained (when it has one). */
  statement(entry: ReceiptEntry | undefined): {
    readonly text: string;
    readonly values: readonly unknown[];
  };
  /**
   * Its answer: from its statement's result, or from no result when the statement failed with
   * {@link LOST_CAS} (a compare-and-set that chains a receipt and lost).
   */
  answer(result: PgQueryResult | undefined, entry: ReceiptEntry | undefined): unknown;
}

export type Outcome =
  { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

/** A write's statement placed in a string: its index there and the head it chained after. */
interface Placed {
  readonly write: number;
  readonly index: number;
  readonly entry: ReceiptEntry | undefined;
  readonly before: ChainAnchor | undefined;
}

/**
 * Runs `writes` as one transaction on `client` (its `BEGIN` and `COMMIT` included; see the file
 * comment) and returns each write's outcome, in order. Throws a failure of the group (`isGroup`).
 */
export async function runGroup(
  pg: PgHandle,
  client: PgPoolClient,
  commit: TxCommit,
  writes: readonly GroupWrite[],
  options: {
    readonly clock: DatabaseClock;
    readonly cache: HeadCache;
    /** A failure of the group, not of one write: thrown as is. */
    readonly isGroup: (error: unknown) => boolean;
    /** A write's own failure, as it would have failed alone. */
    readonly own: (index: number, error: unknown) => unknown;
  },
): Promise<Outcome[]> {
  // A lone write needs no savepoint: its failure is the transaction's.
  const savepoints = writes.length > 1;
  const outcomes: Outcome[] = [];
  let pending: string[] = ['BEGIN'];
  let head: ChainAnchor | undefined;
  // Chaining after the cached head: the string's first statement locks the head row only if it is
  // still that head, and each receipt's statement checks it again.
  let guessed = false;
  const chains = writes.some((write) => write.receipt !== undefined);
  /** The index of the statement that locks the cached head and checks it, in the first string. */
  let guardAt = -1;
  if (chains) {
    head = options.cache.head;
    // Taken: a group committing at the same time cannot chain after the same head.
    options.cache.head = undefined;
    const digest = head === undefined ? undefined : sqlLiteral(head.digest);
    if (head === undefined || digest === undefined) {
      head = await lockHead(pg, client, pending, options.clock);
      pending = [];
    } else {
      // The head row locked first, as on the other path (a receipt inserted before it would wait
      // for another group's while that group waits for this lock: a deadlock).
      guessed = true;
      guardAt = pending.length;
      pending.push(
        `SELECT 1 FROM chain_head WHERE id = 1 AND ${headGuard(String(head.seq + 1), digest)} FOR UPDATE`,
      );
    }
  }
  /** The head moved under a guessed chain: everything is rolled back, the group starts over. */
  const startOver = async (): Promise<void> => {
    guessed = false;
    outcomes.length = 0;
    head = await lockHead(pg, client, ['ROLLBACK', 'BEGIN'], options.clock);
    pending = [];
    next = 0;
  };
  let next = 0;
  for (;;) {
    const parts = pending;
    pending = [];
    const placed: Placed[] = [];
    let chained = head;
    let end = next;
    for (; end < writes.length; end++) {
      const write = writes[end]!;
      const entry = entryOf(write, chained);
      const { text, values } = write.statement(entry);
      const inline = inlined(text, values);
      if (inline === undefined) break;
      if (savepoints) parts.push('SAVEPOINT w');
      placed.push({ write: end, index: parts.length, entry, before: chained });
      parts.push(inline);
      if (savepoints) parts.push('RELEASE SAVEPOINT w');
      if (entry !== undefined) chained = { seq: entry.seq, digest: entry.digest };
    }
    const last = end === writes.length;
    const commitAt = parts.length;
    if (last) parts.push('COMMIT');
    if (parts.length > 0) {
      const before = options.clock.mark();
      const answer = await pg.statements(client, parts);
      const guardIndex = guardAt;
      guardAt = -1;
      if (answer.ok) {
        const after = options.clock.mark();
        for (const p of placed) {
          outcomes[p.write] = ok(writes[p.write]!.answer(answer.results[p.index], p.entry));
        }
        // A receipt's statement returns the database's time: it measures the clock too.
        const timed = placed.find((p) => p.entry !== undefined);
        const now = (timed && answer.results[timed.index]?.rows[0]) as
          { now?: unknown } | undefined;
        if (now !== undefined) options.clock.observe(before, Number(now.now), after);
        head = chained;
        next = end;
        if (last) {
          commit.committed = true;
          if (chains) options.cache.head = head;
          return outcomes;
        }
      } else {
        const { error, completed } = answer;
        // Only an error the server reported at a statement before the COMMIT proves it never ran.
        if (last && !(answer.reported && completed < commitAt)) commit.committing = true;
        const failed = placed.find((p) => p.index === completed);
        const checked = completed === guardIndex || failed?.entry !== undefined;
        if (guessed && answer.reported && checked && isStaleHead(error)) {
          await startOver();
          continue;
        }
        if (!savepoints || failed === undefined || !answer.reported || options.isGroup(error)) {
          if (!savepoints && failed !== undefined && isLostCas(error)) {
            // A lone compare-and-set that lost: nothing of it stands, nothing to commit.
            await client.query('ROLLBACK');
            commit.committed = true;
            return [ok(writes[failed.write]!.answer(undefined, failed.entry))];
          }
          throw error;
        }
        for (const p of placed) {
          if (p.write >= failed.write) break;
          outcomes[p.write] = ok(writes[p.write]!.answer(answer.results[p.index], p.entry));
        }
        const write = writes[failed.write]!;
        outcomes[failed.write] = isLostCas(error)
          ? ok(write.answer(undefined, failed.entry))
          : { ok: false, error: options.own(failed.write, error) };
        // The failed write undone; the ones after it go again, chained after the head before it.
        head = failed.before;
        next = failed.write + 1;
        pending = ['ROLLBACK TO SAVEPOINT w', 'RELEASE SAVEPOINT w'];
        continue;
      }
    }
    // Writes[end] cannot be a literal (a NUL): alone, with parameters, after its savepoint.
    const write = writes[end]!;
    const entry = entryOf(write, head);
    const { text, values } = write.statement(entry);
    if (savepoints) pending.push('SAVEPOINT w');
    if (pending.length > 0) await client.query(pending.join('; '));
    pending = [];
    try {
      outcomes[end] = ok(write.answer(await client.query(text, [...values]), entry));
      if (entry !== undefined) head = { seq: entry.seq, digest: entry.digest };
      if (savepoints) pending = ['RELEASE SAVEPOINT w'];
    } catch (error) {
      if (guessed && entry !== undefined && isStaleHead(error)) {
        await startOver();
        continue;
      }
      if (!savepoints || options.isGroup(error)) throw error;
      outcomes[end] = isLostCas(error)
        ? ok(write.answer(undefined, entry))
        : { ok: false, error: options.own(end, error) };
      pending = ['ROLLBACK TO SAVEPOINT w', 'RELEASE SAVEPOINT w'];
    }
    next = end + 1;
  }
}

function ok(value: unknown): Outcome {
  return { ok: true, value };
}

/** The head moved: the guard failed, or the receipt's sequence number is taken. */
function isStaleHead(error: unknown): boolean {
  const code = sqlStateOf(error);
  return code === STALE_HEAD || code === '23505';
}

function isLostCas(error: unknown): boolean {
  return sqlStateOf(error) === LOST_CAS;
}

function entryOf(write: GroupWrite, head: ChainAnchor | undefined): ReceiptEntry | undefined {
  if (write.receipt === undefined) return undefined;
  if (head === undefined) throw new Error('the chain head row is not locked');
  return chainReceipt(head, write.receipt);
}

/**
 * Locks the chain-head row (held to the commit) with `prefix` (the group's `BEGIN`), in one round
 * trip that also measures the database's clock.
 */
async function lockHead(
  pg: PgHandle,
  client: PgPoolClient,
  prefix: readonly string[],
  clock: DatabaseClock,
): Promise<ChainAnchor> {
  const before = clock.mark();
  const answer = await pg.statements(client, [
    ...prefix,
    `SELECT seq, digest, ${DB_NOW_SQL} AS now FROM chain_head WHERE id = 1 FOR UPDATE`,
  ]);
  if (!answer.ok) throw answer.error;
  const row = answer.results[answer.results.length - 1]?.rows[0] as
    { seq: string; digest: string; now: string } | undefined;
  // Not a clean measurement when the row lock was waited for: observe keeps the more precise one.
  clock.observe(before, Number(row?.now), clock.mark());
  if (row === undefined) throw new Error('the chain head row is missing');
  return { seq: Number(row.seq), digest: row.digest };
}
