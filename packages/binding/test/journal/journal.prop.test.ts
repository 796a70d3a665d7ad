/**
 * Property: the execution journal, driven by several holders (processes) sharing one store over
 * arbitrary key reuse, conflicting payloads, edited tool descriptors, concurrent same-key runs, holder deaths (known dead, or
 * silent so that only the in-progress expiry frees the key), clock advances, resolutions and
 * pruning, agrees with an independent oracle on every decision (and every refusal's delivery),
 * every state and the receipts count; a key that may have run is never refused as `not-sent`; a non-read key never reaches the server twice within one life of the key, and a replay
 * returns exactly what the first run returned.
 */
import fc from 'fast-check';
import {
  CallError,
  CallJournal,
  MemoryJournalStore,
  type BeginResult,
  type CallContext,
  type CallIntent,
  type JournalClaim,
  type LateDecision,
  type JournalRecord,
  type JournalStore,
  type ToolCallResult,
  toToolResult,
} from '@stepbind/binding/internal';
import { describe, expect, it } from 'vitest';
import { callReceipt, context, ErrorCode, failure } from '../support/journal.js';

const seed = Number(process.env['STEPBIND_SEED'] ?? Date.now() % 2_147_483_647);
const numRuns = Number(process.env['STEPBIND_RUNS'] ?? 150);
console.log(`journal.prop: seed=${seed} numRuns=${numRuns} (replay: STEPBIND_SEED=${seed})`);

const RETENTION = 10_000;
const TTL = 1_000;
const TIMEOUT = 500;
const KEYS = ['k1', 'k2', 'k3'] as const;
type Key = (typeof KEYS)[number];
/** k3 calls a `read` tool on a server with `retryReads`. */
const toolOf = (key: Key): string => (key === 'k3' ? 'read_doc' : 'write_doc');

type Behaviour =
  | 'ok'
  | 'tool-error'
  | 'answered-error'
  | 'lost'
  | 'unsent'
  | 'refused'
  | 'die-after-intent'
  | 'die-after-sent';

/** How a run claims its key: an `INTENT` write, deferred to `SENT`, or also decided late. */
type Claiming = 'write' | 'defer' | 'late';
const arbClaiming = fc.constantFrom<Claiming>('write', 'defer', 'late');

type Command =
  | {
      readonly kind: 'run';
      readonly holder: number;
      readonly key: Key;
      readonly payload: string;
      /** The tool's descriptor (`d2`: its description was edited). */
      readonly descriptor: string;
      readonly behaviour: Behaviour;
      readonly death: 'known' | 'silent';
      /**
       * `defer`: the claim is written only as SENT (a run without a prepare hook); `late`: also
       * read only when that write loses or the run is refused before it (DESIGN §21.6).
       */
      readonly defer: Claiming;
    }
  | {
      readonly kind: 'concurrent';
      readonly holders: readonly [number, number];
      readonly key: Key;
      readonly payloads: readonly [string, string];
      readonly descriptors: readonly [string, string];
      readonly defers: readonly [Claiming, Claiming];
    }
  | { readonly kind: 'advance'; readonly ms: number }
  | {
      readonly kind: 'resolve';
      readonly holder: number;
      readonly key: Key;
      readonly outcome: 'ran' | 'not-run';
    }
  | { readonly kind: 'recover'; readonly holder: number }
  | { readonly kind: 'prune'; readonly holder: number };

