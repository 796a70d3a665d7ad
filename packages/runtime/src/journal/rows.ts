/**
 * The journal's rows in the SQL stores: the columns a record is written as (SQLite and the
 * fleet's PostgreSQL store, same order), and a SQLite row turned back into a record (a damaged one
 * is `JOURNAL_CORRUPT`).
 */
import {
  ErrorCode,
  type CallContext,
  JOURNAL_STATES,
  JournalError,
  jsonText,
  type JournalRecord,
  type JournalState,
} from '@stepbind/binding/internal';

/** A row of the `records` table. */
export interface RecordRow {
  key: string;
  state: string;
  version: number;
  attempt: number;
  owner: string;
  context: string;
  args_digest: string;
  created_at: number;
  updated_at: number;
  lease_expires_at: number;
  expires_at: number | null;
  outcome: string | null;
  error: string | null;
  resolution: string | null;
  /** Schema 3 on (absent in an older file read without migrating). */
  task_id?: string | null;
}

/** A row of the `receipts` table, as the chain is read. */
export interface ReceiptRow {
  seq: number;
  prev_digest: string;
  digest: string;
  body: string;
}

/** The record a row holds. @throws JournalError `JOURNAL_CORRUPT` for a damaged row. */
export function toRecord(row: RecordRow, location: string): JournalRecord {
  try {
    if (!(JOURNAL_STATES as readonly string[]).includes(row.state)) throw new Error('bad state');
    return {
      key: row.key,
      state: row.state as JournalState,
      version: row.version,
      attempt: row.attempt,
      owner: row.owner,
      context: JSON.parse(row.context) as JournalRecord['context'],
      argsDigest: row.args_digest,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      leaseExpiresAt: row.lease_expires_at,
      expiresAt: row.expires_at,
      outcome: parseNullable(row.outcome) as JournalRecord['outcome'],
      error: parseNullable(row.error) as JournalRecord['error'],
      resolution: parseNullable(row.resolution) as JournalRecord['resolution'],
      ...(typeof row.task_id === 'string' ? { taskId: row.task_id } : {}),
    };
  } catch (error) {
    throw new JournalError(
      ErrorCode.JOURNAL_CORRUPT,
      `The journal ${location} holds a damaged record for key "${row.key}" (${error instanceof Error ? error.message : String(error)}). Restore the file from a backup or move it aside.`,
      { detail: { path: location, reason: 'malformed', key: row.key }, cause: error },
    );
  }
}

/** A nullable JSON column's value. */
export function parseNullable(text: string | null): unknown {
  return text === null ? null : JSON.parse(text);
}

/** Column values after `key`, in table order. */
export function rowValues(r: JournalRecord): unknown[] {
  return [
    r.state,
    r.version,
    r.attempt,
    r.owner,
    contextJson(r.context),
    r.argsDigest,
    r.createdAt,
    r.updatedAt,
    r.leaseExpiresAt,
    r.expiresAt,
    // A completed record's outcome carries the text its result was digested from (§21.1).
    r.outcome === null ? null : jsonText(r.outcome),
    r.error === null ? null : JSON.stringify(r.error),
    r.resolution === null ? null : JSON.stringify(r.resolution),
    r.taskId ?? null,
  ];
}

/**
 * JSON texts of frozen contexts. A keyed call writes its record's context twice (its `SENT` row and
 * its completion, the same object: the journal freezes the context it makes for a claim), so the
 * second write reuses the first's text. Only a frozen context is remembered: its fields are
 * primitives, so it cannot have changed since (DESIGN §21.1).
 */
const contextTexts = new WeakMap<CallContext, string>();

/** `JSON.stringify(context)`, made once per frozen context. */
export function contextJson(context: CallContext): string {
  let text = contextTexts.get(context);
  if (text === undefined) {
    text = JSON.stringify(context);
    if (Object.isFrozen(context)) contextTexts.set(context, text);
  }
  return text;
}
