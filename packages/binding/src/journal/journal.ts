import { randomUUID } from 'node:crypto';
import type { CallReceipt, ToolCallResult } from '../call/types.js';
import { CallError, ErrorCode, JournalError, type Delivery } from '../errors.js';
import { resultDigestOfText, verifyChain, type ChainVerification } from './chain.js';
import { JournalTime } from './clock.js';
import { checkCallJournalOptions, positive, type CallJournalOptions } from './options.js';
import { notSentError } from './unavailable.js';
import { claimLostError, writeSent } from './sent.js';
import {
  JournalClaim,
  signalOf,
  type Reservation,
  type BeginOptions,
  type BeginResult,
  type CallIntent,
  type LateDecision,
  type ResolveInput,
} from './claim.js';
import { contendedError, decideKey, IN_PROGRESS, MAX_ROUNDS, type Decider } from './decide.js';
import {
  conflictOf,
  inProgressError,
  keyMayHaveRun,
  decidedOrAborted,
  localRefusal,
  unresolvableError,
} from './rules.js';
import type {
  CallContext,
  JournalRecord,
  JournalStore,
  ReceiptBody,
  ReceiptEntry,
  StoreCallOptions,
} from './store.js';
import {
  completedRecord,
  failedRecord,
  failureReceipt,
  type FailureReceiptFields,
  intentRecord,
  recoveredRecord,
  replayReceipt,
  resolvedRecord,
  runReceipt,
} from './transitions.js';

export type { CallJournalOptions };

/**
 * The rules of durable execution over a {@link JournalStore} (DESIGN §13): idempotency keys with
 * `INTENT → SENT → COMPLETED | NOT_SENT | OUTCOME_UNKNOWN`, payload checks on every path, in-progress
 * expiry, recovery of dead holders' keys and the receipts chain. Every state change is a
 * compare-and-set on the record's version, so several processes may share one store.
 */
export class CallJournal {
  readonly store: JournalStore;
  /** This instance's holder id. */
  readonly owner: string;
  readonly retentionMs: number;
  readonly inProgressTtlMs: number;
  /** True when every run appends a receipt, false when only keyed runs do. */
  readonly recordsEveryRun: boolean;
  readonly #isOwnerAlive: (owner: string) => boolean | undefined;
  readonly #time: JournalTime;
  readonly #pruneIntervalMs: number;
  readonly #decider: Decider;
  /** Keys a run of this instance is claiming or holds, with the intent of that run. */
  readonly #inFlight = new Map<string, Reservation>();
  /** Keys this instance holds (claimed): its own records of these are in progress. */
  readonly #running = new Set<string>();
  #active = 0;
  #idle: (() => void) | undefined;
  #lastPrune: number;
  #closing: Promise<void> | undefined;