const arbKey = fc.constantFrom(...KEYS);
const arbPayload = fc.constantFrom('a', 'b');
const arbDescriptor = fc.constantFrom('d1', 'd2');
const arbHolder = fc.integer({ min: 0, max: 1 });
const arbCommand: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('run' as const),
      holder: arbHolder,
      key: arbKey,
      payload: arbPayload,
      descriptor: arbDescriptor,
      behaviour: fc.constantFrom<Behaviour>(
        'ok',
        'ok',
        'tool-error',
        'answered-error',
        'lost',
        'unsent',
        'refused',
        'die-after-intent',
        'die-after-sent',
      ),
      death: fc.constantFrom<'known' | 'silent'>('known', 'silent'),
      defer: arbClaiming,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('concurrent' as const),
      holders: fc.tuple(arbHolder, arbHolder),
      key: arbKey,
      payloads: fc.tuple(arbPayload, arbPayload),
      descriptors: fc.tuple(arbDescriptor, arbDescriptor),
      defers: fc.tuple(arbClaiming, arbClaiming),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('advance' as const),
      ms: fc.constantFrom(100, 700, 1_600, 4_000, 12_000),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('resolve' as const),
      holder: arbHolder,
      key: arbKey,
      outcome: fc.constantFrom<'ran' | 'not-run'>('ran', 'not-run'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('recover' as const), holder: arbHolder }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('prune' as const), holder: arbHolder }) },
);

// ---------------------------------------------------------------------------------------------
// The oracle: the rules of issue 10 (and issue 25: the key's state decides first) restated over
// plain data, sharing no code with CallJournal.

type OState = 'INTENT' | 'SENT' | 'COMPLETED' | 'NOT_SENT' | 'OUTCOME_UNKNOWN';
interface OKey {
  state: OState;
  payload: string;
  descriptor: string;
  owner: string;
  leaseUntil: number;
  /** COMPLETED / NOT_SENT only. */
  expiresAt: number | undefined;
  /** What a replay must return (a result, or the error code answered). */
  stored: ToolCallResult | string | undefined;
}
type Decision =
  'claimed' | 'replay' | 'IDEMPOTENCY_CONFLICT' | 'IDEMPOTENCY_IN_PROGRESS' | 'OUTCOME_UNKNOWN';
/** A decision and, for a refusal, what it must say about the key's delivery. */
interface Verdict {
  readonly decision: Decision;
  readonly delivery?: 'sent' | 'not-sent';
}

class Oracle {
  now = 1_000_000;
  readonly keys = new Map<Key, OKey>();
  /** Owners whose death is known (same host, process gone). */
  readonly knownDead = new Set<string>();
  /** `at` of every receipt expected in the chain, oldest first. */
  receipts: number[] = [];
  /**
   * Lives of each key: a key may reach the server once per life; a new life starts when a key is
   * first used, when an expired record is reused, and with each not-run decision.
   */
  readonly lives = new Map<Key, number>();

