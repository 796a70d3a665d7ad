import {
  verifyJournal,
  type ChainAnchor,
  type JournalStore,
  type ReceiptBody,
  type StoredReceipt,
} from '@stepbind/binding/internal';
import { openSqliteJournal, SqliteJournalStore } from '../journal/sqlite.js';
import type { JournalDriverOption } from '../journal/sqlite-driver.js';
import { loadConfigFile } from './config-file.js';
import { fleetStoreOf, STORE_OPTIONS } from './fleet.js';
import { commandLineOf, formatTable, usageError, type CommandSpec } from './grammar.js';
import type { CliIo } from './io.js';
import { describeError } from './options.js';

const JOURNAL_OPTIONS = [
  {
    name: 'journal',
    value: 'FILE',
    description: 'a SQLite journal file (default: CONFIG\'s "journal")',
  },
  ...STORE_OPTIONS,
  { name: 'json', description: 'print the result as JSON (shape below)' },
  {
    name: 'driver',
    value: 'DRIVER',
    description:
      "the SQLite library: auto (node:sqlite where this Node has it), node:sqlite or better-sqlite3 (default: CONFIG's, else auto)",
  },
] as const;

const DRIVERS: readonly JournalDriverOption[] = ['auto', 'node:sqlite', 'better-sqlite3'];

const WHERE = `The journal is --journal FILE, --store URL, or the "journal" (else the "store") of CONFIG.`;

/** The grammar and `--help` of `stepbind receipts list` and `stepbind receipts verify`. */
export const RECEIPTS_COMMANDS: readonly CommandSpec[] = [
  {
    name: 'receipts list',
    summary: "List the journal's receipts in chain order, under a header.",
    config: 'optional',
    arguments: [],
    options: [
      ...JOURNAL_OPTIONS,
      { name: 'key', value: 'KEY', description: 'only the receipts of this idempotency key' },
    ],
    notes: `${WHERE}
--json: [{ "seq", "digest", "prevDigest", ...the receipt body ("at", "source", "key", "modelName",
          "outcome", "delivery", "replayed", ...) }]
Exit code 0, or 2 for usage or journal errors.`,
  },
  {
    name: 'receipts verify',
    summary: "Check the journal's receipts chain (prints the head to keep elsewhere).",
    config: 'optional',
    arguments: [],
    options: [
      ...JOURNAL_OPTIONS,
      {
        name: 'expect-head',
        value: 'SEQ:DIGEST',
        description: 'a head printed by an earlier verify: it must still be in the chain',
      },
    ],
    notes: `${WHERE}
--json: { "ok", "count", "records", "anchor": { "seq", "digest" }, "head": { "seq", "digest" },
          "storedHead", "findings": [{ "reason", "message", ... }], and for a SQLite file "driver",
          "sqliteVersion" }
Exit code 0 only for an intact chain; 1 when it is broken; 2 for usage or journal errors.`,
  },
];

/** The outcome of a `stepbind receipts` command: what to print and the exit code. */
export interface ReceiptsReport {
  readonly code: number;
  readonly stdout: string;
}

/**
 * Parses `--expect-head SEQ:DIGEST` (a head printed by an earlier `verify`).
 *
 * @returns the anchor, or `undefined` when the text is not `<seq>:<64 hex digits>`.
 */
export function parseExpectedHead(text: string): ChainAnchor | undefined {
  const match = /^(\d{1,15}):([0-9a-f]{64})$/.exec(text.trim());
  if (match === null) return undefined;
  return { seq: Number(match[1]), digest: match[2] as string };
}

/**
 * `stepbind receipts verify --journal FILE [--expect-head SEQ:DIGEST]`: checks the whole kept
 * chain, the head record (a deleted newest receipt shows), the anchor against the `prune` receipt
 * naming it (a deleted prefix shows), every record against its key's receipts (an edited state or
 * result shows) and, when given, an external anchor. Prints `head: SEQ DIGEST` to keep elsewhere.
 * Exit code 0 only when nothing was found; 1 with each finding and its reason. A SQLite file is
 * opened read-only: nothing is migrated or written.
 *
 * @throws JournalError when the file cannot be opened as a journal.
 */
