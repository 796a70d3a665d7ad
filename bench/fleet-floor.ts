/**
 * bench/fleet-floor: the measured floor of a keyed call's store work on this machine, interleaved
 * round by round with the sequential calls of `bench/fleet-calls.ts` (same process, same
 * PostgreSQL, same moment; issue 20's "≤ 1.2 ms at p50, about two commits").
 *
 * - Floor: the two commits a keyed call minimally needs, its `SENT` insert and its completion (the
 *   record's compare-and-set, its receipt and the chain head), each ONE simple-protocol string (one
 *   round trip), on a raw `pg` client with the store's connection settings (`PgHandle.client`), on
 *   a fresh schema migrated by `migrateFleetStore`. The strings are the store's own: one real keyed
 *   call's two group strings, captured from `PgHandle.statements` (wrapped for that one call), and
 *   replayed with a fresh key, the next receipt sequence number, the previous digest and a fresh
 *   digest of the same lengths, all built before the clock starts. So the floor is exactly the SQL
 *   the store sends minus the JavaScript.
 * - One round trip: a bare `SELECT 1` on the same client.
 */
import {
  migrateFleetStore,
  PgHandle,
  type PgClient,
  type PostgresJournalStore,
} from '@stepbind/runtime/fleet';
import { row, spread, type BenchRow } from './support.js';

const SUITE = 'fleet';

/** p25, p50 and p75 of one round's per-call samples (µs). */
export interface Quartiles {
  readonly p25: number;
  readonly p50: number;
  readonly p75: number;
}

/** Quartiles of `values` (nearest rank; the p50 is {@link spread}'s median). */
export function quartiles(values: readonly number[]): Quartiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number): number =>
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? NaN;
  return { p25: at(0.25), p50: spread(values).median, p75: at(0.75) };
}

/** One keyed call's two group strings, as the store sent them, and the chain values in them. */
interface Captured {
  readonly key: string;
  readonly insert: string;
  readonly completion: string;
  readonly seq: number;
  readonly prev: string;
  readonly digest: string;
}

/**
 * Runs one keyed call (`run(key)`) with `PgHandle.statements` wrapped, and returns its two group
 * strings; throws unless the call sent exactly two (the `SENT` group and the completion group).
 */
export async function captureKeyedCall(
  run: (key: string) => Promise<unknown>,
  store: PostgresJournalStore,
  key: string,
): Promise<Captured> {
  const sent: string[] = [];
  const proto = PgHandle.prototype;
  const original = Object.getOwnPropertyDescriptor(proto, 'statements')!;
  type Statements = PgHandle['statements'];
  const send = original.value as (
    this: PgHandle,
    ...args: Parameters<Statements>
  ) => ReturnType<Statements>;
  proto.statements = function (this: PgHandle, client, list) {
    sent.push(list.join(';\n'));
    return send.call(this, client, list);
  };
  try {
    await run(key);
  } finally {
    Object.defineProperty(proto, 'statements', original);
  }
  const [insert, completion] = sent;
  if (sent.length !== 2 || insert === undefined || completion === undefined) {
    throw new Error(`fleet-floor: a keyed call sent ${sent.length} group strings, expected 2`);
  }
  if (!insert.includes('INSERT INTO records') || !completion.includes('INSERT INTO receipts')) {
    throw new Error(`fleet-floor: unexpected group strings:\n${insert}\n${completion}`);
  }
  const receipt = (await store.readReceipts({ key })).at(-1);
  if (receipt === undefined) throw new Error('fleet-floor: the captured call left no receipt');
  return {
    key,
    insert,
    completion,
    seq: receipt.seq,
    prev: receipt.prevDigest,
    digest: receipt.digest,
  };
}

/** A chain head: the sequence number and digest of the newest receipt. */
interface Head {
  seq: number;
  digest: string;
}

/**
 * Makes the captured strings with a fresh key and chain values. Each value the store put in them
 * (the key, the receipt's digest, the previous digest, the sequence number as a literal and in the
 * head guard `seq = <n> - 1`) becomes a placeholder, which must occur.
 */
function templates(c: Captured): (key: string, head: Head, digest: string) => [string, string] {
  const slots = [c.key, c.digest, c.prev, `(${c.seq})::bigint`, `seq = ${c.seq} - 1`] as const;
  const mark = (text: string, at: readonly number[]): string => {
    let out = text;
    for (const i of at) {
      const pieces = out.split(slots[i]!);
      if (pieces.length < 2) throw new Error(`fleet-floor: ${slots[i]} not found in ${text}`);
      out = pieces.join(String.fromCharCode(1 + i));
    }
    return out;
  };
  // A write before a send may carry its caller's deadline on the database's clock (a literal
  // `(<ms>)::float8` in its guard): moved far ahead, same length, so a replay is never refused.
  const ahead = (text: string): string =>
    text.replace(/\((\d+)\)::float8/g, (_, ms: string) => `(${'9'.repeat(ms.length)})::float8`);
  const insert = mark(ahead(c.insert), [0]);
  const completion = mark(ahead(c.completion), [0, 1, 2, 3, 4]);
  const fill = (text: string, values: readonly string[]): string =>
    values.reduce((out, value, i) => out.split(String.fromCharCode(1 + i)).join(value), text);
  return (key, head, digest) => {
    const seq = head.seq + 1;
    return [
      fill(insert, [key]),
      fill(completion, [key, digest, head.digest, `(${seq})::bigint`, `seq = ${seq} - 1`]),
    ];
  };
}

/** The floor: a raw client on its own schema, replaying the captured strings. */
export interface Floor {
  /** One round: `n` keyed calls' two commits, then `n` `SELECT 1`, each timed per call (µs). */
  round(n: number): Promise<FloorRound>;
  close(): Promise<void>;
}