  #newLife(key: Key): void {
    this.lives.set(key, (this.lives.get(key) ?? 0) + 1);
  }

  #expired(r: OKey): boolean {
    return r.expiresAt !== undefined && r.expiresAt <= this.now;
  }

  /** A dead or expired holder's key moves on: INTENT → NOT_SENT, SENT → OUTCOME_UNKNOWN. */
  #settle(key: Key, r: OKey, self: string, inFlight: ReadonlySet<string>): boolean {
    if (r.state !== 'INTENT' && r.state !== 'SENT') return false;
    const alive =
      r.owner === self
        ? inFlight.has(key)
        : !this.knownDead.has(r.owner) && r.leaseUntil > this.now;
    if (alive) return false;
    if (r.state === 'INTENT') {
      r.state = 'NOT_SENT';
      r.expiresAt = this.now + RETENTION;
    } else {
      r.state = 'OUTCOME_UNKNOWN';
      r.expiresAt = undefined;
    }
    this.receipts.push(this.now);
    return true;
  }

  /**
   * The key's state first: only a key that never reached the server (`NOT_SENT`) may be refused
   * as not sent. Other arguments are a conflict in every state; an edited descriptor alone is a
   * conflict for `NOT_SENT`, a replay for `COMPLETED`, and changes nothing for a key in progress
   * or of unknown outcome (but a read is not retried under another descriptor).
   */
  decide(
    key: Key,
    payload: string,
    descriptor: string,
    self: string,
    inFlight: ReadonlySet<string>,
  ): Verdict {
    const r = this.keys.get(key);
    if (r === undefined || this.#expired(r)) return { decision: 'claimed' };
    this.#settle(key, r, self, inFlight);
    const sentSide = r.state === 'NOT_SENT' ? 'not-sent' : 'sent';
    if (r.payload !== payload) return { decision: 'IDEMPOTENCY_CONFLICT', delivery: sentSide };
    const edited = r.descriptor !== descriptor;
    switch (r.state) {
      case 'COMPLETED':
        return { decision: 'replay' };
      case 'NOT_SENT':
        return edited
          ? { decision: 'IDEMPOTENCY_CONFLICT', delivery: 'not-sent' }
          : { decision: 'claimed' };
      case 'OUTCOME_UNKNOWN':
        return key === 'k3' && !edited
          ? { decision: 'claimed' }
          : { decision: 'OUTCOME_UNKNOWN', delivery: 'sent' };
      case 'INTENT':
      case 'SENT':
        return { decision: 'IDEMPOTENCY_IN_PROGRESS', delivery: 'sent' };
    }
  }

  /** A claim not written yet (deferred until its SENT write). */
  #pending: { key: Key; payload: string; descriptor: string; owner: string } | undefined;

  claim(key: Key, payload: string, descriptor: string, owner: string, defer: boolean): void {
    if (defer) {
      this.#pending = { key, payload, descriptor, owner };
      return;
    }
    this.#write(key, payload, descriptor, owner);
  }

  #write(key: Key, payload: string, descriptor: string, owner: string): void {
    const r = this.keys.get(key);
    if (r === undefined || this.#expired(r)) this.#newLife(key);
    this.keys.set(key, {
      state: 'INTENT',
      payload,
      descriptor,
      owner,
      leaseUntil: this.now + TTL,
      expiresAt: undefined,
      stored: undefined,
    });
  }

  /** The claimed run of `key` ended with `behaviour`. */
  finish(key: Key, behaviour: Behaviour, result: ToolCallResult | undefined): void {
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending !== undefined) {
      // A deferred claim writes nothing unless it gets as far as its SENT write.
      if (behaviour === 'refused') {
        this.receipts.push(this.now);
        return;
      }
      if (behaviour === 'die-after-intent') return;
      this.#write(pending.key, pending.payload, pending.descriptor, pending.owner);
    }
    const r = this.keys.get(key);
    if (r === undefined) throw new Error('oracle: finish without a claim');
    const sent = (): void => undefined;
    switch (behaviour) {
      case 'refused':
      case 'unsent':
        r.state = 'NOT_SENT';
        r.expiresAt = this.now + RETENTION;
        this.receipts.push(this.now);
        return;
      case 'die-after-intent':
        return;
      case 'die-after-sent':
        sent();
        r.state = 'SENT';
        r.leaseUntil = this.now + TIMEOUT + TTL;
        return;
      case 'ok':
      case 'tool-error':
        sent();
        r.state = 'COMPLETED';
        r.expiresAt = this.now + RETENTION;
        r.stored = result;
        this.receipts.push(this.now);
        return;
      case 'answered-error':
        sent();
        r.state = 'COMPLETED';
        r.expiresAt = this.now + RETENTION;
        r.stored = ErrorCode.SERVER_ERROR;
        this.receipts.push(this.now);
        return;
      case 'lost':
        sent();
        r.state = 'OUTCOME_UNKNOWN';
        r.expiresAt = undefined;
        this.receipts.push(this.now);
        return;
    }
  }

  resolve(
    key: Key,
    outcome: 'ran' | 'not-run',
    self: string,
  ): 'ok' | 'IDEMPOTENCY_CONFLICT' | 'IDEMPOTENCY_IN_PROGRESS' {
    const r = this.keys.get(key);
    if (r === undefined) return 'IDEMPOTENCY_CONFLICT';
    this.#settle(key, r, self, new Set());
    if (r.state === 'INTENT' || r.state === 'SENT') return 'IDEMPOTENCY_IN_PROGRESS';
    if (r.state !== 'OUTCOME_UNKNOWN') return 'IDEMPOTENCY_CONFLICT';
    r.state = outcome === 'ran' ? 'COMPLETED' : 'NOT_SENT';
    r.expiresAt = this.now + RETENTION;
    r.stored = outcome === 'ran' ? 'resolved' : undefined;
    if (outcome === 'not-run') this.#newLife(key);
    this.receipts.push(this.now);
    return 'ok';
  }

  recover(self: string): void {
    for (const [key, r] of this.keys) this.#settle(key, r, self, new Set());
  }

  prune(): void {
    for (const [key, r] of this.keys) if (this.#expired(r)) this.keys.delete(key);
    const cutoff = this.now - RETENTION;
    let drop = 0;
    while (drop < this.receipts.length && (this.receipts[drop] as number) < cutoff) drop++;
    this.receipts = this.receipts.slice(drop);
    // The store chains a prune receipt naming the new anchor in the same step.
    if (drop > 0) this.receipts.push(this.now);
  }
}