export async function verifyReceipts(
  path: string | JournalStore, // or an open store (closed here)
  json: boolean,
  expectHead?: ChainAnchor,
  driver?: JournalDriverOption,
): Promise<ReceiptsReport> {
  const store = typeof path === 'string' ? openReading(path, driver) : path;
  // Which SQLite library read the file: the same file reads the same on either.
  const library =
    store instanceof SqliteJournalStore
      ? { driver: store.driver, sqliteVersion: store.sqliteVersion }
      : undefined;
  const using =
    library === undefined ? '' : `driver: ${library.driver} (SQLite ${library.sqliteVersion})\n`;
  try {
    const verdict = verifyJournal({
      anchor: await store.anchor(),
      receipts: await store.readReceipts(),
      head: await store.head?.(),
      records: await store.listRecords(),
      expectHead,
    });
    if (json) {
      return {
        code: verdict.ok ? 0 : 1,
        stdout: `${JSON.stringify({ ...verdict, ...library })}\n`,
      };
    }
    const from =
      verdict.anchor.seq === 0
        ? 'from the start'
        : `from receipt ${verdict.anchor.seq + 1} (older ones were pruned)`;
    const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
    const head = `head: ${verdict.head.seq} ${verdict.head.digest}\n`;
    const unchecked =
      verdict.storedHead === undefined
        ? ' (no head record: a schema-1 journal, truncation at the end is not detectable)'
        : '';
    if (verdict.ok) {
      return {
        code: 0,
        stdout: `✔ ${store.location}: ${plural(verdict.count, 'receipt')} verified ${from}, ${plural(verdict.records, 'record')} agree with them${unchecked}${expectHead === undefined ? '' : `; the expected head ${expectHead.seq} is in the chain`}\n${head}${using}`,
      };
    }
    const lines = verdict.findings.map((f) => `  ${f.reason}: ${f.message}`);
    return {
      code: 1,
      stdout: `✘ ${store.location}: ${plural(verdict.findings.length, 'finding')} (${plural(verdict.count, 'receipt')} verified ${from}):\n${lines.join('\n')}\n${head}${using}`,
    };
  } finally {
    await store.close();
  }
}

/**
 * `stepbind receipts list --journal FILE [--json] [--key K]`: the kept receipts in chain order,
 * one line each (or a JSON array of `{ seq, digest, prevDigest, ...body }`).
 *
 * @throws JournalError when the file cannot be opened as a journal.
 */
export async function listReceipts(
  path: string | JournalStore, // or an open store (closed here)
  options: { readonly json: boolean; readonly key?: string; readonly driver?: JournalDriverOption },
): Promise<ReceiptsReport> {
  const store = typeof path === 'string' ? openReading(path, options.driver) : path;
  try {
    const receipts = await store.readReceipts(
      options.key === undefined ? {} : { key: options.key },
    );
    const rows = receipts.map((r) => ({ r, body: parse(r) }));
    if (options.json) {
      const out = rows.map(({ r, body }) => ({
        seq: r.seq,
        digest: r.digest,
        prevDigest: r.prevDigest,
        ...(body ?? { unreadable: r.text }),
      }));
      return { code: 0, stdout: `${JSON.stringify(out)}\n` };
    }
    if (rows.length === 0) return { code: 0, stdout: '(no receipts)\n' };
    const table = formatTable(
      ['SEQ', 'AT', 'SOURCE', 'KEY', 'MODEL NAME', 'OUTCOME', 'DELIVERY', 'REPLAYED'],
      rows.map(({ r, body }) =>
        body === undefined
          ? [String(r.seq), '(unreadable receipt)', '', '', '', '', '', '']
          : [
              String(r.seq),
              new Date(body.at).toISOString(),
              body.source,
              body.key ?? '-',
              body.modelName,
              body.outcome,
              body.delivery,
              body.replayed ? 'replayed' : '',
            ],
      ),
    );
    return { code: 0, stdout: `${table.join('\n')}\n` };
  } finally {
    await store.close();
  }
}