/** One round's quartiles: two commits, each of them, one round trip. */
export interface FloorRound {
  readonly both: Quartiles;
  readonly insert: Quartiles;
  readonly completion: Quartiles;
  readonly trip: Quartiles;
}

/** Migrates `schema`, connects a raw client with the store's settings and readies the replay. */
export async function openFloor(url: string, schema: string, captured: Captured): Promise<Floor> {
  const handle = new PgHandle({ url, schema });
  await migrateFleetStore(handle);
  const client: PgClient = handle.client('stepbind-floor');
  client.on('error', () => undefined);
  await client.connect();
  const make = templates(captured);
  const { rows } = await client.query<{ seq: string; digest: string }>(
    'SELECT seq, digest FROM chain_head WHERE id = 1',
  );
  const head: Head = { seq: Number(rows[0]?.seq), digest: String(rows[0]?.digest) };
  const keyTail = captured.key.length;
  let made = 0;
  const times = async (n: number, fn: (i: number) => Promise<void>): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await fn(i);
      out.push((performance.now() - t) * 1000);
    }
    return out;
  };
  return {
    async round(n) {
      // Every string built before the clock starts: the timed loop is the driver alone.
      const strings: [string, string][] = [];
      for (let i = 0; i < n; i++) {
        made++;
        const key = `f${made}-${process.pid}`.padEnd(keyTail, 'x');
        const digest = (made * 7919).toString(16).padStart(captured.digest.length, 'a');
        strings.push(make(key, head, digest));
        head.seq++;
        head.digest = digest;
      }
      const inserts: number[] = [];
      const completions: number[] = [];
      const both = await times(n, async (i) => {
        const [insert, completion] = strings[i]!;
        const t0 = performance.now();
        const a = (await client.query(insert)) as unknown as { rowCount: number | null }[];
        const t1 = performance.now();
        const b = (await client.query(completion)) as unknown as { rowCount: number | null }[];
        inserts.push((t1 - t0) * 1000);
        completions.push((performance.now() - t1) * 1000);
        // The insert and the chain head's update each changed one row, or the replay is wrong.
        if (a[1]?.rowCount !== 1 || b[2]?.rowCount !== 1) {
          throw new Error(
            `fleet-floor: a replayed string changed nothing:\n${insert}\n${completion}`,
          );
        }
      });
      const trip = await times(n, async () => {
        await client.query('SELECT 1');
      });
      return {
        both: quartiles(both),
        insert: quartiles(inserts),
        completion: quartiles(completions),
        trip: quartiles(trip),
      };
    },
    async close() {
      await client.end();
      await handle.close();
    },
  };
}

/**
 * The floor's rows, and the store's keyed overhead set against it: `overhead` holds each round's
 * keyed overhead quartiles (PostgreSQL store less no store, quartile by quartile), `rounds` each
 * round's floor.
 */
export function floorRows(
  overhead: readonly Quartiles[],
  rounds: readonly FloorRound[],
  calls: number,
): BenchRow[] {
  const of = (list: readonly Quartiles[], q: keyof Quartiles): number[] => list.map((x) => x[q]);
  const pick = (f: (r: FloorRound) => Quartiles): Quartiles[] => rounds.map(f);
  const both = pick((r) => r.both);
  const trip = pick((r) => r.trip);
  const perRound = (f: (o: Quartiles, r: FloorRound) => number): number[] =>
    overhead.map((o, i) => (rounds[i] === undefined ? NaN : f(o, rounds[i])));
  return [
    row(SUITE, 'overhead per keyed call, PostgreSQL store, p25', 'µs', of(overhead, 'p25'), {
      note: 'the round p25 (p75) of keyed calls with the store less that of the no-store side',
    }),
    row(SUITE, 'overhead per keyed call, PostgreSQL store, p75', 'µs', of(overhead, 'p75')),
    row(SUITE, 'floor: two commits of a keyed call, raw pg, p50', 'µs', of(both, 'p50'), {
      note: `one keyed call's SENT group string and completion group string as the store sent them, replayed under fresh keys on a raw pg client (the store's settings, a freshly migrated schema), one round trip each; ${calls} per round, interleaved with the calls`,
    }),
    row(SUITE, 'floor: two commits of a keyed call, raw pg, p25', 'µs', of(both, 'p25')),
    row(SUITE, 'floor: two commits of a keyed call, raw pg, p75', 'µs', of(both, 'p75')),
    row(
      SUITE,
      'floor: SENT insert commit, p50',
      'µs',
      of(
        pick((r) => r.insert),
        'p50',
      ),
    ),
    row(
      SUITE,
      'floor: completion commit, p50',
      'µs',
      of(
        pick((r) => r.completion),
        'p50',
      ),
    ),
    row(SUITE, 'one round trip (SELECT 1), raw pg, p50', 'µs', of(trip, 'p50'), {
      note: `a bare SELECT 1 on the floor's client, ${calls} per round`,
    }),
    row(SUITE, 'one round trip (SELECT 1), raw pg, p25', 'µs', of(trip, 'p25')),
    row(SUITE, 'one round trip (SELECT 1), raw pg, p75', 'µs', of(trip, 'p75')),
    row(
      SUITE,
      "store's own cost per keyed call: overhead − floor, p50",
      'µs',
      perRound((o, r) => o.p50 - r.both.p50),
      { note: 'per round: the keyed overhead p50 less the same round’s floor p50' },
    ),
    row(
      SUITE,
      'ratio keyed overhead / floor, p50',
      '×',
      perRound((o, r) => o.p50 / r.both.p50),
    ),
    row(
      SUITE,
      'ratio floor / one round trip, p50',
      '×',
      rounds.map((r) => r.both.p50 / r.trip.p50),
    ),
  ];
}
