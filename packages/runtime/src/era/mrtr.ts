/**
 * MRTR (multi round-trip requests) of a modern-era `tools/call`: an `input_required` result is
 * answered through the application's elicitation and sampling handlers (and its roots) and the call
 * is sent again with a new request id, `inputResponses` and the server's `requestState`, for at most
 * {@link MAX_INPUT_ROUNDS} rounds. Every round is reported to the binding (`onInputRound`) as what
 * was asked (keys, kinds) and how each request was answered, never the answers, so the receipt can
 * record it. MRTR results are never cached: each round is a new request.
 */
import {
  ErrorCode,
  RuntimeError,
  type InputKind,
  type InputRequestRecord,
  type InputStop,
  type StepbindError,
} from '@stepbind/binding/internal';
import type { ClientHandlers } from '../client-capabilities.js';
import type { CallRequestOptions, RawCallResult } from '../connection.js';

/** At most this many `input_required` rounds per `tools/call`. */
export const MAX_INPUT_ROUNDS = 8;

/** Most input requests of one round that are answered. */
const MAX_REQUESTS = 32;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Options of one call with MRTR: a {@link CallRequestOptions}, whose `onInputRound` is told of every round. */
export type InputCallOptions = CallRequestOptions;

/** What {@link callWithInput} needs from the connection. */
export interface InputCallContext {
  readonly server: string;
  readonly handlers: ClientHandlers;
  /** Sends one `tools/call` with these params (a new request id each time). */
  readonly send: (params: Record<string, unknown>) => Promise<unknown>;
}

interface Asked {
  readonly key: string;
  readonly method: string | undefined;
  readonly params: Record<string, unknown>;
  readonly kind: InputKind;
}

/**
 * One `tools/call` with MRTR (see the module comment).
 *
 * @throws RuntimeError `INPUT_REQUIRED` when the server asks for input the application cannot give
 *   (no handler for it), or asks {@link MAX_INPUT_ROUNDS} times; a handler's own error as is.
 */
export async function callWithInput(
  ctx: InputCallContext,
  tool: string,
  args: Readonly<Record<string, unknown>>,
  options: InputCallOptions,
): Promise<RawCallResult> {
  let extra: Record<string, unknown> = {};
  for (let round = 1; ; round++) {
    const result = await ctx.send({ name: tool, arguments: args, ...extra });
    if (!isRecord(result) || result['resultType'] !== 'input_required') {
      return result as RawCallResult;
    }
    const asked = askedOf(result);
    const stop = (stopped: InputStop, outcomes: InputRequestRecord[] = []): void => {
      options.onInputRound?.({
        requests: asked.map(
          (a, i) => outcomes[i] ?? { key: a.key, kind: a.kind, outcome: 'unanswered' },
        ),
        stopped,
      });
    };
    if (round >= MAX_INPUT_ROUNDS) {
      stop('round-limit');
      throw inputRequired(
        ctx.server,
        tool,
        asked,
        `asked for input ${MAX_INPUT_ROUNDS} times; stepbind stops there`,
      );
    }
    // Nothing is asked of the user when the round cannot be answered in full.
    const unanswerable = asked.find((a) => !canAnswer(ctx.handlers, a));
    if (unanswerable !== undefined) {
      stop('unanswerable');
      throw inputRequired(
        ctx.server,
        tool,
        asked,
        `asked for "${String(unanswerable.method).slice(0, 100)}", which this application does not answer (give McpRuntime.open an onElicitation / onSampling handler)`,
      );
    }
    const answers: Record<string, unknown> = {};
    const outcomes: InputRequestRecord[] = [];
    for (const a of asked) {
      try {
        const answer = await answerOne(ctx, a, options.signal);
        answers[a.key] = answer;
        outcomes.push({ key: a.key, kind: a.kind, outcome: outcomeOf(a.kind, answer) });
      } catch (error) {
        stop('handler-failed', outcomes);
        throw error;
      }
    }
    options.onInputRound?.({ requests: outcomes });
    const state = result['requestState'];
    extra = {
      inputResponses: answers,
      ...(typeof state === 'string' ? { requestState: state } : {}),
    };
  }
}

function askedOf(result: Record<string, unknown>): Asked[] {
  const requests = isRecord(result['inputRequests']) ? result['inputRequests'] : {};
  return Object.entries(requests)
    .slice(0, MAX_REQUESTS)
    .map(([key, raw]) => {
      const method = isRecord(raw) && typeof raw['method'] === 'string' ? raw['method'] : undefined;
      const params = isRecord(raw) && isRecord(raw['params']) ? raw['params'] : {};
      return { key, method, params, kind: kindOf(method) };
    });
}

function kindOf(method: string | undefined): InputKind {
  switch (method) {
    case 'elicitation/create':
      return 'elicitation';
    case 'sampling/createMessage':
      return 'sampling';
    case 'roots/list':
      return 'roots';
    case undefined:
    default:
      return 'other';
  }
}

function canAnswer(handlers: ClientHandlers, a: Asked): boolean {
  switch (a.kind) {
    case 'elicitation':
      return handlers.onElicitation !== undefined;
    case 'sampling':
      return handlers.onSampling !== undefined;
    case 'roots':
      return true;
    case 'other':
      return false;
  }
}

async function answerOne(
  ctx: InputCallContext,
  a: Asked,
  signal: AbortSignal | undefined,
): Promise<unknown> {
  const context = { server: ctx.server, signal: signal ?? new AbortController().signal };
  const { onElicitation, onSampling, roots } = ctx.handlers;
  if (a.kind === 'elicitation' && onElicitation !== undefined) {
    return onElicitation(a.params as unknown as Parameters<typeof onElicitation>[0], context);
  }
  if (a.kind === 'sampling' && onSampling !== undefined) {
    return onSampling(a.params as unknown as Parameters<typeof onSampling>[0], context);
  }
  return { roots: (roots ?? []).map((r) => ({ ...r })) };
}

/** An elicitation's `action` decides; any other answer given is `answered`. */
function outcomeOf(kind: InputKind, answer: unknown): InputRequestRecord['outcome'] {
  if (kind !== 'elicitation' || !isRecord(answer)) return 'answered';
  if (answer['action'] === 'decline') return 'declined';
  if (answer['action'] === 'cancel') return 'cancelled';
  return 'answered';
}

/**
 * `INPUT_REQUIRED`, delivery `sent`. The message names the methods and keys asked for; the
 * server's messages (which can carry personal data) are only in `detail.requests`, bounded, so they
 * never reach the journal, which keeps the error message.
 */
function inputRequired(
  server: string,
  tool: string,
  asked: readonly Asked[],
  why: string,
): StepbindError {
  const requests = asked.slice(0, 8).map((a) => {
    const message =
      typeof a.params['message'] === 'string' ? a.params['message'].slice(0, 200) : '';
    return {
      key: a.key.slice(0, 64),
      method: (a.method ?? 'unknown').slice(0, 100),
      ...(message === '' ? {} : { message }),
    };
  });
  return new RuntimeError(
    ErrorCode.INPUT_REQUIRED,
    `tools/call on server "${server}" (tool "${tool}"): the server ${why}. It asked for: ${requests.map((r) => `${r.method} (key "${r.key}")`).join('; ') || 'nothing it named'}; see detail.requests.`,
    { detail: { server, tool, delivery: 'sent', requests } },
  );
}