// ---------------------------------------------------------------------------------------------
// The system under test: CallJournal instances over one MemoryJournalStore.

/** Delegates to the store; while `scheduler` is set every call first waits for its turn. */
class SchedulingStore implements JournalStore {
  readonly location = 'memory (scheduled)';
  scheduler: fc.Scheduler | undefined;
  constructor(readonly inner: MemoryJournalStore) {}
  async #turn(label: string): Promise<void> {
    if (this.scheduler !== undefined) await this.scheduler.schedule(Promise.resolve(), label);
  }
  async get(...a: Parameters<JournalStore['get']>) {
    await this.#turn(`get ${a[0]}`);
    return this.inner.get(...a);
  }
  async insert(...a: Parameters<JournalStore['insert']>) {
    await this.#turn(`insert ${a[0].key}`);
    return this.inner.insert(...a);
  }
  async update(...a: Parameters<JournalStore['update']>) {
    await this.#turn(`update ${a[0].key} → ${a[0].state}`);
    return this.inner.update(...a);
  }
  appendReceipt(...a: Parameters<JournalStore['appendReceipt']>) {
    return this.inner.appendReceipt(...a);
  }
  listRecords(...a: Parameters<JournalStore['listRecords']>) {
    return this.inner.listRecords(...a);
  }
  readReceipts(...a: Parameters<JournalStore['readReceipts']>) {
    return this.inner.readReceipts(...a);
  }
  anchor() {
    return this.inner.anchor();
  }
  prune(...a: Parameters<JournalStore['prune']>) {
    return this.inner.prune(...a);
  }
  close() {
    return this.inner.close();
  }
}

interface Holder {
  journal: CallJournal;
  readonly inFlight: Set<string>;
}

class System {
  readonly store = new SchedulingStore(new MemoryJournalStore({ maxReceipts: 1_000_000 }));
  readonly oracle = new Oracle();
  readonly holders: Holder[] = [];
  /** Owners whose process is gone and whose host says so. */
  readonly knownDead = new Set<string>();
  #owners = 0;
  /** Requests that reached the server, per key. */
  readonly sends = new Map<Key, number>();

  constructor() {
    for (let i = 0; i < 2; i++) this.holders.push(this.#newHolder());
  }

  #newHolder(): Holder {
    const journal = new CallJournal(this.store, {
      owner: `holder-${++this.#owners}`,
      retentionMs: RETENTION,
      inProgressTtlMs: TTL,
      pruneIntervalMs: Number.MAX_SAFE_INTEGER,
      now: () => this.oracle.now,
      isOwnerAlive: (owner) => (this.knownDead.has(owner) ? false : undefined),
    });
    return { journal, inFlight: new Set() };
  }

  /** The holder dies mid-run: nothing more is written by it; a new process takes its slot. */
  die(index: number, death: 'known' | 'silent'): void {
    const holder = this.holders[index] as Holder;
    if (death === 'known') {
      this.knownDead.add(holder.journal.owner);
      this.oracle.knownDead.add(holder.journal.owner);
    }
    this.holders[index] = this.#newHolder();
  }

  intent(
    key: Key,
    payload: string,
    descriptor: string,
  ): { key: Key; context: CallContext; argsDigest: string; retryReads: boolean } {
    return {
      key,
      context: { ...context(toolOf(key)), descriptorDigest: `sha256:${toolOf(key)}:${descriptor}` },
      argsDigest: `sha256:${payload}`,
      retryReads: true,
    };
  }

