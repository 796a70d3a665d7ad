/**
 * The options every framework adapter passes to the calls it runs (DESIGN §20.4).
 *
 * @packageDocumentation
 */
import type { RunOptions } from '@stepbind/binding/internal';

/** How one adapter call runs, whatever the framework; `Event` is the adapter's call event. */
export interface AdapterCallOptions<Event> {
  /**
   * Passed to every `PreparedCall.run`: approvals (`ctx.approve()` after asking the user; without
   * it a call stepbind's policy holds is refused `APPROVAL_REQUIRED`, shown to the model, nothing
   * sent) and argument rewriting (under the read lock).
   */
  readonly prepare?: RunOptions['prepare'];
  /** Per-call timeout. @default the server's `callTimeoutMs` */
  readonly timeoutMs?: number;
  /** Called once per call with its receipt, or with the error the model was shown. */
  readonly onCall?: (event: Event) => void;
  /**
   * The first half of every idempotency key, `${stepKey}:${toolCallId}` (DESIGN §13, §20.4). Give
   * one that names this step of this conversation and survives a restart (a workflow's run and
   * step ids, a LangGraph thread and step, a serialised Agents run state) when a journal file is
   * configured: a repeated tool call then replays its recorded result instead of running again,
   * also after a crash. Tool call ids are only unique within one conversation (mock models' and
   * some providers' ids repeat across conversations), so the key needs it.
   * @default a random id made once per tool set: a tool call id repeated within this tool set
   *   replays, nothing is shared with another tool set or another process.
   */
  readonly stepKey?: string;
  /**
   * Whether the framework's tool call id becomes the run's idempotency key. Keys need a journaled
   * step (every runtime's step is); a step without a journal, or a tool invoked without a call id,
   * runs unkeyed.
   * @default true
   */
  readonly idempotencyKeys?: boolean;
}
