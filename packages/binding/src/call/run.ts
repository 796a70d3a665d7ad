/**
 * The private record of one `PreparedCall.run` (DESIGN §7, §13): what it has done so far.
 */
import type { JournalClaim } from '../journal/claim.js';
import type { CallJournal } from '../journal/journal.js';
import type { CallContext } from '../journal/store.js';
import type { Release } from '../lock.js';
import type { BoundTool } from '../tools/view.js';
import type { CallPhase } from './failure.js';
import type { InputRoundLog } from './input-rounds.js';
import type { StoreDeadline } from '../signals.js';
import type { RunOptions } from './types.js';

/**
 * What one run has done so far. The phases write it; the failure path reads it to decide what a
 * failure means (`phase`) and what to journal (`claim`, `context`, `recorded`), and `finally`
 * releases what it holds (`release`, `counted`). Private to one run.
 */
export interface CallRun {
  readonly options: RunOptions;
  /**
   * The tool as it runs: the captured one, or, for a provisional server (DESIGN §19.2), the same
   * descriptor (equal digest) on the live server once its live catalog confirmed it.
   */
  bound: BoundTool;
  /** The revision the run checks under the lock: the captured one, or the live slot's. */
  revision: number;
  readonly key: string | undefined;
  /** The journal counting this run (`start()` was called), if it records this run at all. */
  readonly journal: CallJournal | undefined;
  /** The per-call timeout; it also bounds the journal's store operations (DESIGN §13). */
  readonly timeoutMs: number;
  /** Epoch milliseconds when `run` was called. */
  readonly startedAt: number;
  readonly t0: number;
  tLock: number;
  tPrepared: number;
  tCalled: number;
  /** Where a failure happened decides what it means: nothing sent before `call`. */
  phase: CallPhase;
  /** True once `inFlight` counts this run. */
  counted: boolean;
  /** True once the journal holds this run's outcome (a replay, or the completed call). */
  recorded: boolean;
  context: CallContext | undefined;
  argsDigest: string | undefined;
  claim: JournalClaim | undefined;
  /** The revision read lock, held from `PreparedCall.run`'s lock phase to its end. */
  release: Release | undefined;
  /** Bounds the journal's writes before the send (the caller's signal, the call's timeout). */
  io: StoreDeadline | undefined;
  /** MRTR rounds (2026-07-28 era): the log exists only once a server asks for input. */
  rounds: InputRoundLog | undefined;
  /** The MCP task the call runs as, once created, or the one a resume polls (DESIGN §20.2). */
  taskId: string | undefined;
}