  /** A run whose late claim the key decided otherwise: replayed, or refused. */
  async #decidedLate(
    journal: CallJournal,
    intent: CallIntent,
    claim: JournalClaim,
    decided: LateDecision,
  ): Promise<{ begun: BeginResult; replayed?: ToolCallResult | string }> {
    if (decided.kind === 'resume') throw new Error('no run of this property creates a task');
    if (decided.kind === 'refused') {
      await journal.fail(claim, intent.context, decided.error, {
        argsDigest: intent.argsDigest,
        key: intent.key,
      });
      return { begun: decided };
    }
    await journal.replayed(decided.record, intent.context);
    const o = decided.outcome;
    return { begun: decided, replayed: o.kind === 'result' ? o.result : o.code };
  }

  /** One run through the journal, as PreparedCall.run drives it. */
  async run(
    index: number,
    key: Key,
    payload: string,
    descriptor: string,
    behaviour: Behaviour,
    defer: Claiming,
  ): Promise<{ begun: BeginResult; result?: ToolCallResult; replayed?: ToolCallResult | string }> {
    const holder = this.holders[index] as Holder;
    const journal = holder.journal;
    const intent = this.intent(key, payload, descriptor);
    expect(journal.start()).toBe(true);
    const late = defer === 'late';
    const begun = await journal.begin(intent, { deferWrite: defer !== 'write', decideLate: late });
    if (begun.kind === 'refused') {
      await journal.fail(undefined, intent.context, begun.error, {
        argsDigest: intent.argsDigest,
        key,
      });
      return { begun };
    }
    if (begun.kind === 'replay') {
      await journal.replayed(begun.record, intent.context);
      const o = begun.outcome;
      return { begun, replayed: o.kind === 'result' ? o.result : o.code };
    }
    const claim = begun.claim;
    holder.inFlight.add(key);
    try {
      if (behaviour === 'refused') {
        // A claim that read nothing: the key's state decides before the run's own refusal.
        const decided = late ? await journal.decideUnsent(claim) : undefined;
        if (decided !== undefined) return this.#decidedLate(journal, intent, claim, decided);
        await journal.fail(claim, intent.context, failure(ErrorCode.STALE_CATALOG, 'not-sent'), {
          argsDigest: intent.argsDigest,
          key,
        });
        return { begun };
      }
      if (behaviour === 'die-after-intent') return { begun };
      try {
        const decided = await journal.markSent(claim, TIMEOUT);
        if (decided !== undefined) return this.#decidedLate(journal, intent, claim, decided);
      } catch (error) {
        // A deferred claim overtaken by another holder: refused at its SENT write.
        if (!(error instanceof CallError)) throw error;
        await journal.fail(claim, intent.context, error, { argsDigest: intent.argsDigest, key });
        return { begun: { kind: 'refused', error } };
      }
      if (behaviour === 'unsent') {
        await journal.fail(
          claim,
          intent.context,
          failure(ErrorCode.CONNECTION_CLOSED, 'not-sent'),
          {
            argsDigest: intent.argsDigest,
            key,
          },
        );
        return { begun };
      }
      // The request reaches the server.
      this.sends.set(key, (this.sends.get(key) ?? 0) + 1);
      if (behaviour === 'die-after-sent') return { begun };
      if (behaviour === 'ok' || behaviour === 'tool-error') {
        const result: ToolCallResult = {
          content: [{ type: 'text', text: `${key}:${payload}:${this.oracle.now}` }],
          ...(behaviour === 'tool-error' ? { isError: true } : {}),
        };
        await journal.complete(claim, { result, receipt: callReceipt(intent.context, key) });
        return { begun, result };
      }
      const error =
        behaviour === 'answered-error'
          ? failure(ErrorCode.SERVER_ERROR, 'sent', { rpcCode: -32603 })
          : failure(ErrorCode.OUTCOME_UNKNOWN, 'sent');
      await journal.fail(claim, intent.context, error, { argsDigest: intent.argsDigest, key });
      return { begun };
    } finally {
      holder.inFlight.delete(key);
    }
  }
}

