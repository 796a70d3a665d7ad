/**
 * bench/fleet-calls: whole `PreparedCall.run` over in-memory transports with the PostgreSQL fleet
 * store versus the same calls without a store (the default in-memory journal), interleaved per
 * round in one run (issue 20, DESIGN §21.6 "Group commit of the fleet store"). Part of
 * `bench/fleet.ts`.
 *
 * Sides, each its own runtime and in-memory server, kept open across rounds:
 * - `none`: no store (unkeyed calls record nothing; keyed calls use the in-memory journal);
 * - `pg`: the PostgreSQL store with group commit;
 * - `pg, one commit per write`: the same store with `group.grouping = false`, every write its own
 *   transaction (the store before group commit, measured in the same rounds).
 *
 * Sequential: p50 per round of unkeyed and keyed calls (a fresh key per call); the overhead of the
 * store is `pg` less `none` (target ≤ 1.2 ms keyed). 64 in flight: calls/s of keyed calls (target
 * ≥ 0.60× `none`). Commits, record-read queries and round trips (counted at the driver: every
 * query on the store's pooled connections) per call, from the store's counters.
 *
 * In the same rounds, the floor of the keyed overhead (`bench/fleet-floor.ts`): the two commits of
 * one keyed call's strings replayed on a raw `pg` client, and one bare round trip.
 */
import { McpRuntime } from '@stepbind/runtime';
import type { PostgresJournalStore } from '@stepbind/runtime/fleet';
import { createInMemoryFleet } from '@stepbind/testkit';
import { captureKeyedCall, floorRows, openFloor, quartiles } from './fleet-floor.js';
import type { FloorRound, Quartiles } from './fleet-floor.js';
import { row, spread, type BenchRow } from './support.js';

const SUITE = 'fleet';
const IN_FLIGHT = 64;

interface Side {
  readonly name: string;
  readonly runtime: McpRuntime;
  readonly run: (key: string | undefined) => Promise<unknown>;
  readonly store: PostgresJournalStore | undefined;
  readonly close: () => Promise<void>;
}

export async function openSide(
  name: string,
  store: { readonly url: string; readonly schema: string } | undefined,
  grouping: boolean,
): Promise<Side> {
  const fleet = createInMemoryFleet({
    s: {
      scenario: 'fixture',
      fixture: {
        generations: [
          {
            pages: [
              {
                tools: [
                  {
                    name: 'echo',
                    inputSchema: { type: 'object' },
                    annotations: { readOnlyHint: true },
                  },
                ],
              },
            ],
          },
        ],
      },
    },
  });
  const runtime = await McpRuntime.open(fleet.config(), {
    connect: fleet.connect,
    approval: 'none',
    ...(store === undefined ? {} : { store }),
  });
  const journal = runtime.fleet?.journal;
  if (journal !== undefined) journal.group.grouping = grouping;
  const step = await runtime.captureBinding();
  const call = step.prepareCall('s__echo');
  return {
    name,
    runtime,
    store: journal,
    run: (key) => call.run({}, key === undefined ? {} : { idempotencyKey: key }),
    close: async () => {
      await step[Symbol.asyncDispose]();
      await runtime.close();
      await fleet.close();
    },
  };
}

let keys = 0;
const freshKey = (): string => `k${process.pid}-${++keys}`;

/** p25, p50 and p75 of `n` sequential calls, in µs. */
async function sequential(side: Side, n: number, keyed: boolean): Promise<Quartiles> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const key = keyed ? freshKey() : undefined;
    const t = performance.now();
    await side.run(key);
    out.push((performance.now() - t) * 1000);
  }
  return quartiles(out);
}

/** `total` keyed calls with 64 in flight; calls per second. */
export async function concurrent(side: Side, total: number): Promise<number> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < total) {
      next++;
      await side.run(freshKey());
    }
  };
  const t = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  return (total / (performance.now() - t)) * 1000;
}

