import type {
  CatalogSnapshot,
  CatalogState,
  JournalRecord,
  StepbindError,
  UnenforcedPattern,
} from '@stepbind/binding/internal';
import { createDebug } from './log.js';
import type { JournalStatus } from './journal/status.js';
import type { ServerLogMessage } from './connection.js';
import type { SessionLoss } from './transports/http-session.js';

/** Progress of one discovery, page by page. */
export interface DiscoveryProgress {
  readonly server: string;
  /** 1-based number of the page that just arrived (restarts from 1 after a `list_changed`). */
  readonly page: number;
  readonly pageTools: number;
  readonly totalTools: number;
}
/** Everything the runtime reports as it works. Listeners must not throw. */
export type RuntimeEvent =
  | {
      readonly type: 'server-ready';
      readonly server: string;
      readonly generation: number;
      readonly tools: number;
    }
  | {
      readonly type: 'server-failed';
      readonly server: string;
      readonly required: boolean;
      readonly error: StepbindError;
    }
  | { readonly type: 'set-published'; readonly setId: number; readonly reasons: readonly string[] }
  | {
      /**
       * A server is shown from its cached catalog (DESIGN §19.2) until its live one is published;
       * `start` says whether it is starting now (`eager`) or on its first call (`lazy`).
       */
      readonly type: 'server-provisional';
      readonly server: string;
      readonly generation: number;
      readonly tools: number;
      readonly start: 'eager' | 'lazy';
    }
  | {
      /**
       * A provisional server's live catalog was published: `unchanged` when it equals the cached
       * one; otherwise how many cached tools changed or vanished (their provisional calls are
       * refused `STALE_CATALOG`) and how many are new.
       */
      readonly type: 'provisional-confirmed';
      readonly server: string;
      readonly unchanged: boolean;
      readonly changedTools: number;
      readonly addedTools: number;
    }
  | {
      /** A lazy server ran no call for `idleTimeoutMs` and was stopped (DESIGN §19.3). */
      readonly type: 'server-idle-stopped';
      readonly server: string;
      readonly idleTimeoutMs: number;
    }
  | { readonly type: 'refresh-failed'; readonly error: StepbindError }
  | { readonly type: 'list-changed'; readonly server: string }
  | {
      readonly type: 'catalog-swapped';
      readonly server: string;
      readonly generation: number;
      readonly revision: number;
      readonly cause: 'hard-refresh' | 'refresh' | 'reconnect';
    }
  | { readonly type: 'hard-refresh-failed'; readonly server: string; readonly error: StepbindError }
  | {
      /**
       * A dirty refresh kept a modern server's published listing without a request: every page's
       * `ttlMs` still runs (`remainingMs` of the earliest), no `list_changed` came, and a `private`
       * listing is for the same audience and principal. The catalog and revision stay as they were.
       */
      readonly type: 'listing-reused';
      readonly server: string;
      readonly ageMs: number;
      readonly remainingMs: number;
      readonly scope: 'public' | 'private';
    }
  | { readonly type: 'connection-closed'; readonly server: string; readonly expected: boolean }
  | { readonly type: 'connection-error'; readonly server: string; readonly error: Error }
  | {
      /**
       * A catalog was published with schema patterns stepbind cannot run in linear time
       * (backreferences, lookaround...): calls do not enforce them; the server still should.
       */
      readonly type: 'patterns-unenforced';
      readonly server: string;
      readonly generation: number;
      readonly patterns: readonly ({ readonly tool: string } & UnenforcedPattern)[];
    }
  | ({ readonly type: 'discovery-page' } & DiscoveryProgress)
  | {
      /**
       * A server's discovery moved in the catalog state machine (DESIGN §5): `DISCOVERING`,
       * `VALIDATING`, then `SNAPSHOT_PROVEN`/`UNVERSIONED_OBSERVATION` (and `ELIGIBLE` once a proven
       * catalog is published), or `INCOMPLETE` / `QUARANTINED` with the reason; `RETIRED` when its
       * candidate was refused at publication. `status().servers[i].discovery` holds the latest.
       */
      readonly type: 'discovery-state';
      readonly server: string;
      readonly state: CatalogState;
      readonly reason?: { readonly code: string; readonly message: string };
    }
  | { readonly type: 'server-stderr'; readonly server: string; readonly line: string }
  | ({ readonly type: 'server-log'; readonly server: string } & ServerLogMessage)
  | {
      /** A Streamable HTTP session ended (see {@link SessionLoss}); a reconnect follows. */
      readonly type: 'session-lost';
      readonly server: string;
      readonly reason: SessionLoss['reason'];
      readonly httpStatus?: number;
      readonly message: string;
    }
  | {
      /** A new session replaced a lost one; `changed` says whether the catalog (and revision) moved. */
      readonly type: 'server-reconnected';
      readonly server: string;
      readonly attempt: number;
      readonly generation: number;
      readonly revision: number;
      readonly changed: boolean;
    }
  | {
      /** A reconnect attempt failed; `nextDelayMs` is absent when the runtime stopped trying. */
      readonly type: 'reconnect-failed';
      readonly server: string;
      readonly attempt: number;
      readonly error: StepbindError;
      readonly nextDelayMs?: number;
    }
  | {
      /**
       * Emitted once by `open`: the keys a dead process left `INTENT` (now `NOT_SENT`) or `SENT`
       * (now `OUTCOME_UNKNOWN`); empty when there were none.
       */
      readonly type: 'journal-recovered';
      readonly location: string;
      /** The journal opened (its kind and, for SQLite, driver and version), as `status().journal`. */
      readonly journal: JournalStatus;
      readonly records: readonly JournalRecord[];
    }
  | {
      /** The journal could not record the outcome of a call that was reported anyway. */
      readonly type: 'journal-error';
      readonly error: StepbindError;
    }
  | {
      /**
       * The catalog cache file (DESIGN §19.1), or one entry of it (`server` set), was not used: the
       * runtime starts without it (or without that entry) and the file is rewritten on the next
       * record. `message` says why and names no value of the file.
       */
      readonly type: 'catalog-cache-ignored';
      readonly path: string;
      readonly reason: CatalogCacheIgnoredReason;
      readonly server?: string;
      readonly message: string;
    }
  | {
      /**
       * The catalog cache file could not be written (its folder is not writable, its lock stayed
       * held...): the entries stay in memory and the next write tries again.
       */
      readonly type: 'catalog-cache-write-failed';
      readonly path: string;
      /** The file system's error code (`EACCES`, `ENOSPC`...), or `lock-timeout`. */
      readonly reason: string;
      readonly message: string;
    }
  | {
      /**
       * A server sent `notifications/resources/list_changed` or `prompts/list_changed`: its list is
       * listed again after the debounce, for the steps captured from then on (DESIGN §20.3).
       */
      readonly type: 'feature-list-changed';
      readonly server: string;
      readonly list: 'resources' | 'prompts';
    }
  | {
      /**
       * A server's resources, templates and prompts were listed (after its tool discovery or a
       * `list_changed`): the counts now in force, and the items dropped as invalid (the first 10).
       */
      readonly type: 'features-listed';
      readonly server: string;
      readonly resources: number;
      readonly resourceTemplates: number;
      readonly prompts: number;
      readonly droppedCount: number;
      readonly dropped: readonly {
        readonly list: 'resources' | 'resourceTemplates' | 'prompts';
        readonly page: number;
        readonly index: number;
        readonly reason: string;
      }[];
    }
  | {
      /** Listing one of a server's lists failed; the previous list stays in force. */
      readonly type: 'features-list-failed';
      readonly server: string;
      readonly list: 'resources' | 'resourceTemplates' | 'prompts';
      readonly error: StepbindError;
    };