function expectReplay(replayed: unknown, stored: ToolCallResult | string | undefined): void {
  if (stored === 'resolved') {
    expect(JSON.stringify(replayed)).toContain('confirmed');
  } else {
    expect(replayed).toEqual(stored);
  }
}

const decisionOf = (begun: BeginResult): Decision =>
  begun.kind === 'refused' ? (begun.error.code as Decision) : begun.kind;

/** What a refusal says about delivery; a key refused as `sent` is never advised a new key. */
function deliveryOf(begun: BeginResult): 'sent' | 'not-sent' | undefined {
  if (begun.kind !== 'refused') return undefined;
  const error = begun.error;
  if (error.delivery === 'sent') {
    expect(error.message).not.toMatch(/use a new key|was not run\. Use/i);
    expect(toToolResult(error).content[0].text).not.toMatch(/make it again as a new tool call/i);
  }
  return error.delivery;
}

async function check(system: System): Promise<void> {
  const { oracle } = system;
  for (const key of KEYS) {
    const record: JournalRecord | undefined = await system.store.inner.get(key);
    const expected = oracle.keys.get(key);
    expect(record?.state, `state of ${key}`).toBe(expected?.state);
    if (key !== 'k3') {
      expect(system.sends.get(key) ?? 0, `sends of ${key}`).toBeLessThanOrEqual(
        oracle.lives.get(key) ?? 0,
      );
    }
  }
  const receipts = await system.store.inner.readReceipts();
  expect(receipts.length, 'receipts kept').toBe(oracle.receipts.length);
  expect((await system.holders[0]?.journal.verify())?.ok).toBe(true);
}