/** The call rows of `bench/fleet.ts`. */
export async function runFleetCallBench(
  url: string,
  schema: (prefix: string) => string,
  options: { readonly rounds?: number; readonly calls?: number; readonly concurrentCalls?: number },
): Promise<BenchRow[]> {
  const rounds = options.rounds ?? 5;
  const calls = options.calls ?? 200;
  const total = options.concurrentCalls ?? 640;
  const none = await openSide('none', undefined, true);
  const pg = await openSide('pg', { url, schema: schema('calls') }, true);
  const one = await openSide('pg-one', { url, schema: schema('calls1') }, false);
  const sides = [none, pg, one];
  const closers: (() => Promise<void>)[] = [];
  const keyedQ = new Map<Side, Quartiles[]>();
  const floorRounds: FloorRound[] = [];
  const seq = new Map<string, number[]>();
  const rate = new Map<string, number[]>();
  const push = (m: Map<string, number[]>, k: string, v: number): void => {
    m.set(k, [...(m.get(k) ?? []), v]);
  };
  const counters = (side: Side) => ({
    commits: side.store?.commits ?? 0,
    reads: side.store?.reads.queries ?? 0,
    // Undefined on a store without the counter (a "before" build): NaN rows.
    trips: (side.store as { roundTrips?: number } | undefined)?.roundTrips ?? NaN,
  });
  const perCall = { seqCommits: 0, seqReads: 0, seqCalls: 0, seqTrips: 0, unkeyedTrips: 0 };
  const conc = new Map<
    string,
    { commits: number; calls: number; largest: number; trips: number }
  >();
  try {
    // Warm-up: every side, both modes.
    for (const side of sides) {
      await sequential(side, 20, false);
      await sequential(side, 20, true);
      await concurrent(side, IN_FLIGHT * 2);
    }
    // The floor replays one real keyed call's strings (after the warm-up: the head is cached).
    const pgStore = pg.store;
    if (pgStore === undefined) throw new Error('the pg side has no store');
    const floor = await openFloor(
      url,
      schema('floor'),
      await captureKeyedCall((key) => pg.run(key), pgStore, freshKey()),
    );
    closers.push(() => floor.close());
    await floor.round(20);
    for (let r = 0; r < rounds; r++) {
      // The floor's round is one more side of the sequential rounds, reversed with them.
      const units = r % 2 === 0 ? [...sides, floor] : [floor, ...[...sides].reverse()];
      const order = r % 2 === 0 ? sides : [...sides].reverse();
      for (const side of units) {
        if (!('runtime' in side)) {
          floorRounds.push(await floor.round(calls));
          continue;
        }
        const start = counters(side);
        push(seq, `${side.name} unkeyed`, (await sequential(side, calls, false)).p50);
        const before = counters(side);
        const keyed = await sequential(side, calls, true);
        push(seq, `${side.name} keyed`, keyed.p50);
        keyedQ.set(side, [...(keyedQ.get(side) ?? []), keyed]);
        if (side === pg) {
          const after = counters(side);
          perCall.seqCommits += after.commits - before.commits;
          perCall.seqReads += after.reads - before.reads;
          perCall.seqTrips += after.trips - before.trips;
          perCall.unkeyedTrips += before.trips - start.trips;
          perCall.seqCalls += calls;
        }
      }
      for (const side of order) {
        const before = counters(side);
        push(rate, side.name, await concurrent(side, total));
        const seen = conc.get(side.name) ?? { commits: 0, calls: 0, largest: 0, trips: 0 };
        conc.set(side.name, {
          commits: seen.commits + counters(side).commits - before.commits,
          calls: seen.calls + total,
          largest: side.store?.group.largestGroup ?? 0,
          trips: seen.trips + counters(side).trips - before.trips,
        });
      }
    }
  } finally {
    for (const close of closers) await close();
    for (const side of sides) await side.close();
  }
  const med = (k: string, m = seq): number => spread(m.get(k) ?? []).median;
  const overhead = (keyed: boolean): number[] => {
    const suffix = keyed ? 'keyed' : 'unkeyed';
    const a = seq.get(`pg ${suffix}`) ?? [];
    const b = seq.get(`none ${suffix}`) ?? [];
    return a.map((v, i) => v - (b[i] ?? NaN));
  };
  const note = `in-memory transports, ${rounds} interleaved rounds × ${calls} sequential calls per side and mode; keyed calls take a fresh key each`;
  const concNote = `${IN_FLIGHT} keyed calls in flight, ${rounds} interleaved rounds × ${total} calls per side`;
  const commitsPer = (name: string): number => {
    const c = conc.get(name);
    return c === undefined ? NaN : c.commits / c.calls;
  };
  return [
    row(SUITE, 'sequential run, no store (unkeyed)', 'µs', seq.get('none unkeyed') ?? [], { note }),
    row(SUITE, 'sequential run, PostgreSQL store (unkeyed)', 'µs', seq.get('pg unkeyed') ?? [], {
      note: 'the run receipt: one transaction',
    }),
    row(SUITE, 'overhead per unkeyed call, PostgreSQL store', 'µs', overhead(false)),
    row(SUITE, 'ratio sequential unkeyed run PG / no store', '×', [
      med('pg unkeyed') / med('none unkeyed'),
    ]),
    row(
      SUITE,
      'sequential run, no store (keyed, in-memory journal)',
      'µs',
      seq.get('none keyed') ?? [],
    ),
    row(SUITE, 'sequential run, PostgreSQL store (keyed)', 'µs', seq.get('pg keyed') ?? []),
    row(SUITE, 'overhead per keyed call, PostgreSQL store', 'µs', overhead(true), {
      target: { op: '<=', value: 1200 },
      note: 'p50 of the round, less the no-store side of the same round',
    }),
    ...floorRows(
      (keyedQ.get(pg) ?? []).map((q, i) => {
        const base = keyedQ.get(none)?.[i];
        return {
          p25: q.p25 - (base?.p25 ?? NaN),
          p50: q.p50 - (base?.p50 ?? NaN),
          p75: q.p75 - (base?.p75 ?? NaN),
        };
      }),
      floorRounds,
      calls,
    ),
    row(SUITE, 'commits per sequential keyed call, PostgreSQL store', 'commits', [
      perCall.seqCommits / perCall.seqCalls,
    ]),
    row(SUITE, 'record-read queries per sequential keyed call, PostgreSQL store', 'queries', [
      perCall.seqReads / perCall.seqCalls,
    ]),
    row(SUITE, 'round trips per sequential unkeyed call, PostgreSQL store', 'round trips', [
      perCall.unkeyedTrips / perCall.seqCalls,
    ]),
    row(SUITE, 'round trips per sequential keyed call, PostgreSQL store', 'round trips', [
      perCall.seqTrips / perCall.seqCalls,
    ]),
    row(SUITE, `${IN_FLIGHT} in flight keyed, no store`, 'calls/s', rate.get('none') ?? [], {
      note: concNote,
    }),
    row(
      SUITE,
      `${IN_FLIGHT} in flight keyed, PostgreSQL store, group commit`,
      'calls/s',
      rate.get('pg') ?? [],
    ),
    row(
      SUITE,
      `${IN_FLIGHT} in flight keyed, PostgreSQL store, one commit per write`,
      'calls/s',
      rate.get('pg-one') ?? [],
      { note: 'the same store with group.grouping = false: every write its own transaction' },
    ),
    row(
      SUITE,
      `ratio ${IN_FLIGHT} in flight PG group commit / no store`,
      '×',
      [med('pg', rate) / med('none', rate)],
      { target: { op: '>=', value: 0.6 } },
    ),
    row(SUITE, `ratio ${IN_FLIGHT} in flight PG one commit per write / no store`, '×', [
      med('pg-one', rate) / med('none', rate),
    ]),
    row(
      SUITE,
      `commits per call, ${IN_FLIGHT} in flight, group commit`,
      'commits',
      [commitsPer('pg')],
      {
        note: `largest group ${conc.get('pg')?.largest ?? 0} writes`,
      },
    ),
    row(SUITE, `commits per call, ${IN_FLIGHT} in flight, one commit per write`, 'commits', [
      commitsPer('pg-one'),
    ]),
    row(SUITE, `round trips per call, ${IN_FLIGHT} in flight, group commit`, 'round trips', [
      (conc.get('pg')?.trips ?? NaN) / (conc.get('pg')?.calls ?? NaN),
    ]),
  ];
}