/** Opens the SQLite journal `path` for reading only, on `driver` (the configuration's, or `auto`). */
function openReading(path: string, driver: JournalDriverOption | undefined): SqliteJournalStore {
  return openSqliteJournal({ path, readOnly: true, ...(driver === undefined ? {} : { driver }) });
}

function parse(r: StoredReceipt): ReceiptBody | undefined {
  try {
    return JSON.parse(r.text) as ReceiptBody;
  } catch {
    return undefined;
  }
}

/**
 * Runs `stepbind receipts list|verify` with the arguments after `receipts`; resolves to the exit
 * code (0 ok, 1 a broken chain, 2 usage or journal errors).
 */
export async function runReceiptsCommand(argv: readonly string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = argv;
  const spec = RECEIPTS_COMMANDS.find((c) => c.name === `receipts ${sub ?? ''}`);
  if (spec === undefined) {
    io.stderr(
      `stepbind receipts: expected "list" or "verify"${sub === undefined ? '' : ` (not "${sub}")`}; see "stepbind receipts list --help"\n`,
    );
    return 2;
  }
  const parsed = commandLineOf(spec, rest, io);
  if (typeof parsed === 'number') return parsed;
  const json = parsed.flags.has('json');
  const key = parsed.values.get('key');
  if (key === '') return usageError(spec, '--key needs a value', io);
  const expect = parsed.values.get('expect-head');
  const expectHead = expect === undefined ? undefined : parseExpectedHead(expect);
  if (expect !== undefined && expectHead === undefined) {
    return usageError(spec, '--expect-head needs SEQ:DIGEST (as printed after "head:")', io);
  }
  const driverFlag = parsed.values.get('driver');
  if (driverFlag !== undefined && !(DRIVERS as readonly string[]).includes(driverFlag)) {
    return usageError(
      spec,
      `--driver needs one of ${DRIVERS.join(', ')} (not "${driverFlag}")`,
      io,
    );
  }
  let journal = parsed.values.get('journal');
  const wantsStore = parsed.values.has('store');
  if (journal !== undefined && wantsStore) {
    return usageError(spec, '--journal and --store name two journals; give one', io);
  }
  if (journal === '') return usageError(spec, '--journal needs a value (FILE)', io);
  let scrub: ((text: string) => string) | undefined;
  try {
    let store: JournalStore | string;
    let driver = driverFlag as JournalDriverOption | undefined;
    if (journal === undefined && !wantsStore && parsed.config !== undefined) {
      const configured = (await loadConfigFile(parsed.config)).journal;
      journal = configured?.path;
      driver ??= configured?.driver;
    }
    if (journal !== undefined) {
      store = journal;
    } else {
      const target = await fleetStoreOf(parsed);
      if (typeof target === 'string') {
        return usageError(
          spec,
          parsed.config === undefined && !wantsStore
            ? 'a journal is required: give CONFIG, --journal FILE or --store URL'
            : `${target} (${parsed.config ?? ''} has no "journal" either)`,
          io,
        );
      }
      const { PgHandle } = await import('../fleet/pg.js');
      const { PostgresJournalStore } = await import('../fleet/journal-store.js');
      const handle = new PgHandle(target);
      scrub = (text) => handle.redactor.text(text);
      store = new PostgresJournalStore(handle, { ownsHandle: true });
    }
    const report =
      spec.name === 'receipts verify'
        ? await verifyReceipts(store, json, expectHead, driver)
        : await listReceipts(store, {
            json,
            ...(key === undefined ? {} : { key }),
            ...(driver === undefined ? {} : { driver }),
          });
    io.stdout(report.stdout);
    return report.code;
  } catch (error) {
    const text = describeError(error);
    io.stderr(`stepbind: ${scrub === undefined ? text : scrub(text)}\n`);
    return 2;
  }
}