describe('CallJournal against an independent oracle (property)', () => {
  it('agrees on every decision, state and receipt; never sends a write key twice; replays equal originals', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(arbCommand, { minLength: 1, maxLength: 40 }),
        fc.scheduler(),
        async (commands, s) => {
          const system = new System();
          const { oracle } = system;
          for (const command of commands) {
            switch (command.kind) {
              case 'advance':
                oracle.now += command.ms;
                break;
              case 'run': {
                const holder = system.holders[command.holder] as Holder;
                const self = holder.journal.owner;
                if (command.defer === 'late' && command.behaviour === 'die-after-intent') {
                  // Dies before its SENT write with a claim that read nothing: the key was
                  // neither decided nor touched (no recovery, no receipt).
                  const outcome = await system.run(
                    command.holder,
                    command.key,
                    command.payload,
                    command.descriptor,
                    command.behaviour,
                    command.defer,
                  );
                  expect(outcome.begun.kind, JSON.stringify(command)).toBe('claimed');
                  system.die(command.holder, command.death);
                  break;
                }
                const verdict = oracle.decide(
                  command.key,
                  command.payload,
                  command.descriptor,
                  self,
                  holder.inFlight,
                );
                const predicted = verdict.decision;
                const outcome = await system.run(
                  command.holder,
                  command.key,
                  command.payload,
                  command.descriptor,
                  command.behaviour,
                  command.defer,
                );
                expect(decisionOf(outcome.begun), `${JSON.stringify(command)}`).toBe(predicted);
                expect(deliveryOf(outcome.begun), `delivery: ${JSON.stringify(command)}`).toBe(
                  verdict.delivery,
                );
                if (predicted === 'claimed') {
                  oracle.claim(
                    command.key,
                    command.payload,
                    command.descriptor,
                    self,
                    command.defer !== 'write',
                  );
                  if (!command.behaviour.startsWith('die')) {
                    oracle.finish(command.key, command.behaviour, outcome.result);
                  } else {
                    oracle.finish(command.key, command.behaviour, undefined);
                    system.die(command.holder, command.death);
                  }
                } else {
                  oracle.receipts.push(oracle.now);
                  if (predicted === 'replay')
                    expectReplay(outcome.replayed, oracle.keys.get(command.key)?.stored);
                }
                break;
              }
              case 'concurrent': {
                const [a, b] = command.holders;
                // Each run's decision alone (settling a dead holder's key first, as the journals will).
                const alone = command.payloads.map(
                  (p, i) =>
                    oracle.decide(
                      command.key,
                      p,
                      command.descriptors[i] as string,
                      'nobody',
                      new Set(),
                    ).decision,
                );
                const stored = oracle.keys.get(command.key)?.stored;
                system.store.scheduler = s;
                const runs = Promise.all([
                  system.run(
                    a,
                    command.key,
                    command.payloads[0],
                    command.descriptors[0],
                    'ok',
                    command.defers[0],
                  ),
                  system.run(
                    b,
                    command.key,
                    command.payloads[1],
                    command.descriptors[1],
                    'ok',
                    command.defers[1],
                  ),
                ]);
                const outcomes = await s.waitFor(runs);
                system.store.scheduler = undefined;
                const decisions = outcomes.map((o) => decisionOf(o.begun));
                for (const o of outcomes) deliveryOf(o.begun);
                const label = `${JSON.stringify(command)} → ${decisions.join(', ')}`;
                const claimable = alone.filter((d) => d === 'claimed').length;
                expect(decisions.filter((d) => d === 'claimed').length, label).toBe(
                  Math.min(1, claimable),
                );
                const winner = decisions.indexOf('claimed');
                for (const [i, decision] of decisions.entries()) {
                  if (i === winner) continue;
                  if (winner !== -1 && alone[i] === 'claimed') {
                    // Both could claim: the loser saw the winner's record.
                    const same = command.payloads[i] === command.payloads[winner];
                    expect(
                      same ? ['IDEMPOTENCY_IN_PROGRESS', 'replay'] : ['IDEMPOTENCY_CONFLICT'],
                      label,
                    ).toContain(decision);
                  } else if (
                    winner !== -1 &&
                    command.payloads[i] === command.payloads[winner] &&
                    decision !== alone[i]
                  ) {
                    // Refused alone for its edited descriptor (or a read's unknown outcome), it
                    // may instead have seen the winner's record: the same call, running or done.
                    expect(['IDEMPOTENCY_IN_PROGRESS', 'replay'], label).toContain(decision);
                  } else {
                    expect(decision, label).toBe(alone[i]);
                    if (decision === 'replay') expectReplay(outcomes[i]?.replayed, stored);
                  }
                  oracle.receipts.push(oracle.now);
                }
                if (winner !== -1) {
                  const owner = (system.holders[command.holders[winner] as number] as Holder)
                    .journal.owner;
                  oracle.claim(
                    command.key,
                    command.payloads[winner] as string,
                    command.descriptors[winner] as string,
                    owner,
                    false,
                  );
                  oracle.finish(command.key, 'ok', outcomes[winner]?.result);
                  for (const [i, decision] of decisions.entries()) {
                    if (i !== winner && decision === 'replay') {
                      expectReplay(outcomes[i]?.replayed, outcomes[winner]?.result);
                    }
                  }
                }
                break;
              }
              case 'resolve': {
                const holder = system.holders[command.holder] as Holder;
                const predicted = oracle.resolve(
                  command.key,
                  command.outcome,
                  holder.journal.owner,
                );
                let actual: string = 'ok';
                try {
                  await holder.journal.resolve(command.key, {
                    outcome: command.outcome,
                    by: 'property',
                  });
                } catch (error) {
                  actual = (error as { code: string }).code;
                }
                expect(actual, JSON.stringify(command)).toBe(predicted);
                break;
              }
              case 'recover': {
                const holder = system.holders[command.holder] as Holder;
                oracle.recover(holder.journal.owner);
                await holder.journal.recover();
                break;
              }
              case 'prune': {
                oracle.prune();
                await (system.holders[command.holder] as Holder).journal.prune();
                break;
              }
            }
            await check(system);
          }
        },
      ),
      { seed, numRuns, endOnFailure: process.env['STEPBIND_SHRINK'] === undefined },
    );
  });
});