  constructor(store: JournalStore, options: CallJournalOptions = {}) {
    checkCallJournalOptions(options);
    this.store = store;
    this.owner = options.owner ?? `memory:${randomUUID()}`;
    this.retentionMs = positive(options.retentionMs ?? 86_400_000, 'retentionMs');
    this.inProgressTtlMs = positive(options.inProgressTtlMs ?? 600_000, 'inProgressTtlMs');
    this.#pruneIntervalMs = positive(options.pruneIntervalMs ?? 60_000, 'pruneIntervalMs');
    this.#isOwnerAlive = options.isOwnerAlive ?? (() => undefined);
    this.recordsEveryRun = (options.receipts ?? 'all') === 'all';
    this.#time = new JournalTime(store, options.now, options.clocks);
    this.#lastPrune = this.#now();
    this.#decider = {
      store,
      owner: this.owner,
      inProgressTtlMs: this.inProgressTtlMs,
      retentionMs: this.retentionMs,
      now: () => this.#now(),
      retentionNow: (io) => this.#time.retentionNow(io),
      leaseNow: () => this.#time.leaseNow(),
      holderAlive: (record, now) => this.#holderAlive(record, now),
      recover: (record, now, io) => this.#recoverRecord(record, now, io),
    };
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * Counts one run until its outcome is recorded ({@link complete}, {@link fail} or
   * {@link replayed} end it, exactly once), so {@link close} can wait for it.
   *
   * @returns false (nothing counted, nothing may be recorded) once the journal is closing.
   */
  start(): boolean {
    if (this.#closing !== undefined) return false;
    this.#active++;
    return true;
  }

  /**
   * Claims `intent.key` for one run, or says why not. The key's state decides first, then the
   * payload (server, tool, argument digest; the descriptor digest only for a `NOT_SENT` key), as
   * {@link conflictOf} and DESIGN §13 say: a key that may have run is never refused as not run.
   *
   * - held by a run of this process: refused at once (`IDEMPOTENCY_CONFLICT` or `_IN_PROGRESS`);
   * - no record or an expired one: claimed (an `INTENT` record is written, unless `deferWrite`:
   *   then {@link markSent} writes the claim directly as `SENT`); `NOT_SENT` with the same payload
   *   and descriptor: claimed again;
   * - with `decideLate`: claimed without reading the key; {@link markSent} or
   *   {@link decideUnsent} decide it by these rules when it is written or the run ends before;
   * - `COMPLETED`: `replay` with the stored outcome, also when only the descriptor changed;
   * - `INTENT`/`SENT` of a live holder within its expiry: `IDEMPOTENCY_IN_PROGRESS`; of a dead or
   *   expired holder: recovered first (to `NOT_SENT` or `OUTCOME_UNKNOWN`), then decided again;
   * - `OUTCOME_UNKNOWN`: `OUTCOME_UNKNOWN` with the record, unless the descriptor is unchanged and
   *   the tool is a `read` whose server allows `retryReads` (claimed again) or its task is known.
   *
   * @throws JournalError when the store fails.
   */
  async begin(intent: CallIntent, options: BeginOptions = {}): Promise<BeginResult> {
    const io = signalOf(options);
    // Runs of this process decide one at a time per key: a key being claimed is waited for, a key
    // held is refused (as in progress, or as a conflict with the stored record or the held run).
    for (;;) {
      const local = this.#inFlight.get(intent.key);
      if (local === undefined) break;
      if (!local.claimed) {
        const fired = await decidedOrAborted(local, intent, io.signal);
        if (fired !== undefined) return fired;
        continue;
      }
      const stored = await this.store.get(intent.key, io);
      const passed = await this.#time.retentionNow(io);
      const live = stored !== undefined && (stored.expiresAt === null || stored.expiresAt > passed);
      // The held run may send any moment: a stored NOT_SENT record of an earlier use says nothing.
      const conflict = live && keyMayHaveRun(stored.state) ? conflictOf(stored, intent) : undefined;
      return { kind: 'refused', error: conflict ?? localRefusal(local.intent, intent) };
    }
    let decide: () => void = () => undefined;
    const decided = new Promise<void>((resolve) => (decide = resolve));
    const reservation: Reservation = { intent, claimed: false, decided, decide };
    this.#inFlight.set(intent.key, reservation);
    // A claim that reads nothing is decided when it is written or its run ends before
    // (markSent, decideUnsent): until then a run of this process on the key waits, as it waits
    // for a claim being read.
    if (options.decideLate === true) return { kind: 'claimed', claim: this.#lateClaim(intent) };
    let result: BeginResult | undefined;
    try {
      result = await this.#begin(intent, options.deferWrite === true, io);
      if (result.kind === 'claimed') {
        reservation.claimed = true;
        this.#running.add(intent.key);
      }
      return result;
    } catch (error) {
      throw notSentError(error, intent);
    } finally {
      if (result?.kind !== 'claimed') this.#inFlight.delete(intent.key);
      decide();
    }
  }

  #begin(intent: CallIntent, defer: boolean, io: StoreCallOptions): Promise<BeginResult> {
    // Claims `record` over `expected` (the stored record, if any): written now, or deferred.
    return decideKey(
      this.#decider,
      intent,
      async (record, expected) => {
        if (defer) {
          const pending = { expectedVersion: expected?.version ?? null };
          return { kind: 'claimed', claim: new JournalClaim(record, intent, pending) };
        }
        const written =
          expected === undefined
            ? await this.store.insert(record, io)
            : (await this.store.update(record, expected.version, io)).ok;
        return written
          ? { kind: 'claimed', claim: new JournalClaim(record, intent, undefined) }
          : undefined;
      },
      io,
    );
  }

  /** A claim of `intent` that read nothing: decided when written, or when its run ends before. */
  #lateClaim(intent: CallIntent): JournalClaim {
    const record = intentRecord(this, intent, 1, 1, this.#now());
    return new JournalClaim(record, intent, { expectedVersion: null, late: true });
  }

  /**
   * Moves a claim to `SENT` with a durable write, just before the request is written. The claim's
   * expiry becomes `timeoutMs` plus the in-progress expiry. A claim begun with `decideLate` is
   * inserted as `SENT`; only when that insert loses is its key read and decided (DESIGN §21.6).
   *
   * @returns undefined once `SENT` is durable (send now); for a claim begun with `decideLate`, the
   *   key's decision instead: `replay` (send nothing, replay its outcome) or `resume` (poll the
   *   task in `claim.resumeTaskId`, send nothing).
   * @throws CallError `IDEMPOTENCY_IN_PROGRESS` (`detail.reason: 'claim-lost'`) when another holder
   *   took the key over meanwhile, or the refusal a late decision came to: the call must not be
   *   sent. JournalError when the store fails.
   */
  async markSent(
    claim: JournalClaim,
    timeoutMs: number,
    options: StoreCallOptions = {},
  ): Promise<Exclude<LateDecision, { readonly kind: 'refused' }> | undefined> {
    const io = signalOf(options);
    if (claim.pending?.late === true) return this.#markSentLate(claim, timeoutMs, io);
    if (!(await writeSent(this.#decider, claim, timeoutMs, io))) {
      claim.lost = true;
      throw await claimLostError(this.store, claim, io);
    }
    return undefined;
  }

  /** {@link markSent} of a claim that read nothing: insert; read and decide only if that lost. */
  async #markSentLate(
    claim: JournalClaim,
    timeoutMs: number,
    io: StoreCallOptions,
  ): Promise<Exclude<LateDecision, { readonly kind: 'refused' }> | undefined> {
    // Once tried, a failed write may have committed: not decided late, held unless decided so.
    claim.pending = { expectedVersion: null };
    let held = true;
    try {
      if (await writeSent(this.#decider, claim, timeoutMs, io)) return undefined;
      for (let round = 0; round < MAX_ROUNDS; round++) {
        const decided = await this.#decideLate(claim, io);
        if (decided.kind === 'claimed') {
          if (await writeSent(this.#decider, claim, timeoutMs, io)) return undefined;
          continue;
        }
        if (decided.kind === 'resume') return decided;
        held = false;
        if (decided.kind === 'replay') return decided;
        claim.lost = true;
        throw decided.error;
      }
      held = false;
      claim.lost = true;
      throw contendedError(claim.intent);
    } finally {
      this.#settle(claim, held);
    }
  }

  /**
   * Decides the key of a claim begun with `decideLate` whose run ended before its `SENT` write (a
   * refusal of the lock, admission, the arguments, the connection): the key's state decides first
   * (DESIGN §13), as if it had been read at `begin`. Nothing is written, except that a dead
   * holder's key is recovered.
   *
   * @returns undefined when the key could have been claimed (the run's own failure stands), else
   *   the key's decision: `replay`, `refused` (with the error the run ends with instead) or
   *   `resume`. Also undefined for any other claim, and when the store fails or the signal fired
   *   (nothing was sent; the run's own failure stands).
   */
  async decideUnsent(
    claim: JournalClaim,
    options: StoreCallOptions = {},
  ): Promise<LateDecision | undefined> {
    if (claim.pending?.late !== true) return undefined;
    claim.pending = { expectedVersion: null };
    let decided: LateDecision | { readonly kind: 'claimed' } | undefined;
    try {
      decided = await this.#decideLate(claim, signalOf(options));
      return decided.kind === 'claimed' ? undefined : decided;
    } catch {
      return undefined;
    } finally {
      // Only a task to resume holds the key on; the run ends otherwise (nothing written).
      this.#settle(claim, decided?.kind === 'resume');
    }
  }

  /**
   * Reads and decides the key of a late claim (the rules of {@link begin}); a claim it may take is
   * adopted by `claim` (deferred: nothing written), a replay releases the key.
   */
  async #decideLate(
    claim: JournalClaim,
    io: StoreCallOptions,
  ): Promise<LateDecision | { readonly kind: 'claimed' }> {
    let decided: BeginResult;
    try {
      decided = await this.#begin(claim.intent, true, io);
    } catch (error) {
      throw notSentError(error, claim.intent);
    }
    if (decided.kind !== 'claimed') return decided;
    const taken = decided.claim;
    claim.record = taken.record;
    claim.pending = taken.pending;
    claim.sentRecorded = taken.sentRecorded;
    claim.resumeTaskId = taken.resumeTaskId;
    return taken.resumeTaskId === undefined ? { kind: 'claimed' } : { kind: 'resume' };
  }

  /**
   * Records a call the server answered (`ok` or `tool-error`): the key becomes `COMPLETED` with
   * `result` and `receipt`, and `receipt` joins the chain in the same write. Without a claim only
   * the receipt is appended.
   *
   * @returns the appended receipt entry.
   * @throws JournalError when the store fails (the call did run; the key stays `SENT` and becomes
   *   `OUTCOME_UNKNOWN` at the next recovery).
   */
  async complete(
    claim: JournalClaim | undefined,
    outcome: { readonly result: ToolCallResult; readonly receipt: CallReceipt },
    options: StoreCallOptions = {},
  ): Promise<ReceiptEntry> {
    // The result is serialized once: for its digest and for the record's outcome column.
    const resultText = JSON.stringify(outcome.result);
    const resultDigest = resultDigestOfText(resultText);
    const body = runReceipt(outcome.receipt, claim, this.#now(), {
      outcome: outcome.receipt.outcome,
      delivery: 'sent',
      replayed: false,
      argsDigest: outcome.receipt.argsDigest ?? null,
      resultDigest,
    });
    return this.#record(
      claim,
      body,
      (record, now) => completedRecord(this, record, outcome, now, resultText),
      signalOf(options),
    );
  }

  /**
   * Records a run that failed or was refused: with a claim, the key becomes `NOT_SENT` (nothing
   * was written), `COMPLETED` with the error (the server answered with an error, or output that
   * failed validation) or `OUTCOME_UNKNOWN` (sent, no answer); the receipt joins the chain.
   *
   * @throws JournalError when the store fails.
   */
  async fail(
    claim: JournalClaim | undefined,
    context: CallContext,
    error: CallError,
    receipt: FailureReceiptFields,
    options: StoreCallOptions = {},
  ): Promise<ReceiptEntry> {
    const delivery: Delivery = claim?.sentRecorded === true ? error.delivery : 'not-sent';
    const body = failureReceipt(context, claim, error, receipt, this.#now());
    return this.#record(
      claim,
      body,
      (record, now) => failedRecord(this, record, error, delivery, now),
      signalOf(options),
    );
  }

  /**
   * Appends the receipt of a replayed run (nothing was sent).
   *
   * @throws JournalError when the store fails.
   */
  async replayed(
    record: JournalRecord,
    context: CallContext,
    options: StoreCallOptions = {},
  ): Promise<ReceiptEntry> {
    try {
      const body = replayReceipt(record, context, this.#now());
      return await this.store.appendReceipt(body, signalOf(options));
    } finally {
      this.#done();
    }
  }

  /**
   * Records a human or application decision about an `OUTCOME_UNKNOWN` key: `ran` makes it
   * `COMPLETED` (a repeat returns `result`), `not-run` makes it `NOT_SENT` (it may run again). A
   * `resolution` receipt joins the chain. A key left `INTENT`/`SENT` by a dead holder is recovered
   * first.
   *
   * @returns the new record.
   * @throws CallError `IDEMPOTENCY_IN_PROGRESS` while a live holder runs the key;
   *   `IDEMPOTENCY_CONFLICT` (`detail.reason`: `unknown-key`, `not-outcome-unknown`) for a key that
   *   does not exist or whose outcome is known. JournalError when the store fails.
   */
  async resolve(key: string, input: ResolveInput): Promise<JournalRecord> {
    this.#ensureOpen();
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const now = this.#now();
      const existing = await this.store.get(key);
      if (existing === undefined) {
        throw unresolvableError(this.store, key, undefined);
      }
      if (IN_PROGRESS.includes(existing.state)) {
        if (this.#holderAlive(existing, this.#time.leaseNow()))
          throw inProgressError(existing, existing.context);
        await this.#recoverRecord(existing, now, {});
        continue;
      }
      if (existing.state !== 'OUTCOME_UNKNOWN') {
        throw unresolvableError(this.store, key, existing);
      }
      const next = resolvedRecord(this, existing, input, now);
      const written = await this.store.update(next.record, existing.version, {
        receipt: next.receipt,
      });
      if (written.ok) return next.record;
    }
    throw new CallError(
      ErrorCode.IDEMPOTENCY_IN_PROGRESS,
      `Idempotency key "${key}" kept changing while it was being resolved; try again.`,
      { detail: { key, reason: 'contended', delivery: 'not-sent' } },
    );
  }

  /**
   * Finds keys left `INTENT`/`SENT` by dead holders (dead by `isOwnerAlive`, or past their
   * in-progress expiry) and moves them to `NOT_SENT` (`INTENT`: nothing was sent) or
   * `OUTCOME_UNKNOWN` (`SENT`: it may have been), each with a `recovery` receipt.
   *
   * @returns the records as recovered.
   * @throws JournalError when the store fails.
   */
  async recover(): Promise<readonly JournalRecord[]> {
    this.#ensureOpen();
    const recovered: JournalRecord[] = [];
    const now = this.#now();
    const leaseNow = this.#time.leaseNow();
    for (const record of await this.store.listRecords({ states: IN_PROGRESS })) {
      if (this.#holderAlive(record, leaseNow)) continue;
      const moved = await this.#recoverRecord(record, now, {});
      if (moved !== undefined) recovered.push(moved);
    }
    return Object.freeze(recovered);
  }

  /** The record of `key`, if any. */
  get(key: string): Promise<JournalRecord | undefined> {
    return this.store.get(key);
  }

  /** Checks the whole kept receipts chain (see {@link verifyChain}). */
  async verify(): Promise<ChainVerification> {
    return verifyChain(await this.store.anchor(), await this.store.readReceipts());
  }

  /**
   * Deletes expired `COMPLETED`/`NOT_SENT` records and receipts older than the retention. Runs by
   * itself at most every `pruneIntervalMs`, after a write.
   */
  async prune(): Promise<{ readonly records: number; readonly receipts: number }> {
    this.#lastPrune = this.#now();
    // Only what surely expired: a wall clock that jumped ahead does not count (see JournalTime).
    const now = await this.#time.retentionNow();
    const retentionMs = this.retentionMs;
    return this.store.prune({ now, receiptsBefore: now - retentionMs, retentionMs });
  }

  /**
   * Waits for every run holding a key of this journal to record its outcome, then closes the
   * store. Idempotent. New runs are refused from the first call on.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#active > 0) {
        await new Promise<void>((resolve) => {
          this.#idle = resolve;
        });
      }
      await this.store.close();
    })();
    return this.#closing;
  }

  #done(): void {
    this.#active--;
    if (this.#active === 0 && this.#idle !== undefined) {
      const idle = this.#idle;
      this.#idle = undefined;
      idle();
    }
  }

  async #record(
    claim: JournalClaim | undefined,
    body: ReceiptBody,
    next: (record: JournalRecord, now: number) => JournalRecord,
    io: StoreCallOptions,
  ): Promise<ReceiptEntry> {
    try {
      // Nothing of this run was written for the key (refused before a deferred claim was written,
      // or overtaken): only the receipt is recorded.
      if (claim === undefined || claim.lost || claim.pending !== undefined) {
        return await this.store.appendReceipt(body, io);
      }
      const now = this.#now();
      const current = claim.record;
      const record = { ...next(current, now), version: current.version + 1 };
      const written = await this.store.update(record, current.version, { receipt: body, ...io });
      if (written.ok && written.receipt !== undefined) {
        claim.record = record;
        return written.receipt;
      }
      // Another holder moved the key meanwhile (our SENT outlived its expiry and was recovered as
      // OUTCOME_UNKNOWN): a late answer of the same attempt still makes the outcome known.
      const moved = written.ok ? undefined : written.current;
      if (
        moved?.state === 'OUTCOME_UNKNOWN' &&
        moved.attempt === current.attempt &&
        moved.resolution === null
      ) {
        const late = { ...next(moved, now), version: moved.version + 1 };
        const again = await this.store.update(late, moved.version, { receipt: body, ...io });
        if (again.ok && again.receipt !== undefined) return again.receipt;
      }
      return await this.store.appendReceipt(body, io);
    } finally {
      if (claim !== undefined) this.#settle(claim, false);
      this.#done();
      if (this.#now() - this.#lastPrune >= this.#pruneIntervalMs) void this.#pruneQuietly();
    }
  }

  async #pruneQuietly(): Promise<void> {
    try {
      await this.prune();
    } catch {
      // Pruning is housekeeping; the next write tries again and a failing store reports there.
    }
  }

  /**
   * Ends the decision of `claim`'s reservation (a run of this process on the key waiting for it
   * goes on): `held`, the key is this run's until its outcome is recorded; else released. Only
   * this claim's own reservation is touched (a released key may already be another run's).
   */
  #settle(claim: JournalClaim, held: boolean): void {
    const { key } = claim;
    const reservation = this.#inFlight.get(key);
    if (reservation?.intent !== claim.intent) return;
    if (held) {
      reservation.claimed = true;
      this.#running.add(key);
    } else {
      this.#inFlight.delete(key);
      this.#running.delete(key);
    }
    reservation.decide();
  }

  #holderAlive(record: JournalRecord, now: number): boolean {
    if (record.owner === this.owner) return this.#running.has(record.key);
    if (this.#isOwnerAlive(record.owner) === false) return false;
    return record.leaseExpiresAt > now;
  }

  async #recoverRecord(
    record: JournalRecord,
    now: number,
    io: StoreCallOptions,
  ): Promise<JournalRecord | undefined> {
    const next = recoveredRecord(this, record, now);
    const written = await this.store.update(next.record, record.version, {
      receipt: next.receipt,
      ...io,
    });
    return written.ok ? next.record : undefined;
  }

  #now(): number {
    return this.#time.now();
  }

  #ensureOpen(): void {
    if (this.#closing !== undefined) {
      throw new JournalError(
        ErrorCode.JOURNAL_UNAVAILABLE,
        `The journal at ${this.store.location} is closed; open a new runtime.`,
        { detail: { path: this.store.location, reason: 'closed' } },
      );
    }
  }
}