/**
 * Why a catalog cache file or entry was ignored: the whole file when `unreadable` (it cannot be
 * opened or read), `too-large` (over the size cap), `corrupt` (not complete JSON, or no valid
 * version or entry list), `foreign` (another format), `newer-version` (a newer stepbind wrote it);
 * one entry when `malformed-entry` (its shape), `restore-failed` (its catalog no longer validates
 * under the current options) or `digest-mismatch` (its page root or a tool's digest differs from the
 * stored one: the file was edited).
 */
export type CatalogCacheIgnoredReason =
  | 'unreadable'
  | 'too-large'
  | 'corrupt'
  | 'foreign'
  | 'newer-version'
  | 'malformed-entry'
  | 'restore-failed'
  | 'digest-mismatch';

/** Delivers one {@link RuntimeEvent}; never throws. */
export type Emit = (event: RuntimeEvent) => void;

const debugEvents = createDebug('stepbind:events');

/**
 * The runtime's one emitter: logs each event under `DEBUG=stepbind:events` and hands it to the
 * application's listener, whose failure must not break the runtime's bookkeeping.
 */
export function createEmitter(onEvent: ((event: RuntimeEvent) => void) | undefined): Emit {
  return (event) => {
    if (debugEvents.enabled) debugEvents(describeEvent(event));
    try {
      onEvent?.(event);
    } catch {
      // A listener's failure must not break the runtime's bookkeeping.
    }
  };
}

/** A `patterns-unenforced` event for a published catalog that has any such pattern. */
export function reportUnenforced(emit: Emit, server: string, catalog: CatalogSnapshot): void {
  let patterns: ({ readonly tool: string } & UnenforcedPattern)[] | undefined;
  for (const tool of catalog.tools) {
    for (const p of tool.unenforcedPatterns) (patterns ??= []).push({ tool: tool.name, ...p });
  }
  if (patterns !== undefined) {
    emit({ type: 'patterns-unenforced', server, generation: catalog.generation, patterns });
  }
}

/** One line per event for `DEBUG=stepbind:events` (error messages are already redacted). */
function describeEvent(event: RuntimeEvent): string {
  const { type, ...rest } = event;
  const fields = Object.entries(rest).map(([k, v]) =>
    v instanceof Error
      ? `${k}=${(v as Partial<StepbindError>).code ?? v.name}: ${v.message.split('\n')[0] ?? ''}`
      : `${k}=${JSON.stringify(v)}`,
  );
  return `${type} ${fields.join(' ')}`;
}
