/**
 * MRTR rounds as receipts record them (2026-07-28 era): a `tools/call` the server answers with
 * `input_required` is answered by the application and sent again, and each such round is kept as
 * what the server asked for (request keys and kinds) and how each request was answered. Never the
 * answers themselves nor the server's messages: both can carry secrets or personal data.
 *
 * @packageDocumentation
 */

/** What one input request asked for: `elicitation/create`, `sampling/createMessage`, `roots/list`, or another method. */
export type InputKind = 'elicitation' | 'sampling' | 'roots' | 'other';

/**
 * How one input request was answered: `answered` (an accepted elicitation, a sampling result, the
 * roots), `declined` / `cancelled` (the elicitation's `action`), or `unanswered` (the call stopped
 * at this round: no handler for it, its handler failed, or the round limit).
 */
export type InputAnswer = 'answered' | 'declined' | 'cancelled' | 'unanswered';

/** Why a call stopped answering at a round (that round's requests are `unanswered`). */
export type InputStop = 'round-limit' | 'unanswerable' | 'handler-failed';

/** One input request of a round: the key the server chose, its kind and how it was answered. */
export interface InputRequestRecord {
  /** The server's key for the request (at most {@link MAX_INPUT_KEY_LENGTH} characters kept). */
  readonly key: string;
  readonly kind: InputKind;
  readonly outcome: InputAnswer;
}

/** One `input_required` result of a `tools/call` and how stepbind answered it. */
export interface InputRound {
  /** The round's requests in the server's order (at most {@link MAX_INPUT_REQUESTS_RECORDED}). */
  readonly requests: readonly InputRequestRecord[];
  /** Set on the last round when the call stopped there instead of answering. */
  readonly stopped?: InputStop;
}

/**
 * The MRTR rounds of one call, on its {@link CallReceipt} and journal receipt body. Absent when the
 * server asked for nothing (so receipts of other calls, and older chains, are unchanged).
 */
export interface InputRounds {
  /** Number of `input_required` results the call received. */
  readonly count: number;
  readonly rounds: readonly InputRound[];
}

/**
 * What a {@link ToolCaller} reports a round through: called once per `input_required` result,
 * after it was answered (or with `stopped` when the call stops at it).
 */
export type InputRoundListener = (round: InputRound) => void;

/** Longest request key a receipt keeps (longer keys are cut). */
export const MAX_INPUT_KEY_LENGTH = 64;

/** Most requests a receipt keeps per round. */
export const MAX_INPUT_REQUESTS_RECORDED = 32;

/** Most rounds a receipt keeps (the count stays exact). */
export const MAX_INPUT_ROUNDS_RECORDED = 32;

const KINDS: ReadonlySet<string> = new Set(['elicitation', 'sampling', 'roots', 'other']);
const ANSWERS: ReadonlySet<string> = new Set(['answered', 'declined', 'cancelled', 'unanswered']);
const STOPS: ReadonlySet<string> = new Set(['round-limit', 'unanswerable', 'handler-failed']);

/**
 * Collects the rounds a caller reports, copying only the recorded fields (bounded), so nothing
 * else a caller might attach can reach a receipt.
 */
export class InputRoundLog {
  #count = 0;
  readonly #rounds: InputRound[] = [];

  /** Records one round (what {@link ToolCaller.callTool}'s `onInputRound` reports). */
  add(round: InputRound): void {
    this.#count++;
    if (this.#rounds.length >= MAX_INPUT_ROUNDS_RECORDED) return;
    const requests = round.requests.slice(0, MAX_INPUT_REQUESTS_RECORDED).map((r) =>
      Object.freeze({
        key: String(r.key).slice(0, MAX_INPUT_KEY_LENGTH),
        kind: KINDS.has(r.kind) ? r.kind : 'other',
        outcome: ANSWERS.has(r.outcome) ? r.outcome : 'unanswered',
      }),
    );
    this.#rounds.push(
      Object.freeze({
        requests: Object.freeze(requests),
        ...(round.stopped !== undefined && STOPS.has(round.stopped)
          ? { stopped: round.stopped }
          : {}),
      }),
    );
  }

  /** `{ inputRounds }` for a receipt, or `{}` when there were none (the field stays absent). */
  field(): { readonly inputRounds?: InputRounds } {
    if (this.#count === 0) return {};
    return {
      inputRounds: Object.freeze({ count: this.#count, rounds: Object.freeze([...this.#rounds]) }),
    };
  }
}
