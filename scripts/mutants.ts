/**
 * `pnpm mutants`: seeds known bugs into a copy of the sources, one at a time, and checks that each
 * is killed by its named test with the expected diagnostic. A mutant that does not parse, or that
 * fails for another reason, is not a kill. Each mutated file is compiled alone into its package's
 * dist (`emitOne`), where the processes a test spawns load it. Prints a table; exits 1 if any
 * mutant survives.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { privateNode } from './private-node.js';

interface Mutant {
  readonly name: string;
  readonly file: string;
  readonly find: string;
  readonly replace: string;
  /** Test file and the exact name of the test that must kill it. */
  readonly testFile: string;
  readonly testName: string;
  /** Text the failing test must print (the diagnostic). */
  readonly diagnostic: string;
  /** The vitest project the test runs in. @default 'default' (the 2025 era) */
  readonly project?: 'default' | 'modern-era';
  /**
   * The Node line the named test runs on, when the machine's cannot run it (a private install,
   * see `private-node.ts`; the copy's native addons are not loaded by such a test).
   * @default the Node running this script
   */
  readonly node?: 22;
  /**
   * `tsc`: the mutation shows in the declarations (`.d.ts`), which compiling the file alone does
   * not write, so the copy is rebuilt whole with `tsc -b` (and again after it is restored).
   * @default 'file' (the mutated file alone into dist, see {@link emitOne})
   */
  readonly build?: 'tsc';
}

const MUTANTS: readonly Mutant[] = [
  {
    name: 'ignore duplicate names',
    file: 'packages/binding/src/discovery.ts',
    find: 'if (names.has(tool.name)) {',
    replace: 'if (false as boolean) {',
    testFile: 'packages/runtime/test/discover-tools.test.ts',
    testName: 'rejects a tool name repeated on a later page with DUPLICATE_TOOL_NAME',
    diagnostic: 'to be an instance of CatalogError',
  },
  {
    name: 'stop after the first page',
    file: 'packages/binding/src/discovery.ts',
    find: 'if (next === undefined) break;',
    replace: 'if (next === undefined || pageIndex >= 0) break;',
    testFile: 'packages/runtime/test/discover-tools.test.ts',
    testName: 'keeps an empty middle page and gives sizes [1, 0, 2]',
    diagnostic: "expected [ 'alpha' ] to deeply equal [ 'alpha', 'beta', 'gamma' ]",
  },
  {
    name: 'treat "" as the end',
    file: 'packages/binding/src/discovery.ts',
    find: 'if (next === undefined) break;',
    replace: "if (next === undefined || next === '') break;",
    testFile: 'packages/runtime/test/discover-tools.test.ts',
    testName: 'sends the empty-string cursor and follows it',
    diagnostic: "expected [ 'alpha' ] to deeply equal [ 'alpha', 'beta' ]",
  },
  {
    name: 'skip the revision compare',
    file: 'packages/binding/src/call/prepared.ts',
    find: 'if (slot.revision !== run.revision) {',
    replace: 'if (false as boolean) {',
    testFile: 'packages/runtime/test/runtime.memory.test.ts',
    testName:
      'rejects a prepared call after its revision is bumped, and never runs prepare or sends it',
    diagnostic: 'expected a rejection',
  },
  {
    name: 'release the read lock before tools/call',
    file: 'packages/binding/src/call/prepared.ts',
    find: "    run.phase = 'call';\n",
    replace: "    run.release?.();\n    run.release = undefined;\n    run.phase = 'call';\n",
    testFile: 'packages/runtime/test/runtime.memory.test.ts',
    testName: 'makes a hard refresh wait for a tools/call in flight (the read lock spans the call)',
    diagnostic: 'expected true to be false',
  },
  {
    name: 'let every list_changed arm its own debounce timer',
    file: 'packages/runtime/src/server/list-changed.ts',
    find: '    else clock.clearTimeout(this.#timer);\n',
    replace: '',
    testFile: 'packages/runtime/test/runtime.memory.test.ts',
    testName: 'coalesces a burst of list_changed notifications into one hard refresh',
    diagnostic: 'expected 10 to be 1',
  },
  {
    name: 'publish without the CAS',
    file: 'packages/binding/src/registry.ts',
    find: 'if (activeGeneration !== options.expectedGeneration) {',
    replace: 'if (false as boolean) {',
    testFile: 'packages/binding/test/registry.test.ts',
    testName: 'publishes exactly one of two candidates racing from the same generation',
    diagnostic: 'PUBLISH_CONFLICT',
  },
  {
    name: 'ignore list_changed during an enumeration',
    file: 'packages/binding/src/discovery.ts',
    find: 'if (changes !== undefined && changes.version !== changeVersion) {',
    replace: 'if (false as boolean) {',
    testFile: 'packages/runtime/test/discover-tools.test.ts',
    testName: 'restarts from the first page when list_changed arrives mid-enumeration',
    diagnostic: 'expected +0 to be 1',
  },
  {
    name: 'signal only the direct child, not its process group',
    file: 'packages/runtime/src/transports/stdio.ts',
    find: 'if (GROUPS) process.kill(-pgid, signal);',
    replace: 'if (GROUPS) process.kill(pgid, signal);',
    testFile: 'packages/runtime/test/transports.stdio.test.ts',
    testName:
      'close() ends a sh -c wrapper, its server and a grandchild that ignores SIGTERM, escalating to SIGKILL for the whole group',
    diagnostic: 'processes of the group left after close()',
  },
  {
    name: 'stop at SIGTERM (no SIGKILL escalation)',
    file: 'packages/runtime/src/transports/stdio.ts',
    find: "for (const signal of ['SIGTERM', 'SIGKILL'] as const) {",
    replace: "for (const signal of ['SIGTERM'] as const) {",
    testFile: 'packages/runtime/test/transports.stdio.test.ts',
    testName:
      'close() ends a sh -c wrapper, its server and a grandchild that ignores SIGTERM, escalating to SIGKILL for the whole group',
    diagnostic: 'processes of the group left after close()',
  },
  {
    // Issue 8 item 3: a call lost after it was written must never read as "not sent".
    name: 'forget that tools/call was written (CONNECTION_CLOSED after sending)',
    file: 'packages/runtime/src/sdk/client-hooks.ts',
    find: "if (delivery !== undefined) delivery.delivery = 'sent';",
    replace: "if (delivery !== undefined) delivery.delivery = 'not-sent';",
    testFile: 'packages/runtime/test/runtime.stdio.test.ts',
    testName:
      'gives OUTCOME_UNKNOWN (delivery sent) for a server that crashes mid-call, and the next refresh reconnects it',
    diagnostic: "expected 'CONNECTION_CLOSED' to be 'OUTCOME_UNKNOWN'",
  },
  {
    name: 'map a connection lost after sending to CONNECTION_CLOSED',
    file: 'packages/runtime/src/sdk/sdk-errors.ts',
    find: 'return sent ? outcomeUnknown(where, detail, error) : connectionClosed(where, detail, error);',
    replace: 'return connectionClosed(where, detail, error);',
    testFile: 'packages/runtime/test/delivery.stdio.test.ts',
    testName:
      'reports a connection lost after the request was written as OUTCOME_UNKNOWN, delivery sent',
    diagnostic: "expected 'CONNECTION_CLOSED' to be 'OUTCOME_UNKNOWN'",
  },
  {
    // Issue 10: the key's SENT record must be durable before a byte is written.
    name: 'send before the SENT record',
    file: 'packages/binding/src/call/prepared.ts',
    find: 'await boundedBy(run.io, (io) => journal.markSent(claim, run.timeoutMs, io));',
    replace: 'void boundedBy(run.io, (io) => journal.markSent(claim, run.timeoutMs, io));',
    testFile: 'packages/binding/test/journal/binding.test.ts',
    testName:
      'makes the key SENT before the caller is asked to send, and COMPLETED after the answer',
    diagnostic: "expected undefined to be 'SENT'",
  },
  {
    // Issue 20 (DESIGN §21.6): a run refused before its SENT write lets its unread key decide first.
    name: "decide a late claim's refusal by the run, not by its key",
    file: 'packages/binding/src/call/recorded.ts',
    find: 'if (claim?.pending?.late !== true || journal === undefined) return undefined;',
    replace: 'if (claim !== undefined || journal === undefined) return undefined;',
    testFile: 'packages/binding/test/journal/late-claim.test.ts',
    testName:
      'replays a completed key whose tool was revoked since, and refuses a new key as TOOL_DENIED writing nothing',
    diagnostic: 'TOOL_DENIED',
  },
  {
    // Issue 20 (DESIGN §21.6): a run waiting for another run's undecided late claim of its key
    // gives up with its own timeout and signal.
    name: "wait for another run's undecided late claim without the caller's signal",
    file: 'packages/binding/src/journal/rules.ts',
    find: 'if (signal === undefined) return held.decided.then(() => undefined);',
    replace: 'if (signal !== null) return held.decided.then(() => undefined);',
    testFile: 'packages/binding/test/journal/late-claim.test.ts',
    testName:
      "bounds a second run's wait for an undecided late claim by its own timeout and signal: IDEMPOTENCY_IN_PROGRESS, ABORTED, nothing sent by them",
    diagnostic: 'timed out',
  },
  {
    // Issue 20 (DESIGN §21.6): a late claim whose SENT insert lost is decided, never sent.
    name: "take a late claim's lost SENT insert for written",
    file: 'packages/binding/src/journal/journal.ts',
    find: '      if (await writeSent(this.#decider, claim, timeoutMs, io)) return undefined;\n      for (',
    replace:
      "      if ((await writeSent(this.#decider, claim, timeoutMs, io)) || claim.key !== '') return undefined;\n      for (",
    testFile: 'packages/binding/test/journal/late-claim.test.ts',
    testName:
      'replays a completed key at its SENT write: the insert loses, the key is read once, nothing is sent',
    diagnostic: 'expected false to be true',
  },
  {
    // Issue 20 (DESIGN §21.6): a late claim its key replays holds the key no longer.
    name: 'keep holding a late claim its key replayed at the SENT write',
    file: 'packages/binding/src/journal/journal.ts',
    find: "held = false;\n        if (decided.kind === 'replay') return decided;",
    replace: "if (decided.kind === 'replay') return decided;",
    testFile: 'packages/binding/test/journal/late-claim.test.ts',
    testName:
      'makes a second run of the key in this process wait for the first one decided: both replay a completed key, one of two runs of a new key is sent',
    diagnostic: 'is already running',
  },
  {
    // Issue 20 (DESIGN §21.6): a late claim decided at its run's refusal holds the key no longer.
    name: 'keep holding a late claim decided after its run was refused',
    file: 'packages/binding/src/journal/journal.ts',
    find: "this.#settle(claim, decided?.kind === 'resume');",
    replace: 'this.#settle(claim, true);',
    testFile: 'packages/binding/test/journal/late-claim.test.ts',
    testName:
      'replays a completed key whose tool was revoked since, and refuses a new key as TOOL_DENIED writing nothing',
    diagnostic: 'is already running',
  },
  {
    // Issue 20 (DESIGN §21.6): a write before a send that the database runs after its caller's
    // deadline is refused there, so a frozen database's backlog cannot commit a SENT record.
    name: 'drop the deadline guard of a fleet write before a send',
    file: 'packages/runtime/src/fleet/journal-store.ts',
    find: 'if (!guarded || deadline === undefined || !Number.isFinite(deadline)) return undefined;',
    replace: 'if (guarded || !guarded) return undefined;',
    testFile: 'packages/runtime/test/fleet/journal-store.pg.test.ts',
    testName:
      'refuses a write before a send that the database runs after its deadline: JOURNAL_UNAVAILABLE (timeout), nothing written; alone or in a group, insert or compare-and-set',
    diagnostic: 'expected true to match object',
  },
  {
    name: 'drop the deadline guard of a fleet write before a send (frozen database)',
    file: 'packages/runtime/src/fleet/journal-store.ts',
    find: 'if (!guarded || deadline === undefined || !Number.isFinite(deadline)) return undefined;',
    replace: 'if (guarded || !guarded) return undefined;',
    testFile: 'packages/runtime/test/fleet/frozen.pg.test.ts',
    testName:
      'frozen (SIGSTOP): a keyed run with timeoutMs fails JOURNAL_UNAVAILABLE (reason timeout) and sends nothing; close() resolves while frozen; the key runs once after the thaw',
    diagnostic: 'no answer was recorded',
  },
  {
    name: 'skip the payload check on replays',
    file: 'packages/binding/src/journal/decide.ts',
    find: 'const conflict = conflictOf(existing, intent);',
    replace:
      "const conflict = existing.state === 'COMPLETED' ? undefined : conflictOf(existing, intent);",
    testFile: 'packages/runtime/test/journal/runtime.journal.test.ts',
    testName:
      'refuses a reused key with other arguments or another tool (IDEMPOTENCY_CONFLICT), sending nothing',
    diagnostic: 'expected a rejection',
  },
  {
    // Issue 25: the key's state decides before the descriptor digest; an edited description on a
    // key that may have run must not turn into "not run, use a new key".
    name: 'descriptor check before key state',
    file: 'packages/binding/src/journal/rules.ts',
    find: 'const mayHaveRun = keyMayHaveRun(existing.state);',
    replace: 'const mayHaveRun = false as boolean;',
    testFile: 'packages/runtime/test/journal/descriptor-edit.test.ts',
    testName:
      'keeps a key of unknown outcome OUTCOME_UNKNOWN (delivery sent) after the upgrade, and its advice never sends it twice',
    diagnostic:
      "expected [ 'IDEMPOTENCY_CONFLICT', 'not-sent' ] to deeply equal [ 'OUTCOME_UNKNOWN', 'sent' ]",
  },
  {
    // Issue 25: the in-memory journal's record cap never drops a key that may have run unanswered.
    name: 'memory cap drops any record',
    file: 'packages/binding/src/journal/memory.ts',
    find: "if (state === 'COMPLETED' || state === 'NOT_SENT') this.#records.delete(key);",
    replace: "if (state !== 'INTENT') this.#records.delete(key);",
    testFile: 'packages/binding/test/journal/memory.test.ts',
    testName:
      'never drops a key of unknown outcome or in progress over the cap; grows and reports it through onOverCap',
    diagnostic: "expected undefined to be 'OUTCOME_UNKNOWN'",
  },
  {
    // Issue 11: the fleet pointer moves only by compare-and-set on the expected generation.
    name: 'move the fleet pointer without the generation CAS',
    file: 'packages/runtime/src/fleet/registry.ts',
    find: 'WHERE identity_digest = $1 AND audience = $2 AND generation = $8`,',
    replace: 'WHERE identity_digest = $1 AND audience = $2 AND $8::bigint IS NOT NULL`,',
    testFile: 'packages/runtime/test/fleet/registry.pg.test.ts',
    testName:
      'refuses a candidate whose expectation is stale with PUBLISH_CONFLICT (reason generation), and the next attempt wins',
    diagnostic: 'PUBLISH_CONFLICT',
  },
  {
    // Issue 11: past its staleness bound a worker refuses calls instead of admitting them.
    name: 'admit calls on a stale fleet policy',
    file: 'packages/runtime/src/fleet/policy.ts',
    find: 'if (age > this.#maxStalenessMs) {',
    replace: 'if (age > this.#maxStalenessMs && age < 0) {',
    testFile: 'packages/runtime/test/fleet/policy.pg.test.ts',
    testName:
      'refuses calls with POLICY_STALE once the view is older than its bound, and admits again once proven current',
    diagnostic: 'POLICY_STALE',
  },
  {
    // Issue 22: with a fleet store, the obvious call revokes fleet-wide, not only in this process.
    name: 'runtime.revokeTool revokes only locally with a fleet store',
    file: 'packages/runtime/src/runtime.ts',
    find: 'if (this.#core.fleet === undefined) return this.#policy.revoke(server, tool);',
    replace:
      'if (this.#core.fleet === undefined || (true as boolean)) return this.#policy.revoke(server, tool);',
    testFile: 'packages/runtime/test/fleet/revoke.pg.test.ts',
    testName:
      'runtime.revokeTool() in one worker refuses the tool in another, and restoreTool() brings it back',
    diagnostic: 'no applied fleet policy change in the other worker',
  },
  {
    // Issue 22: a local epoch past the fleet's would make every later publication a conflict.
    name: "let a runtime's local policy epoch pass the fleet's",
    file: 'packages/runtime/src/runtime.ts',
    find: 'if (fleetEpoch !== undefined && epoch > fleetEpoch)',
    replace: 'if (fleetEpoch !== undefined && epoch < 0)',
    testFile: 'packages/runtime/test/fleet/revoke.pg.test.ts',
    testName:
      'the …Locally forms act in this runtime only, and a local epoch may not pass the fleet epoch',
    diagnostic: 'to throw an error',
  },
  {
    // Issue 11: a listing is ordered against the active publication on the database clock.
    name: "order a listing by the host's wall clock",
    file: 'packages/runtime/src/fleet/registry.ts',
    find: 'const earliestStartOnDb = candidate.discoveryStartedAt + clock.offsetMs - clock.uncertaintyMs;',
    replace: 'const earliestStartOnDb = candidate.discoveryStartedAt;',
    testFile: 'packages/runtime/test/fleet/registry.pg.test.ts',
    testName:
      'orders a listing against the active publication on the database clock: a host whose clock runs an hour ahead cannot publish a listing that started before the active one',
    diagnostic: 'PUBLISH_CONFLICT',
  },
  {
    name: "modern era: keep page 1's ttlMs for the whole listing",
    file: 'packages/runtime/src/era/listing-cache.ts',
    find: 'expiresAt = Math.min(expiresAt, page.receivedAt + Math.min(ttl, MAX_LISTING_TTL_MS));',
    replace:
      'expiresAt = expiresAt === Infinity ? page.receivedAt + Math.min(ttl, MAX_LISTING_TTL_MS) : expiresAt;',
    testFile: 'packages/runtime/test/era/listing-cache.stdio.test.ts',
    testName:
      'within the smallest page TTL a config-reload refresh sends no tools/list; once it passes, it lists',
    // The first assertion it trips: status() still calls the listing fresh past page 2's TTL.
    diagnostic: 'expected { fresh: true',
  },
  {
    name: 'modern era: a connection lost after sending is CONNECTION_CLOSED',
    file: 'packages/runtime/src/era/modern.ts',
    find: "if (delivery === 'sent') {",
    replace: "if (delivery === 'sent' && cause !== undefined) {",
    testFile: 'packages/runtime/test/delivery.stdio.test.ts',
    testName:
      'reports a connection lost after the request was written as OUTCOME_UNKNOWN, delivery sent',
    diagnostic: "expected 'CONNECTION_CLOSED' to be 'OUTCOME_UNKNOWN'",
    project: 'modern-era',
  },
  {
    // one delivery record per call, not per MRTR round.
    name: 'modern era: a later MRTR round starts as not-sent',
    file: 'packages/runtime/src/era/modern.ts',
    find: '            delivery,\n',
    replace: "            delivery: { delivery: 'not-sent' },\n",
    testFile: 'packages/runtime/test/era.mrtr.stdio.test.ts',
    testName:
      'a later round lost after round 1 reached the server is OUTCOME_UNKNOWN, delivery sent (never not-sent)',
    diagnostic: "'CONNECTION_CLOSED'",
  },
  {
    name: 'run the tool filter on a name longer than any tool name',
    file: 'packages/runtime/src/tool-filter.ts',
    find: 'name.length > MAX_TOOL_NAME_LENGTH ||',
    replace: 'name.length < 0 ||',
    testFile: 'packages/runtime/test/tool-filter.stdio.test.ts',
    testName: 'refuse a multi-megabyte tool name with INVALID_TOOL_NAME before any glob sees it',
    // The allow glob silently drops the huge name and the server comes up ready.
    diagnostic: "expected false to be 'INVALID_TOOL_NAME'",
  },
  {
    name: 'tool filter glob: search every part from the start of the name',
    file: 'packages/runtime/src/tool-filter.ts',
    find: 'at = searchFrom(segment, name, at, limit, meter);',
    replace: 'at = searchFrom(segment, name, 0, limit, meter);',
    testFile: 'packages/runtime/test/tool-filter.test.ts',
    testName:
      'agree with an anchored regular expression on random globs and names, parts longer than a word included (property)',
    diagnostic: 'Property failed after',
  },
  {
    name: 'modern era: an acknowledged listen stream resets the backoff at once',
    file: 'packages/runtime/src/era/listen.ts',
    find: 'this.#now() - ackedAt >= RELISTEN_HEALTHY_MS',
    replace: 'this.#now() - ackedAt >= 0',
    testFile: 'packages/runtime/test/era.listen.test.ts',
    testName:
      'a stream acknowledged and ended at once backs off to the cap: at most 10 re-opens in a minute',
    diagnostic: 'to be less than or equal to 10',
  },
  {
    name: 'interpolate a Claude Desktop configuration',
    file: 'packages/runtime/src/interpolate.ts',
    find: "return dialect === 'claude-desktop'",
    replace: "return dialect === ('none' as ConfigDialect)",
    testFile: 'packages/runtime/test/config.compat.test.ts',
    testName:
      'hands a Claude Desktop value to the real child process verbatim, and a stepbind one interpolated',
    // The child saw `pa$word` and the value of HOME instead of what the file says.
    diagnostic: "'pa$word'",
  },
  {
    // A file's problems come one at a time: the user fixes one, runs again, meets the next.
    name: 'report only the first configuration problem',
    file: 'packages/runtime/src/config-values.ts',
    find: 'const problems = Object.freeze(this.#problems.map(',
    replace: 'const problems = Object.freeze(this.#problems.slice(0, 1).map(',
    testFile: 'packages/runtime/test/config-file.test.ts',
    testName:
      'reports every problem of a file at once, the first few in the message and all in detail.errors',
    diagnostic: "expected [ '$.concurrency' ] to deeply equal",
  },
  {
    // A relative journal path follows the working directory: `receipts list --journal` then misses it.
    name: "resolve a relative journal path against the working directory, not the file's",
    file: 'packages/runtime/src/config.ts',
    find: '    path: againstFile(base, path),\n    ...(synchronous',
    replace: '    path,\n    ...(synchronous',
    testFile: 'packages/runtime/test/config-file.test.ts',
    testName: 'opens a relative journal path against the file, not the working directory',
    diagnostic: 'expected false to be true',
  },
  {
    name: 'take .vscode itself as the workspace folder of .vscode/mcp.json',
    file: 'packages/runtime/src/config.ts',
    find: "return name === '.vscode' || name === '.cursor' ? dirname(dir) : dir;",
    replace: 'return dir;',
    testFile: 'packages/runtime/test/config-file.test.ts',
    testName:
      'resolves ${workspaceFolder} in cwd and args of .vscode/mcp.json to the folder holding .vscode',
    diagnostic: '/.vscode',
  },
  {
    // Issue 25: a server's readOnlyHint on an unproven catalog is a claim, not the application's word.
    name: "trust an unproven catalog's readOnlyHint",
    file: 'packages/binding/src/call/admission.ts',
    find: '(bound.server.trustAnnotations === true || isProven(bound.server.catalog))',
    replace: '(true as boolean)',
    testFile: 'packages/runtime/test/admission.stdio.test.ts',
    testName:
      'a destructive tool that claims readOnlyHint needs an approval on an unproven catalog',
    diagnostic: 'expected a rejection',
  },
  {
    // Issue 25: a revocation that lands while the prepare hook waits is enforced at the point of use.
    name: 'admit only before the prepare hook',
    file: 'packages/binding/src/call/prepared.ts',
    find: 'this.#checkUse(admitted.admission, admitted.approved, run.options.prepare !== undefined);',
    replace: '',
    testFile: 'packages/runtime/test/admission.stdio.test.ts',
    testName:
      'a revocation that lands while the prepare hook waits refuses the call; the key ends NOT_SENT',
    diagnostic: 'expected a rejection',
  },
  {
    // An abort that lands after the prepare hook settled, before the send, is refused at the point of use.
    name: 'send after the caller aborted as the prepare hook returned',
    file: 'packages/binding/src/call/prepared.ts',
    find: '    this.#checkAborted(run.options.signal);\n    run.tPrepared = performance.now();',
    replace: '    run.tPrepared = performance.now();',
    testFile: 'packages/binding/test/call/prepared.test.ts',
    testName: 'is ABORTED, not sent, when the caller aborts just after the hook returned',
    diagnostic: 'expected a rejection',
  },
  {
    // The phase goes back to admission after the hook: a failure at the point of use is not the hook's.
    name: 'blame the point of use on the prepare hook',
    file: 'packages/binding/src/call/prepared.ts',
    find: "    run.phase = 'admission';\n",
    replace: '',
    testFile: 'packages/binding/test/call/prepared.test.ts',
    testName:
      'blames a policy failure at the point of use on admission, not on the hook that returned',
    diagnostic: "to deeply equal [ 'TOOL_DENIED', 'admission'",
  },
  {
    // A failure of tools/call may mean the call ran: the send phase decides delivery.
    name: 'treat a failed tools/call as not sent',
    file: 'packages/binding/src/call/prepared.ts',
    find: "    run.phase = 'call';\n",
    replace: '',
    testFile: 'packages/binding/test/call/prepared.test.ts',
    testName: 'reports a plain failure of tools/call as SERVER_ERROR, sent',
    diagnostic: "'TOOL_DENIED'",
  },
  {
    // The output phase runs before the result is returned and journaled.
    name: 'return a result without checking its output',
    file: 'packages/binding/src/call/prepared.ts',
    find: '      checkOutput(this.#call, result);\n',
    replace: '',
    testFile: 'packages/binding/test/call/prepared.test.ts',
    testName:
      'refuses structuredContent its output schema rejects with INVALID_TOOL_OUTPUT (sent); the call ran',
    diagnostic: 'expected a rejection',
  },
  {
    // Issue 25: Node clamps an out-of-range timer to 1 ms; the call must not be sent with it.
    name: 'send with an out-of-range timeoutMs',
    file: 'packages/binding/src/call/run-options.ts',
    find: '  timeoutMs: z\n    .number()\n    .int()\n    .min(1)\n    .max(MAX_TIMER_MS)',
    replace: '  timeoutMs: z\n    .number()\n    .int()\n    .min(1)\n    .max(Number.MAX_VALUE)',
    testFile: 'packages/runtime/test/admission.stdio.test.ts',
    testName: 'refuses timeoutMs over 2^31-1 with INVALID_OPTIONS, nothing sent, nothing journaled',
    diagnostic: "'INVALID_OPTIONS'",
  },
  {
    // DESIGN §17.1: an unknown option key must be refused, never ignored (a misspelt journal
    // option would open without it).
    name: 'ignore an unknown option key',
    file: 'packages/binding/src/options-check.ts',
    find: 'if (result.success) return;',
    replace:
      "if (result.success || result.error.issues.every((i) => i.code === 'unrecognized_keys')) return;",
    testFile: 'packages/runtime/test/options.test.ts',
    testName: 'openSqliteJournal refuses a misspelt option and creates no file',
    diagnostic: 'expected INVALID_OPTIONS, but the options were accepted',
  },
  {
    // DESIGN §17.1: a misspelt key is named with the nearest allowed one.
    name: 'no did-you-mean for a misspelt option',
    file: 'packages/binding/src/nearest.ts',
    find: 'let bestDistance = NEAR_DISTANCE + 1;',
    replace: 'let bestDistance = 0;',
    testFile: 'packages/runtime/test/options.test.ts',
    testName: 'refuses a misspelt journal (issue 22)',
    diagnostic: "expected undefined to be 'journal'",
  },
  {
    // Issue 25: close() does not wait for a prepare hook that never returns.
    name: 'wait for a pending prepare hook at close',
    file: 'packages/binding/src/call/prepared.ts',
    find: 'const hookSignal = anySignal(signal, this.#state.closeSignal);',
    replace: 'const hookSignal = signal;',
    testFile: 'packages/runtime/test/admission.stdio.test.ts',
    testName:
      'resolves with a hook that never resolves: the run ends ABORTED, not sent, the key NOT_SENT',
    diagnostic: 'Test timed out',
  },
  {
    name: "SQLite journal: wait for another process's lock inside SQLite (blocks the event loop)",
    file: 'packages/runtime/src/journal/sqlite.ts',
    find: "db.pragma('busy_timeout = 0');",
    replace: 'db.pragma(`busy_timeout = ${this.#busyTimeoutMs}`);',
    testFile: 'packages/runtime/test/journal/sqlite.busy.test.ts',
    testName:
      'keeps the event loop running while a keyed run waits for the lock, and runs it once when released',
    // The run froze the loop for the whole bound, then failed: no tick came while it waited.
    diagnostic: 'stayed locked by another process',
  },
  {
    name: 'SQLite journal: a busy attempt is not retried',
    file: 'packages/runtime/src/journal/sqlite-busy.ts',
    find: 'if (!isBusy(error)) throw error;',
    replace: 'throw error;',
    testFile: 'packages/runtime/test/journal/sqlite.busy.test.ts',
    testName:
      'keeps the event loop running while a keyed run waits for the lock, and runs it once when released',
    diagnostic: 'failed to write (SQLITE_BUSY',
  },
  {
    // Issue 25 (finding 4): a journal over a store with a clock (the fleet's database) takes its
    // time from it, not from this host's wall clock.
    name: "take fleet journal time from the host's wall clock",
    file: 'packages/binding/src/journal/clock.ts',
    find: 'const storeClock = now === undefined ? store.clock : undefined;',
    replace: 'const storeClock = undefined as StoreClock | undefined;',
    testFile: 'packages/runtime/test/fleet/clock.pg.test.ts',
    testName:
      "a worker whose clock runs 25 h ahead does not take over a live holder's in-progress key",
    diagnostic: '"kind": "claimed"',
  },
  {
    // Issue 25 (finding 4): the PostgreSQL store prunes on the database's clock in SQL.
    name: "prune fleet records on the caller's clock",
    file: 'packages/runtime/src/fleet/journal-store.ts',
    find: `AND expires_at <= LEAST($1::float8, \${DB_NOW_SQL})
               AND updated_at <= \${DB_NOW_SQL} - $2::float8`,
    replace: 'AND expires_at <= $1::float8 AND $2::float8 >= 0',
    testFile: 'packages/runtime/test/fleet/clock.pg.test.ts',
    testName:
      'the store prunes on the database clock: asked with a clock 25 h ahead, it removes no record younger than the retention and no fresh receipt',
    diagnostic: '"records": 1',
  },
  {
    // Issue 25 (finding 4, one host): at open, a wall clock that puts the newest write past its
    // retention is not believed for retention decisions.
    name: 'trust a wall clock that jumped while no journal ran',
    file: 'packages/binding/src/journal/clock.ts',
    find: 'return Math.min(now, Math.round(guard.newest + this.#monotonic() - guard.at));',
    replace: 'return now;',
    testFile: 'packages/runtime/test/journal/clock-jump.test.ts',
    testName:
      'at open: a journal reopened after the jump keeps the key that completed before it, and its repeat replays',
    diagnostic: "expected undefined to be 'COMPLETED'",
  },
  {
    // Issue 25 (finding 3): the journal's writes before the send honour the call's deadline.
    name: "ignore the call's deadline in the journal",
    file: 'packages/binding/src/call/prepared.ts',
    find: '    run.io = callDeadline(options.signal, run.timeoutMs);\n    // Without a prepare hook',
    replace: '    run.io = callDeadline(options.signal, Infinity);\n    // Without a prepare hook',
    testFile: 'packages/runtime/test/fleet/frozen.pg.test.ts',
    testName:
      'frozen (SIGSTOP): a keyed run with timeoutMs fails JOURNAL_UNAVAILABLE (reason timeout) and sends nothing; close() resolves while frozen; the key runs once after the thaw',
    diagnostic: 'Test timed out',
  },
  {
    // Issue 25 (finding 3): the caller's cancellation is ABORTED, not a store failure.
    name: "report the caller's abort as an unavailable journal",
    file: 'packages/runtime/src/fleet/journal-store.ts',
    find: 'if (StepbindError.isInstance(error) && error.code === ErrorCode.ABORTED) return error;',
    replace: '',
    testFile: 'packages/runtime/test/fleet/frozen.pg.test.ts',
    testName:
      'frozen (SIGSTOP): the caller aborting a keyed run ends it with ABORTED without waiting for the database, nothing sent',
    diagnostic: "'ABORTED'",
  },
  {
    // Issue 25: the head record shows a deleted newest receipt.
    name: 'skip the head check',
    file: 'packages/binding/src/journal/audit.ts',
    find: 'if (stored !== undefined && chain.ok && !sameAnchor(stored, head)) {',
    replace: 'if (stored !== undefined && chain.ok && (false as boolean)) {',
    testFile: 'packages/runtime/test/journal/tamper.test.ts',
    testName:
      '(a) reports the newest receipt deleted (reason head), and a forged head against an external anchor',
    diagnostic: 'expected true to be false',
  },
  {
    // Issue 25: a pruned prefix's anchor must be named by a chained prune receipt.
    name: 'accept any anchor',
    file: 'packages/binding/src/journal/audit.ts',
    find: 'if (anchor.seq > 0) {',
    replace: 'if (anchor.seq < 0) {',
    testFile: 'packages/runtime/test/journal/tamper.test.ts',
    testName:
      '(b) reports a prefix deleted under a forged anchor (reason anchor); a real prune still verifies',
    diagnostic: 'expected [] to deep equally contain',
  },
  {
    // Issue 25: a rewritten stored result is never replayed.
    name: 'skip the record check before a repeated key is used',
    file: 'packages/binding/src/journal/decide.ts',
    find: 'await checkChained(j.store, existing);',
    replace: '',
    testFile: 'packages/runtime/test/journal/tamper.test.ts',
    testName: '(d) reports a rewritten stored result (reason record-result) and never replays it',
    diagnostic: 'expected a rejection',
  },
  {
    // Issue 25: a record whose state its receipts contradict is reported.
    name: 'skip the state comparison with the receipt',
    file: 'packages/binding/src/journal/audit.ts',
    find: 'if (ofAttempt.state !== record.state) {',
    replace: 'if (false as boolean) {',
    testFile: 'packages/runtime/test/journal/tamper.test.ts',
    testName:
      '(c) reports OUTCOME_UNKNOWN edited to NOT_SENT (reason record-state) and never re-sends the key',
    diagnostic: 'expected [] to deeply equal [ ObjectContaining',
  },
  {
    // Issue 25: the next link hangs off the head record, so a deleted newest receipt stays visible.
    name: 'chain the next receipt off the newest row',
    file: 'packages/runtime/src/journal/sqlite.ts',
    find: "'SELECT seq, digest FROM chain_head WHERE id = 1',",
    replace:
      "'SELECT seq, digest FROM (SELECT seq, digest, 1 AS r FROM receipts UNION ALL SELECT seq, digest, 0 FROM chain_head) ORDER BY r DESC, seq DESC LIMIT 1',",
    testFile: 'packages/runtime/test/journal/tamper.test.ts',
    testName:
      '(a) keeps a deleted newest receipt visible after the next append (the chain hangs off the head record)',
    diagnostic: 'expected [] to deeply equal [ ObjectContaining',
  },
  {
    name: 'hand out the whole journal',
    file: 'packages/runtime/src/runtime.ts',
    find: '    return this.#journalView;',
    replace: '    return this.#journal as unknown as JournalView;',
    testFile: 'packages/runtime/test/journal/view.test.ts',
    testName:
      'hands out a frozen view without the claim protocol (begin, markSent, complete, store)',
    diagnostic: 'expected false to be true',
  },
  {
    name: 'catalog keeps servers required',
    file: 'packages/runtime/src/cli/catalog.ts',
    find: 'servers.set(name, { ...server, required: false });',
    replace: 'servers.set(name, server);',
    testFile: 'packages/runtime/test/cli.test.ts',
    testName:
      'reports what the runtime publishes: the tools filter applies, a failed required server does not hide the others, no journal is written',
    diagnostic: '"ok": false',
  },
  {
    // a steady list_changed stream must not postpone the hard refresh forever.
    name: 'debounce list_changed without the 10-period cap',
    file: 'packages/runtime/src/server/list-changed.ts',
    find: 'Math.min(debounceMs, this.#startedAt + MAX_QUIET_PERIODS * debounceMs - now),',
    replace: 'debounceMs,',
    testFile: 'packages/runtime/test/server/list-changed.test.ts',
    testName: 'never postpones the run past 10 quiet periods under a steady stream',
    diagnostic: 'expected [] to deeply equal [ 1000 ]',
  },
  {
    // a list_changed during a fired hard refresh must not be lost.
    name: 'drop the list_changed that arrived during a hard refresh',
    file: 'packages/runtime/src/server/list-changed.ts',
    find: 'if (this.#again && this.#options.active()) {',
    replace: 'if (false as boolean) {',
    testFile: 'packages/runtime/test/server/list-changed.test.ts',
    testName:
      'runs once more after a run that notifications arrived during, however many, and then settles',
    diagnostic: 'expected undefined to be',
  },
  {
    // one backoff for every retry loop; its delays are bounded.
    name: 'backoff without its cap',
    file: 'packages/runtime/src/backoff.ts',
    find: 'return Math.min(policy.maxMs, policy.initialMs',
    replace: 'return Math.max(policy.maxMs * 0, policy.initialMs',
    testFile: 'packages/runtime/test/server/backoff.test.ts',
    testName: 'doubles from the first delay and never exceeds the cap',
    diagnostic: 'expected 1600 to be less than or equal to 1000',
  },
  {
    // maxAttempts failed attempts and the loop gives up (no extra attempt).
    name: 'backoff gives up one attempt late',
    file: 'packages/runtime/src/backoff.ts',
    find: 'if (failures >= (policy.maxAttempts ?? Infinity)) return undefined;',
    replace: 'if (failures > (policy.maxAttempts ?? Infinity)) return undefined;',
    testFile: 'packages/runtime/test/server/reconnect-loop.test.ts',
    testName:
      'gives up after maxAttempts failed attempts: the last failure has no next delay and nothing stays armed',
    diagnostic: 'to have a length of 3 but got 4',
  },
  {
    // The listen stream's re-listen backoff runs on the runtime's clock, like every other timer.
    name: 'listen stream on real time, not the runtime clock',
    file: 'packages/runtime/src/runtime.ts',
    find: '          ...(options.clock === undefined ? {} : { clock: options.clock }),\n',
    replace: '',
    testFile: 'packages/runtime/test/era/listing-cache.stdio.test.ts',
    testName:
      're-opens an ended stream after a backoff armed on the runtime clock, not on real time',
    diagnostic: 'armed timer',
  },
  {
    // DESIGN §3 (6): a refresh whose required server failed publishes nothing.
    name: 'publish a set whose required server failed',
    file: 'packages/runtime/src/refresh.ts',
    find: '    if (found.failures.length > 0) {\n',
    replace: '    if (found.failures.length < 0) {\n',
    testFile: 'packages/runtime/test/runtime.memory.test.ts',
    testName:
      'keeps the old set serving when a required server fails at refresh, with a typed error',
    diagnostic: 'REQUIRED_SERVERS_FAILED',
  },
  {
    // DESIGN §3 (7): the registry's pointer is per (server, audience).
    name: 'key the registry by server only',
    file: 'packages/binding/src/registry.ts',
    find: '  return JSON.stringify([server, audience]);\n',
    replace: '  return JSON.stringify([server]);\n',
    testFile: 'packages/binding/test/registry.test.ts',
    testName: 'never returns another audience’s snapshot',
    diagnostic: 'expected',
  },
  {
    // DESIGN §3 (8): the receipt binds the call to the descriptor it ran under.
    name: 'receipt names the input schema as the descriptor',
    file: 'packages/binding/src/call/receipt.ts',
    find: '    descriptorDigest: descriptor.descriptorDigest,\n    inputSchemaDigest: descriptor.inputSchemaDigest,\n    outputSchemaDigest: descriptor.outputSchemaDigest,\n    generation: catalog.generation,\n    revision: bound.server.revision,\n    policyEpoch,\n    audience',
    replace:
      '    descriptorDigest: descriptor.inputSchemaDigest,\n    inputSchemaDigest: descriptor.inputSchemaDigest,\n    outputSchemaDigest: descriptor.outputSchemaDigest,\n    generation: catalog.generation,\n    revision: bound.server.revision,\n    policyEpoch,\n    audience',
    testFile: 'packages/binding/test/call/prepared.test.ts',
    testName: 'binds the call to the step, catalog, revision, policy epoch, key and arguments',
    diagnostic: 'descriptorDigest',
  },
  {
    // FleetRegistry.load refuses an option it does not know instead of ignoring it.
    name: 'ignore unknown FleetRegistry.load options',
    file: 'packages/runtime/src/fleet/registry.ts',
    find: '    if (!LOAD_OPTION_KEYS.includes(key)) {\n',
    replace: '    if (LOAD_OPTION_KEYS.length < 0) {\n',
    testFile: 'packages/runtime/test/fleet/registry.pg.test.ts',
    testName:
      'adoption checks the stored snapshot against the listing; load rebuilds it; an altered row is refused as corrupt',
    diagnostic: 'INVALID_OPTIONS',
  },
  {
    // DESIGN §16: under the store lock the login is read again; a process that refreshed its own
    // stale copy would reuse a rotated-away refresh token and the server would revoke the family.
    name: 'refresh without reading again under the lock',
    file: 'packages/runtime/src/auth/refresh.ts',
    find: 'const current = await store.get(key);',
    replace: 'const current = seen ?? (await store.get(key));',
    testFile: 'packages/runtime/test/auth/refresh.process.test.ts',
    testName:
      'every process stays logged in and the endpoint sees exactly one refresh per expiry, never a reused refresh token',
    diagnostic: 'refresh refused: invalid_grant',
  },
  {
    // DESIGN §16: a refreshed login is persisted before anyone uses it.
    name: 'refresh hands out a login it did not store',
    file: 'packages/runtime/src/auth/refresh.ts',
    find: 'return await request.store.put(request.key, kept);',
    replace: 'return { ...kept, version: login.version + 1, updatedAt: Date.now() };',
    testFile: 'packages/runtime/test/auth/refresh.test.ts',
    testName:
      'refreshSingleFlight on a MemoryTokenStore runs one refresh for many concurrent callers, persists it before any caller gets it, and all get it',
    diagnostic: 'expected',
  },
  {
    // DESIGN §16: a lock file whose owner is alive is waited for, never taken over.
    name: "take over a live owner's token lock",
    file: 'packages/runtime/src/auth/file-lock.ts',
    find: 'return owner.host === HOST && owner.boot === BOOT && !isAlive(owner.pid);',
    replace: 'return owner.host === HOST && owner.boot === BOOT;',
    testFile: 'packages/runtime/test/auth/store.file.test.ts',
    testName:
      'waits for a live owner: the wait ends with FileLockTimeout after maxWaitMs, or on abort, and the lock is left alone',
    diagnostic: 'promise resolved',
  },
  {
    // DESIGN §16: the fleet's refresh lock is per key: one login's refresh never blocks another's.
    name: 'one fleet token lock for every key',
    file: 'packages/runtime/src/fleet/token-store.ts',
    find: 'values: [id],',
    replace: "values: ['every key'],",
    testFile: 'packages/runtime/test/fleet/tokens.pg.test.ts',
    testName:
      "excludes another worker from a key's lock while it is held (its wait ends at lockTimeoutMs: STORE_UNAVAILABLE, reason timeout), never from another key's",
    diagnostic: 'STORE_UNAVAILABLE',
  },
  {
    // The testkit's protected MCP server must refuse a token minted for another resource, or the
    // OAuth end-to-end tests could pass with a client that never sends the resource indicator.
    name: 'oauth harness: accept a token for any audience',
    file: 'packages/testkit/src/oauth/verify-token.ts',
    find: '          audience: options.resource,\n',
    replace: '',
    testFile: 'packages/testkit/test/oauth.test.ts',
    testName: 'answers a token for another audience 401 invalid_token',
    diagnostic: 'expected 200 to be 401',
  },
  {
    // expireTokens() is how the end-to-end tests expire a token without waiting.
    name: 'oauth harness: expireTokens expires nothing',
    file: 'packages/testkit/src/oauth/verify-token.ts',
    find: 'if (claims.jti !== undefined && options.expired.has(claims.jti)) {',
    replace: 'if (claims.jti === undefined && options.expired.has(claims.jti ?? "")) {',
    testFile: 'packages/testkit/test/oauth.test.ts',
    testName: 'answers an expired token 401 invalid_token without opening a session',
    diagnostic: 'expected 200 to be 401',
  },
  {
    // Rotation with reuse detection is what makes a double refresh in the fleet test visible.
    name: 'oauth harness: refresh tokens do not rotate',
    file: 'packages/testkit/src/oauth/authorization-server.ts',
    find: '    rotateRefreshToken: true,\n',
    replace: '    rotateRefreshToken: false,\n',
    testFile: 'packages/testkit/test/oauth.test.ts',
    testName: 'rotates refresh tokens and refuses a used one (reuse detection)',
    diagnostic: 'not.toBe',
  },
  {
    // The login callback (it carries the code) is only ever received on a loopback address.
    name: 'listen for the login callback on a non-loopback host',
    file: 'packages/runtime/src/auth/loopback.ts',
    find: 'const bind = LOOPBACK_HOSTS.get(url.hostname);',
    replace: "const bind = LOOPBACK_HOSTS.get(url.hostname) ?? '0.0.0.0';",
    testFile: 'packages/runtime/test/auth/loopback.test.ts',
    testName:
      'refuses the non-loopback redirect URI http://example.com:8080/callback with INVALID_OPTIONS',
    diagnostic: 'expected false to be true',
  },
  {
    name: 'take a login callback whose state is not the expected one',
    file: 'packages/runtime/src/auth/loopback.ts',
    find: "if (state === undefined || params.get('state') !== state) {",
    replace: 'if (state === undefined) {',
    testFile: 'packages/runtime/test/auth/loopback.test.ts',
    testName: 'ignores a callback whose state is not the expected one',
    diagnostic: 'expected 200 to be 400',
  },
  {
    name: 'take a login callback on any path',
    file: 'packages/runtime/src/auth/loopback.ts',
    find: 'url?.pathname !== redirect.pathname',
    replace: 'url === undefined',
    testFile: 'packages/runtime/test/auth/loopback.test.ts',
    testName: 'answers 404 on other paths and keeps waiting for the callback',
    diagnostic: 'to be 404',
  },
  {
    name: "leave the browser's connections open when the login listener closes",
    file: 'packages/runtime/src/auth/loopback.ts',
    find: '      server.closeAllConnections();\n',
    replace: '',
    testFile: 'packages/runtime/test/auth/loopback.test.ts',
    testName: 'ends an idle keep-alive connection of the browser when it closes',
    diagnostic: 'Test timed out',
  },
  {
    name: 'let a missing browser fail the login',
    file: 'packages/runtime/src/auth/loopback.ts',
    find: '    // No browser is fine: the URL is printed.\n',
    replace: "    throw new Error('no browser to open the login URL');\n",
    testFile: 'packages/runtime/test/auth/loopback.test.ts',
    testName: 'still waits for the callback when opening a browser throws',
    diagnostic: 'no browser to open the login URL',
  },
  {
    // An authorization refusal of a 2025-era tools/call never reached the server: not sent.
    name: 'auth refusal of a 2025 call reported as sent',
    file: 'packages/runtime/src/sdk/sdk-errors.ts',
    find: "...(ctx.delivery === undefined ? {} : { delivery: 'not-sent' }),",
    replace: '...(ctx.delivery === undefined ? {} : { delivery: ctx.delivery }),',
    testFile: 'packages/runtime/test/auth/wiring.http.test.ts',
    testName:
      'OAuth wiring, 2025-11-25 era fails a call the authorizer refuses with CallError AUTH_REQUIRED, delivery not-sent, and the session stays',
    diagnostic: '"delivery": "not-sent"',
  },
  {
    // The same for a 2026-07-28 round: its delivery goes back to what it was before the send.
    name: 'auth refusal of a 2026 call reported as sent',
    file: 'packages/runtime/src/era/modern.ts',
    find: 'options.delivery.delivery = before;',
    replace: 'void before;',
    testFile: 'packages/runtime/test/auth/wiring.http.test.ts',
    testName:
      'OAuth wiring, 2026-07-28 era fails a call the authorizer refuses with CallError AUTH_REQUIRED, delivery not-sent, and the session stays',
    diagnostic: '"delivery": "not-sent"',
  },
  {
    // One principal's private listing is never reused for another.
    name: 'OAuth principal left out of the listing key',
    file: 'packages/runtime/src/era/listing-cache.ts',
    find: ': { oauth: authPrincipal },',
    replace: ": { oauth: '' },",
    testFile: 'packages/runtime/test/auth/wiring.http.test.ts',
    testName:
      'keeps a private listing across a refresh of the same principal, never for another principal',
    diagnostic: 'principal',
  },
  {
    // A token the authorizer learned at run time is scrubbed from every later text.
    name: 'redactor ignores learned secrets',
    file: 'packages/runtime/src/redact.ts',
    find: "if (typeof secret === 'string' && addNeedles(secret)) ordered = order();",
    replace: "if (typeof secret === 'string') addNeedles(secret);",
    testFile: 'packages/runtime/test/auth/wiring.http.test.ts',
    testName: 'scrubs a learned token out of a call error even when the server repeats it',
    diagnostic: 'denied for Bearer ***',
  },
  {
    // A 401 to a configured bearer token is AUTH_FAILED, not a server error or a crashed start.
    name: 'bearer 401 passed through',
    file: 'packages/runtime/src/transports/http-auth.ts',
    find: 'if (response.status !== 401) return response;',
    replace: 'if (response.status !== 0) return response;',
    testFile: 'packages/runtime/test/auth/bearer.http.test.ts',
    testName: 'fails the probe itself AUTH_FAILED, not as a crashed start',
    diagnostic: 'web: AUTH_FAILED',
  },
  {
    // The session watch reads an authorization refusal as "not sent", not as a lost session.
    name: 'auth refusal read as a network failure by the session watch',
    file: 'packages/runtime/src/transports/http-session.ts',
    find: 'if (isAuthRefusal(error)) {',
    replace: 'if (false as boolean) {',
    testFile: 'packages/runtime/test/auth/wiring.http.test.ts',
    testName:
      'OAuth wiring, 2025-11-25 era fails a call the authorizer refuses with CallError AUTH_REQUIRED, delivery not-sent, and the session stays',
    diagnostic: 'AssertionError',
  },
  {
    // The OAuth principal is part of the catalog identity (never the token).
    name: 'OAuth principal left out of the catalog identity',
    file: 'packages/runtime/src/transports/index.ts',
    find: "transportDigest: principal === '' ? key : computeTransportDigest({ key, principal }),",
    replace: 'transportDigest: key,',
    testFile: 'packages/runtime/test/auth/wiring.http.test.ts',
    testName:
      'gives two principals of one configuration two identities; two tokens of one principal one',
    diagnostic: 'not to be',
  },
  {
    name: 'trust an authorization server without PKCE S256',
    file: 'packages/runtime/src/auth/discovery.ts',
    find: 'requireS256(as, io.context);',
    replace: '',
    testFile: 'packages/runtime/test/auth/flows.test.ts',
    testName: 'refuses an authorization server that does not advertise PKCE S256',
    diagnostic: 'expected a rejection',
  },
  {
    name: 'one step-up too many',
    file: 'packages/runtime/src/auth/authorized-fetch.ts',
    find: 'if (stepUps >= MAX_STEP_UPS) {',
    replace: 'if (stepUps > MAX_STEP_UPS) {',
    testFile: 'packages/runtime/test/auth/flows.test.ts',
    testName:
      'steps up with the union of scopes at most MAX_STEP_UPS times, then fails AUTH_FAILED',
    diagnostic: 'to have a length of 3 but got 4',
  },
  {
    name: 'refresh only once the token has expired',
    file: 'packages/runtime/src/auth/session-logins.ts',
    find: 'return expiresAt - Math.min(marginMs, lifetime / 2) > now;',
    replace: 'return expiresAt > now;',
    testFile: 'packages/runtime/test/auth/flows.test.ts',
    testName: 'refreshes a token that expires within the margin before sending it, without a 401',
    diagnostic: "expected [ 'authorization_code' ] to deeply equal",
  },
  {
    // Only 400, 404 and 405 to the first POST mean "no Streamable HTTP here" (DESIGN §17.3).
    name: 'SSE fallback on 500',
    file: 'packages/runtime/src/transports/sse.ts',
    find: 'new Set([400, 404, 405])',
    replace: 'new Set([400, 404, 405, 500])',
    testFile: 'packages/runtime/test/sse.http.test.ts',
    testName: 'does not fall back on a server error (500): the start fails over Streamable HTTP',
    diagnostic: 'expected a rejection',
  },
  {
    // A probe refused with 404/405 goes to the SSE stream at once: initialize is not POSTed too.
    name: 'SSE fallback POSTs initialize after a refused probe',
    file: 'packages/runtime/src/connect.ts',
    find: 'if (refused === 404 || refused === 405) return fallBackToSse(',
    replace:
      'if ((refused === 404 || refused === 405) && (false as boolean)) return fallBackToSse(',
    testFile: 'packages/runtime/test/sse.http.test.ts',
    testName:
      'falls back after the probe POST is refused with 405, sending no initialize POST, and says so',
    diagnostic: 'expected 2 to be 1',
  },
  {
    name: 'a missing optional package reported as installed but not loadable',
    file: 'packages/runtime/src/optional-dependency.ts',
    find: "const reason = isNotFound(cause, name) ? 'not-installed' : 'not-loadable';",
    replace: "const reason = isNotFound(cause, 'x') ? 'not-installed' : 'not-loadable';",
    testFile: 'packages/runtime/test/optional-dependency.test.ts',
    testName:
      'names the missing package, the feature and the install command (DEPENDENCY_MISSING, not-installed)',
    diagnostic: '"reason": "not-loadable"',
  },
  {
    name: 'a published declaration that names a pg type',
    file: 'packages/runtime/src/fleet/pg.ts',
    find: "client(applicationName = 'stepbind-listen'): PgClient {",
    replace: "client(applicationName = 'stepbind-listen'): pg.Client {",
    testFile: 'packages/runtime/test/packaging.test.ts',
    testName:
      'publishes declarations that compile for a consumer and name no unexported type of the public classes',
    diagnostic: '"@types/pg"',
    build: 'tsc',
  },
  {
    name: 'call lets --args that are not an object through to the server start',
    file: 'packages/runtime/src/cli/call.ts',
    find: "if (typeof callArgs !== 'object' || callArgs === null || Array.isArray(callArgs)) {",
    replace: "if (typeof callArgs !== 'object' || callArgs === null) {",
    testFile: 'packages/runtime/test/cli/call.test.ts',
    testName: 'checks --args and --key before any server starts: a bad one spawns nothing',
    diagnostic: '--args [1]: expected 1 to be 2',
  },
  {
    name: 'call opens the runtime without the configured journal',
    file: 'packages/runtime/src/cli/call.ts',
    find: '        ...config,\n        servers: new Map([[server',
    replace: '        servers: new Map([[server',
    testFile: 'packages/runtime/test/cli/call.test.ts',
    testName: 'sends a keyed call once: the repeat is answered from the configured journal',
    diagnostic: 'replayed',
  },
  {
    name: 'supported Node range open from 21',
    file: 'packages/runtime/src/node-version.ts',
    find: 'if (major >= OPEN_FROM_MAJOR) return true;',
    replace: 'if (major >= 21) return true;',
    testFile: 'packages/runtime/test/node-version.test.ts',
    testName: 'accepts 20.19+, 22.12+ and every version from 24 on, and nothing else',
    diagnostic: "'21.7.3'",
  },
  {
    name: 'AI SDK tool error shown as "CallError: ..."',
    file: 'packages/runtime/src/adapters/model-error.ts',
    find: '    return this.message;',
    replace: '    return super.toString();',
    testFile: 'packages/runtime/test/adapters/ai-sdk.test.ts',
    testName: 'shows the model schema errors and structured results, and routes abort signals',
    diagnostic: 'to satisfy',
  },
  {
    name: "node:sqlite's numeric busy code not normalized to SQLITE_BUSY",
    file: 'packages/runtime/src/journal/node-sqlite.ts',
    find: 'if (extended === 0) return `SQLITE_${base}`;',
    replace: 'if (extended === 0) return `SQLITE_${errcode}`;',
    testFile: 'packages/runtime/test/journal/node-sqlite.test.ts',
    testName: 'maps numeric primary and extended codes to better-sqlite3 names',
    diagnostic: 'SQLITE_5',
  },
  {
    // node:sqlite exists from Node 22.13 on: the named test runs on the private Node 22.
    name: 'the node:sqlite adapter leaves a transaction open after its function throws',
    node: 22,
    file: 'packages/runtime/src/journal/node-sqlite.ts',
    find: '        if (this.inTransaction) {\n          if (nested) {',
    replace: '        if (false as boolean) {\n          if (nested) {',
    testFile: 'packages/runtime/test/journal/node-sqlite.test.ts',
    testName:
      'the SQLite seam (node:sqlite) rolls a transaction back when its function throws, and rethrows the error',
    diagnostic: '"n": 1',
  },
  {
    name: 'run a provisional call whose tool changed since it was cached',
    file: 'packages/binding/src/call/provisional.ts',
    find: 'if (liveDigest !== seen.descriptorDigest) {',
    replace: 'if (descriptor === undefined) {',
    testFile: 'packages/runtime/test/provisional.stdio.test.ts',
    testName:
      'shows the cached tools at once, refuses a changed and a vanished tool unsent, and runs an unchanged one on the live connection',
    diagnostic: 'expected a rejection',
  },
  {
    name: 'a lazy server never stops when idle',
    file: 'packages/runtime/src/server/idle.ts',
    find: 'if (!this.#stopped && this.#inFlight === 0) this.#options.onIdle();',
    replace: 'if (false as boolean) this.#options.onIdle();',
    testFile: 'packages/runtime/test/provisional.stdio.test.ts',
    testName:
      'is not spawned until a step calls one of its tools, and stops again after idleTimeoutMs',
    diagnostic: '"server-idle-stopped" event',
  },
  {
    name: 'serve a cached catalog across principals',
    file: 'packages/runtime/src/cache/catalog-cache.ts',
    find: '      principal: key.principal,\n',
    replace: "      principal: '',\n",
    testFile: 'packages/runtime/test/cache/catalog-cache.test.ts',
    testName: 'never serves a catalog across principals, audiences, tool filters or env values',
    diagnostic: 'to be undefined',
  },
  {
    name: 'serve a cached catalog whose tools were edited on disk',
    file: 'packages/runtime/src/cache/catalog-cache.ts',
    find: 'if (mismatch !== undefined) {',
    replace: 'if (mismatch !== undefined && (false as boolean)) {',
    testFile: 'packages/runtime/test/cache/catalog-cache.test.ts',
    testName: 'drops an entry whose tools were edited on disk (digest-mismatch), from the file too',
    diagnostic: 'to be undefined',
  },
  {
    name: 'the tool search index ignores descriptions',
    file: 'packages/binding/src/tools/search.ts',
    find: '    searchWordsOf(tool.description.slice(0, SEARCH_MAX_DESCRIPTION_CHARS)),',
    replace: '    [],',
    testFile: 'packages/binding/test/tools/search.test.ts',
    testName: 'finds a tool by a word only its description has',
    diagnostic: 'calendar__find_free_time',
  },
  {
    // A search's per-tool scratch is cleared as its hits are read: a score must not leak into the next search.
    name: "keep a search's scores for the next search",
    file: 'packages/binding/src/tools/search-index.ts',
    find: '      scores[id] = 0;\n',
    replace: '',
    testFile: 'packages/binding/test/tools/search-index.test.ts',
    testName:
      'leaves nothing behind between searches, breaks ties by id and honours limit and accept',
    diagnostic: 'to deeply equal',
  },
  {
    // A tool the prefix range matched is not scored again by the fuzzy band.
    name: 'count a prefix match of a tool twice when the fuzzy band also reaches it',
    file: 'packages/binding/src/tools/search-index.ts',
    find: 'if (term === query.term || prefixed.has(term)) continue;',
    replace: 'if (term === query.term) continue;',
    testFile: 'packages/binding/test/tools/search-index.test.ts',
    testName: 'weights a fuzzy match by its distance, and never counts a prefix match twice',
    diagnostic: 'to deeply equal',
  },
  {
    name: 'Anthropic deferred tools are sent without defer_loading',
    file: 'packages/binding/src/tools/deferred.ts',
    find: '    deferred.has(t.name) ? { ...t, defer_loading: true as const } : t,',
    replace: '    t,',
    testFile: 'packages/binding/test/tools/deferred.test.ts',
    testName: 'sends every tool, the deferred ones with defer_loading, and a custom search tool',
    diagnostic: 'files__write_file',
  },
  {
    // The model's provisional calls meet tools edited between the cache write and the live listing.
    name: 'compare a provisional tool with the live catalog by name only (model)',
    file: 'packages/binding/src/call/provisional.ts',
    find: 'if (liveDigest !== seen.descriptorDigest) {',
    replace: 'if (liveDigest === undefined) {',
    testFile: 'packages/testkit/test/model.provisional.prop.test.ts',
    testName: 'on every command of 400 generated warm-start sequences (in-memory servers)',
    diagnostic: 'oracle "STALE_CATALOG"',
  },
  {
    name: 'a required server whose live start failed leaves the runtime clean (model)',
    file: 'packages/runtime/src/provisional-start.ts',
    find: 'if (p.config.required) core.markDirty(`start:${p.name}`);',
    replace: 'if (false as boolean) core.markDirty(`start:${p.name}`);',
    testFile: 'packages/testkit/test/model.provisional.prop.test.ts',
    testName: 'on every command of 400 generated warm-start sequences (in-memory servers)',
    diagnostic: 'OracleDisagreement',
  },
  {
    name: 'carry a provisional entry across an identity change (model)',
    file: 'packages/runtime/src/refresh.ts',
    find: '              prior.provisional.identityKey === key &&',
    replace: '              (true as boolean) &&',
    testFile: 'packages/testkit/test/model.provisional.prop.test.ts',
    testName: 'on every command of 400 generated warm-start sequences (in-memory servers)',
    diagnostic: 'OracleDisagreement',
  },
  {
    name: 'AI SDK toolCallId not used as the idempotency key',
    file: 'packages/runtime/src/adapters/ai-sdk.ts',
    find: '...(keyed ? { idempotencyKey: `${stepKey}:${toolCallId}` } : {}),',
    replace: '...(keyed ? { idempotencyKey: `${stepKey}:${randomUUID()}` } : {}),',
    testFile: 'packages/runtime/test/adapters/ai-sdk.loops.test.ts',
    testName:
      'replays a repeated toolCallId under the same stepKey instead of sending it again (streamText)',
    diagnostic: 'conversation-7:turn-3:r1',
  },
  {
    name: 'Agents server calls on a fresh step, not the one its turn listed',
    file: 'packages/runtime/src/adapters/openai-agents.ts',
    find: '      const step = this.#step;',
    replace: '      const step = await this.#runtime.captureBinding();',
    testFile: 'packages/runtime/test/adapters/openai-agents.test.ts',
    testName:
      'refuses a call whose catalog changed after its turn listed the tools (STALE_CATALOG shown to the model)',
    diagnostic: 'The tool catalog of server',
  },
  {
    name: 'progress does not reset the call timeout',
    file: 'packages/runtime/src/call-progress.ts',
    find: '    if (this.ownsTimeout) this.arm();\n',
    replace: '\n',
    testFile: 'packages/runtime/test/long-calls/progress.stdio.test.ts',
    testName:
      'long calls over stdio (legacy era) a timeout shorter than the call but longer than the gaps between reports succeeds with resetTimeoutOnProgress and fails TIMEOUT (sent) without it',
    diagnostic: 'without progress',
  },
  {
    name: 'progress written with the answer is delivered after it',
    file: 'packages/runtime/src/sdk/client-hooks.ts',
    find: '        if (id !== undefined) watched.get(id)?.disarm();',
    replace: '        if (id !== undefined && (false as boolean)) watched.get(id)?.disarm();',
    testFile: 'packages/runtime/test/long-calls/progress.stdio.test.ts',
    testName:
      'a report after the result in the same write as the answer is not delivered (raw 2025 server)',
    diagnostic: 'expected [ 1, 2 ] to deeply equal [ 1 ]',
  },
  {
    name: 'resume a known task by sending the call again',
    file: 'packages/binding/src/call/task.ts',
    find: "task: { mode: 'required', resumeTaskId: taskId },",
    replace: "task: { mode: 'required' },",
    testFile: 'packages/runtime/test/tasks.stdio.test.ts',
    testName:
      'resumes polling the recorded task after a restart instead of sending again, then replays; a task the server forgot is OUTCOME_UNKNOWN',
    diagnostic: 'to have a length of 1',
  },
  {
    name: 'record the task id after polling instead of at creation',
    file: 'packages/runtime/src/sdk/sdk-connection.ts',
    find: `      await task.onCreated?.(created.task.taskId);
      return await awaitTask(wait(), created.task.taskId, created.task);`,
    replace: `      const polled = await awaitTask(wait(), created.task.taskId, created.task);
      await task.onCreated?.(created.task.taskId);
      return polled;`,
    testFile: 'packages/runtime/test/tasks.stdio.test.ts',
    testName:
      'records the task id on the SENT record as soon as the task is created, before it completes',
    diagnostic: 'expected undefined to be',
  },
  {
    name: 'read a returned resource_link from the first server of the step',
    file: 'packages/binding/src/resources/step.ts',
    find: 'for (const s of this.#links.get(uri) ?? []) owners.add(s);',
    replace:
      'for (const s of this.#links.get(uri) ?? []) owners.add([...this.#servers.keys()][0] ?? s);',
    testFile: 'packages/runtime/test/resources/resources.stdio.test.ts',
    testName: 'reads a resource_link from the server whose tool returned it, not another one',
    diagnostic: '"server": "b"',
  },
  {
    name: 'keep resource subscriptions after the step is released',
    file: 'packages/binding/src/call/binding.ts',
    find: '    this.#features.endSubscriptions();\n',
    replace: '',
    testFile: 'packages/runtime/test/resources/resources.stdio.test.ts',
    testName:
      'ends subscriptions at release: the listener hears no more and resources/unsubscribe is sent',
    diagnostic: 'test://r/0/1-0',
  },
  {
    name: 'a new step reuses the lists an older step joined after a list changed',
    file: 'packages/binding/src/resources/step.ts',
    find: '    lastJoin.from.every((lists, i) => lists === from[i])',
    replace: '    (true as boolean)',
    testFile: 'packages/runtime/test/resources/resources.stdio.test.ts',
    testName: 'list_changed refreshes the lists of the next step, never those of a captured step',
    diagnostic: 'test://r/1/1-0',
  },
  {
    // Issue 20: a group commit fsyncs when it holds a durable write (the SENT record before a send).
    name: "commit a group's durable writes without an fsync",
    file: 'packages/runtime/src/journal/sqlite.ts',
    find: 'this.#committed(durableWrites, () => group.immediate(fn))',
    replace: 'this.#committed(0, () => group.immediate(fn))',
    testFile: 'packages/runtime/test/journal/group-commit.test.ts',
    testName:
      'commits the SENT records of 64 keyed calls started together with fewer fsyncs than calls, each visible to another connection before its call is sent, and sends each key once',
    diagnostic: 'to be 64',
  },
  {
    // Issue 20: one write failing inside a group fails alone; the others are run one by one.
    name: 'fail a whole group for one failed write',
    file: 'packages/runtime/src/journal/sqlite-batch.ts',
    find: 'for (const write of live) await settle(this.#host, write);',
    replace: "for (const write of live) write.reject(new Error('the group failed'));",
    testFile: 'packages/runtime/test/journal/group-commit.test.ts',
    testName: 'fails a write that throws inside its group alone: the others of the group commit',
    diagnostic: "'fulfilled'",
  },
  {
    // Issue 20: a group's writes run without savepoints; one failing after its CAS ran must roll
    // the whole group back (and run its writes one by one), or its half-write is committed.
    name: 'commit a group past a write that failed halfway',
    file: 'packages/runtime/src/journal/sqlite-batch.ts',
    find: "throw new GroupFailed('a write of the group failed', { cause: error });",
    replace: 'write.reject(error);\n    return undefined;',
    testFile: 'packages/runtime/test/journal/group-commit.test.ts',
    testName:
      'leaves nothing of a grouped update that fails after its compare-and-set ran: its record keeps its version, the others commit with their receipts',
    diagnostic: 'toEqual',
  },
  {
    // Issue 20: the context's JSON text is reused only for a frozen context (it cannot change).
    name: 'reuse the JSON text of a context that may have changed',
    file: 'packages/runtime/src/journal/rows.ts',
    find: 'if (Object.isFrozen(context)) contextTexts.set(context, text);',
    replace: 'contextTexts.set(context, text);',
    testFile: 'packages/runtime/test/journal/sqlite.test.ts',
    testName:
      'stores the context each write is given: one changed between two writes is written changed, a frozen one as it is',
    diagnostic: 'step-changed',
  },
  {
    // Issue 20: a caller that cancels while its group waits for the lock gets ABORTED, not written.
    name: "write a group's cancelled write after the lock wait",
    file: 'packages/runtime/src/journal/sqlite-batch.ts',
    find: 'if (retrying) live = live.filter((write) => this.#stillWanted(write));',
    replace: '',
    testFile: 'packages/runtime/test/journal/group-commit.test.ts',
    testName:
      "writes nothing for a write whose caller cancels while its group waits for another process's lock; the rest commit once it is released",
    diagnostic: "'rejected'",
  },
  {
    // Issue 20: a published snapshot is kept only while something references it.
    name: 'the registry keeps every snapshot it ever published',
    file: 'packages/binding/src/registry.ts',
    find: '  readonly #records = new WeakMap<CatalogSnapshot, SnapshotRecord>();',
    replace: '  readonly #records = new Map<CatalogSnapshot, SnapshotRecord>();',
    testFile: 'packages/runtime/test/memory-retention.test.ts',
    testName:
      'collects a released binding and the snapshot a hard refresh replaced, and keeps them while the binding is held',
    diagnostic: 'superseded snapshot still reachable',
  },
  {
    // Issue 20 (DESIGN §21.2): the uncontended read lock is taken synchronously, never past a writer.
    name: 'take the read lock synchronously past a queued writer',
    file: 'packages/binding/src/lock.ts',
    find: 'return this.#turnstile.isLocked() ? undefined : this.#admitReader();',
    replace: 'return this.#admitReader();',
    testFile: 'packages/binding/test/lock.try.test.ts',
    testName: 'takes a shared hold at once when no writer holds or waits, and never past a writer',
    diagnostic: 'expected [Function] to be undefined',
  },
  {
    // Issue 20 (DESIGN §21.2): the cached "nothing records" decision follows the tracer provider.
    name: 'decide once for good that no tracer records',
    file: 'packages/runtime/src/telemetry.ts',
    find: 'if (provider !== seenTracerProvider || delegate !== seenTracerDelegate) {',
    replace: 'if (seenTracerProvider === undefined) {',
    testFile: 'packages/runtime/test/telemetry.provider.test.ts',
    testName:
      'spans a tools/call only while a tracer provider is installed, decided again when it changes',
    diagnostic: 'expected true to be false',
  },
  {
    // Issue 20: a grouped write resolves only after its group's commit, so nothing is sent first.
    name: "resolve a group's durable write before its commit",
    file: 'packages/runtime/src/journal/sqlite-batch.ts',
    find: '      this.#pending.push({ ...write, resolve, reject });',
    replace:
      '      if (write.durable) resolve(true);\n      this.#pending.push({ ...write, resolve, reject });',
    testFile: 'packages/runtime/test/journal/group-commit.kill.test.ts',
    testName:
      'never sends a key twice when 16 concurrent keyed calls are killed mid-group, and runs every unsent key once after',
    diagnostic: 'expected 2 to be 1',
  },
  {
    // Issue 20 (DESIGN §21.2): a result response skips the SDK's schema only without a `_meta`.
    name: "skip the JSON-RPC schema for a result response's _meta",
    file: 'packages/runtime/src/transports/guard.ts',
    find: 'return token === undefined || isRequestId(token);',
    replace: 'return true;',
    testFile: 'packages/runtime/test/guard.check.test.ts',
    testName:
      'still refuses a result response whose _meta the schema refuses, with nothing else wrong',
    diagnostic: 'expected true to be false',
  },
  {
    // Issue 20 (DESIGN §21.2): a related task in `_meta` still goes through the SDK's schema.
    name: "deliver a result response's related-task _meta unparsed",
    file: 'packages/runtime/src/transports/guard.ts',
    find: 'if (!isRecord(meta) || meta[RELATED_TASK] !== undefined) return false;',
    replace: 'if (!isRecord(meta)) return false;',
    testFile: 'packages/runtime/test/guard.check.test.ts',
    testName:
      'still refuses a result response whose _meta the schema refuses, with nothing else wrong',
    diagnostic: 'expected true to be false',
  },
  {
    // Issue 20 (DESIGN §21.2): with requests in flight, one turn's messages leave in one write.
    name: 'write every stdio message on its own',
    file: 'packages/runtime/src/transports/stdio.ts',
    find: 'if (this.#guard.liveCount > 0 && stdin.writableCorked === 0) {',
    replace: 'if (false) {',
    testFile: 'packages/runtime/test/stdio.batch.test.ts',
    testName:
      'sends the messages of one turn in one write while requests are in flight, and a lone request at once',
    diagnostic: 'expected [',
  },
  {
    // Issue 20 (DESIGN §21, Discovery): the listing key of a re-list is derived from the page root.
    name: 'key a re-list without its page root',
    file: 'packages/runtime/src/discover-catalog.ts',
    find: '`${pageRoot}\\n${JSON.stringify(discovery.revision)}',
    replace: '`${JSON.stringify(discovery.revision)}',
    testFile: 'packages/runtime/test/listing-key.stdio.test.ts',
    testName:
      'is equal for an equal listing (even reordered keys) and differs for any change a snapshot shows',
    diagnostic: 'not to be',
  },
  {
    // Issue 20 (DESIGN §21, Discovery): deepFreeze walks arrays by index; their objects are frozen.
    name: 'freeze the objects of a definition but not those inside arrays',
    file: 'packages/binding/src/snapshot/builder.ts',
    find: "      if (typeof item === 'object' && item !== null) freezeObject(item);",
    replace: '',
    testFile: 'packages/binding/test/snapshot.test.ts',
    testName: 'deep-freezes every object of a definition, inside arrays and nested arrays too',
    diagnostic: '/inputSchema/properties/pick/anyOf/0',
  },
  {
    // Issue 20 (DESIGN §21.2, in-memory call path): the bounds walk reuses its stacks, but a walk
    // that a getter starts inside another must not write over the outer walk's pending values.
    name: 'share the bounds walk stacks with a walk started inside it',
    file: 'packages/binding/src/bounds.ts',
    find: '  spareStacks = undefined;\n',
    replace: '',
    testFile: 'packages/binding/test/bounds.test.ts',
    testName: 'gives a walk started from inside another (a getter of the value) stacks of its own',
    diagnostic: 'expected undefined to deeply equal',
  },
  {
    // Issue 20 (DESIGN §21.2): the kept stacks must not keep the walked values alive.
    name: 'keep the walked values on the spare bounds stacks',
    file: 'packages/binding/src/bounds.ts',
    find: '      stacks.values.fill(undefined, 0, high);\n',
    replace: '',
    testFile: 'packages/binding/test/bounds.test.ts',
    testName: 'keeps no reference to a walked value once the walk is over',
    diagnostic: 'expected {} to be undefined',
  },
  {
    // Issue 20 (DESIGN §21.2): a lock taken at once reads no clock, unless a journal claim came first.
    name: "count a keyed call's journal claim as no lock wait",
    file: 'packages/binding/src/call/prepared.ts',
    find: 'run.journal === undefined ? run.t0 : performance.now()',
    replace: 'run.t0',
    testFile: 'packages/binding/test/call/hot-path.test.ts',
    testName: "counts a keyed call's journal claim as lock wait, and 0 for a lock taken at once",
    diagnostic: 'expected +0 to be 50',
  },
  {
    // Issue 20 (DESIGN §21.2): the one-literal receipt has no protocolVersion member without one.
    name: 'give a receipt without a protocol version an undefined protocolVersion member',
    file: 'packages/binding/src/call/receipt.ts',
    find: ' && receipt.protocolVersion !== undefined',
    replace: '',
    testFile: 'packages/binding/test/call/hot-path.test.ts',
    testName: 'has no protocolVersion member when the server named no protocol version',
    diagnostic: 'to not have property "protocolVersion"',
  },
  {
    // Issue 20 (DESIGN §21.2): the plain tools/call path keeps the delivery record.
    name: 'forget the delivery record of a plain tools/call',
    file: 'packages/runtime/src/sdk/sdk-connection.ts',
    find: '    const params = { name: tool, arguments: args };\n    this.#outgoing.expect(params, delivery);',
    replace: '    const params = { name: tool, arguments: args };',
    testFile: 'packages/runtime/test/runtime.stdio.test.ts',
    testName:
      'gives OUTCOME_UNKNOWN (delivery sent) for a server that crashes mid-call, and the next refresh reconnects it',
    diagnostic: "expected 'CONNECTION_CLOSED' to be 'OUTCOME_UNKNOWN'",
  },
  {
    // Issue 20 (DESIGN §21.2): a call with the caller's signal never takes the plain path.
    name: "take the plain tools/call path past the caller's signal",
    file: 'packages/runtime/src/sdk/sdk-requests.ts',
    find: 'return options.signal === undefined && options.task === undefined',
    replace: 'return options.task === undefined',
    testFile: 'packages/runtime/test/delivery.stdio.test.ts',
    testName: 'reports an abort after sending as ABORTED, delivery sent',
    diagnostic: 'ABORTED',
  },
  {
    // Issue 20 (DESIGN §21.1, keyed call CPU): a store deadline ends only once its writes settled.
    name: "end a keyed call's store deadline before its SENT write settles",
    file: 'packages/binding/src/call/prepared.ts',
    find: '    return await boundedBy(run.io, (io) => journal.markSent(claim, run.timeoutMs, io));',
    replace:
      '    run.io?.end();\n    return await boundedBy(run.io, (io) => journal.markSent(claim, run.timeoutMs, io));',
    testFile: 'packages/binding/test/journal/keyed-cpu.test.ts',
    testName:
      'a store that does not answer the SENT write sees its signal abort at the timeout (TimeoutError): JOURNAL_UNAVAILABLE, not sent',
    diagnostic: 'expected false to be true',
  },
  {
    // Issue 20: a settled store deadline's timer is cleared (it used to live until GC).
    name: "keep a settled store deadline's timer",
    file: 'packages/binding/src/signals.ts',
    find: '      clearTimeout(this.#timer);',
    replace: '      void this.#timer;',
    testFile: 'packages/binding/test/journal/keyed-cpu.test.ts',
    testName:
      'clears every deadline once its operations settled: no timer left, no signal fires later',
    diagnostic: 'to deeply equal []',
  },
  {
    // Issue 20 (DESIGN §21.1): the outcome text a store writes is the JSON of the outcome.
    name: "remember a completed outcome's text other than its JSON",
    file: 'packages/binding/src/journal/transitions.ts',
    find: '`{"kind":"result","result":${resultText},"receipt":${JSON.stringify(outcome.receipt)}}`',
    replace: '`{"kind":"result","result":${resultText},"receipt":{}}`',
    testFile: 'packages/binding/test/journal/keyed-cpu.test.ts',
    testName: 'digests it as before and writes the outcome text its digest was made from',
    diagnostic: 'expected',
  },
  {
    // Issue 20: the WAL is checkpointed every 10,000 pages (a fifth of a keyed call's SQLite time).
    name: "checkpoint the journal's WAL at SQLite's default 1,000 pages",
    file: 'packages/runtime/src/journal/sqlite.ts',
    find: 'const WAL_CHECKPOINT_PAGES = 10_000;',
    replace: 'const WAL_CHECKPOINT_PAGES = 1_000;',
    testFile: 'packages/runtime/test/journal/sqlite.test.ts',
    testName:
      'checkpoints its WAL every 10,000 pages, not at the SQLite default of 1,000 (DESIGN §21.1)',
    diagnostic: 'to be greater than 2000',
  },
  {
    // A grouped statement's values are inlined as literals: a negative number after a minus sign
    // must not open a `--` comment (the rest of the statement would be dropped).
    name: 'inline a number without parentheses',
    file: 'packages/runtime/src/fleet/pg-literals.ts',
    find: 'Number.isFinite(value) ? `(${String(value)})` : undefined',
    replace: 'Number.isFinite(value) ? String(value) : undefined',
    testFile: 'packages/runtime/test/fleet/literals.pg.test.ts',
    testName: 'bring every string and number back exactly, and refuse what cannot be a literal',
    diagnostic: 'Property failed',
  },
  {
    // The same literals with their quotes not doubled: a quote in a value ends the literal.
    name: 'inline a string without doubling its quotes',
    file: 'packages/runtime/src/fleet/pg-literals.ts',
    find: "const escaped = value.replace(/'/g, \"''\");",
    replace: 'const escaped = value;',
    testFile: 'packages/runtime/test/fleet/literals.pg.test.ts',
    testName: 'bring every string and number back exactly, and refuse what cannot be a literal',
    diagnostic: 'Property failed',
  },
  {
    // Issue 20 (fleet): a grouped write of the PostgreSQL store resolves only after its COMMIT,
    // which rides as the last statement of the group's one-round-trip string. Without it the
    // writes resolve on statements that are not committed (the connection goes back to the pool
    // inside its transaction, committed by whatever group uses it next).
    name: "resolve a fleet group's write before its commit",
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: "    if (last) parts.push('COMMIT');",
    replace: '',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      'commits the SENT records of 64 keyed calls started together in fewer commits than calls, each visible to another connection before its call is sent, and sends each key once',
    diagnostic: 'to deeply equal []',
  },
  {
    // Issue 20 (fleet): only an error the server reported at a statement before the string's
    // COMMIT proves nothing committed; taking every failure of such a string for commit-unknown
    // loses the retry of a group whose backend was terminated before its COMMIT.
    name: "take a fleet group's string that failed before its COMMIT for commit-unknown",
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: '        if (last && !(answer.reported && completed < commitAt)) commit.committing = true;',
    replace: '        if (last) commit.committing = true;',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      'writes nothing for a write whose caller cancels while its group waits, when the group is lost before COMMIT and retried; the rest commit once',
    diagnostic: "'fulfilled'",
  },
  {
    // Issue 20 (fleet): a write that fails inside its group with parameters (a value that cannot
    // be a literal) is rolled back to its savepoint alone.
    name: 'fail a whole fleet group for one failed write',
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: '      if (!savepoints || options.isGroup(error)) throw error;',
    replace: '      throw error;',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      'fails a write whose statement fails inside its group alone: the others of the group commit',
    diagnostic: "'fulfilled'",
  },
  {
    // Issue 20 (fleet): in the one-round-trip string, the write whose statement failed is rolled
    // back to its savepoint alone and the rest are sent again.
    name: 'fail a whole fleet group for one failed write in its one-round-trip string',
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: '        if (!savepoints || failed === undefined || !answer.reported || options.isGroup(error)) {',
    replace: '        if (!savepoints || true) {',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      "in the one-round-trip string, a write that fails in the database fails alone and lost compare-and-sets are each their write's answer: the writes before and after them commit, in one commit, and the chain verifies",
    diagnostic: "'fulfilled'",
  },
  {
    // Issue 20 (fleet): the fallback resends the rest without first rolling the failed write back
    // to its savepoint: the transaction stays aborted and the others fail with it.
    name: "resend the rest of a fleet group's string without rolling back the failed write",
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: "        next = failed.write + 1;\n        pending = ['ROLLBACK TO SAVEPOINT w', 'RELEASE SAVEPOINT w'];",
    replace: '        next = failed.write + 1;\n        pending = [];',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      "in the one-round-trip string, a write that fails in the database fails alone and lost compare-and-sets are each their write's answer: the writes before and after them commit, in one commit, and the chain verifies",
    diagnostic: "'fulfilled'",
  },
  {
    // Issue 20 (fleet): the writes after a failed one chain their receipts after the head it
    // would have left, not the head before it: their head checks fail (the chain is kept).
    name: 'chain the writes after a failed one from the head it would have left',
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: '        head = failed.before;',
    replace: '        head = chained;',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      "in the one-round-trip string, a write that fails in the database fails alone and lost compare-and-sets are each their write's answer: the writes before and after them commit, in one commit, and the chain verifies",
    diagnostic: "to deeply equal [ 'fulfilled', 'fulfilled'",
  },
  {
    // Issue 20 (fleet): a group chains its receipts after the head this store last committed; when
    // another worker appended meanwhile, the statement's check fails and the group starts over
    // under the head lock. Taken for the write's own failure, the append fails instead.
    name: "fail a fleet group's write chained after a stale cached head",
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: '        if (guessed && answer.reported && checked && isStaleHead(error)) {',
    replace: '        if (guessed && false) {',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      'starts a group over under the head lock when another worker appended after the head it chained after: the receipt is appended once and the chain verifies',
    diagnostic: 'failed to append a receipt',
  },
  {
    // Issue 20 (fleet): a group's receipts chain under the head row's lock, held to the commit.
    name: "chain a fleet group's receipts without the head lock",
    file: 'packages/runtime/src/fleet/pg-group.ts',
    find: 'FROM chain_head WHERE id = 1 FOR UPDATE`,',
    replace: 'FROM chain_head WHERE id = 1`,',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      "locks the head row before it reads it: an append waits for another worker's open append and chains after it",
    diagnostic: 'instead of resolving',
  },
  {
    // Issue 20 (fleet): a retried group drops the writes whose callers cancelled meanwhile.
    name: "write a fleet group's cancelled write on its retry",
    file: 'packages/runtime/src/fleet/pg-batch.ts',
    find: '          live = live.filter((write) => !write.settled);',
    replace: '',
    testFile: 'packages/runtime/test/fleet/group-commit.pg.test.ts',
    testName:
      'writes nothing for a write whose caller cancels while its group waits, when the group is lost before COMMIT and retried; the rest commit once',
    diagnostic: "'k2'",
  },
];

const root = resolve(import.meta.dirname, '..');

/** `--jobs N` (or `--jobs=N`) and the name filters, from the command line. */
function parseArgs(argv: readonly string[]): { jobs: number; only: string[] } {
  let jobs = availableParallelism();
  const only: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const value = arg === '--jobs' ? argv[++i] : arg.startsWith('--jobs=') ? arg.slice(7) : null;
    if (value === null) {
      only.push(arg);
      continue;
    }
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) {
      console.error(`mutants: --jobs needs a whole number of at least 1, not "${value ?? ''}"`);
      process.exit(2);
    }
    jobs = n;
  }
  return { jobs, only };
}

const { jobs: requestedJobs, only } = parseArgs(process.argv.slice(2));

/** Temp trees and child process groups to remove on every way out (success, failure, Ctrl-C). */
const tempDirs: string[] = [];
const children = new Set<ChildProcess>();

function cleanUp(): void {
  for (const child of children) {
    // Each child leads its own process group (`detached`): end it with everything it started.
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    console.error(`\nmutants: ${signal}: stopping the child processes and removing the copies`);
    cleanUp();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
}

/**
 * `node_modules` for a copy: links to the worktree's installed packages, except the workspace
 * packages (`@stepbind/*`), which point into the copy, so dist code a test spawns loads the copy's
 * (possibly mutated) dist, never the worktree's. Caches (`.vite`) stay per copy.
 */
function linkModules(from: string, to: string): void {
  mkdirSync(to);
  for (const entry of readdirSync(from)) {
    if (entry === '.vite' || entry === '.cache') continue;
    if (entry === '@stepbind') {
      mkdirSync(join(to, entry));
      for (const name of readdirSync(join(from, entry))) {
        const link = join(from, entry, name);
        // Workspace links are relative (`../../packages/binding`): the same text resolves in the copy.
        if (lstatSync(link).isSymbolicLink())
          symlinkSync(readlinkSync(link), join(to, entry, name));
      }
      continue;
    }
    symlinkSync(join(from, entry), join(to, entry));
  }
}

/** A new directory in the system temp directory, removed on every way out (real path: vitest reports those). */
function newTempDir(prefix: string): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  tempDirs.push(dir);
  return dir;
}

/**
 * The temp directory the children of one copy get (`TMPDIR`): a vitest run killed on Ctrl-C cannot
 * remove its private directory, so it is made in here, and removed with it. Short, for socket paths.
 */
const childTmp = new Map<string, string>();

/** A fresh copy of the worktree (no node_modules), in a new temp directory. */
function copyTree(): string {
  const dir = newTempDir('stepbind-mutants-');
  for (const entry of readdirSync(root)) {
    if (entry === 'node_modules' || entry === '.git' || entry === 'coverage') continue;
    cpSync(join(root, entry), join(dir, entry), {
      recursive: true,
      // The worktree's dist and build info come along with their timestamps: `tsc -b` then rebuilds
      // only what is out of date, exactly as it would in the worktree (all of it without a dist).
      preserveTimestamps: true,
      filter: (src) => !/[/\\](node_modules|coverage)([/\\]|$)/.test(src.slice(root.length)),
    });
  }
  linkModules(join(root, 'node_modules'), join(dir, 'node_modules'));
  for (const pkg of readdirSync(join(root, 'packages'))) {
    const modules = join(root, 'packages', pkg, 'node_modules');
    if (existsSync(modules)) linkModules(modules, join(dir, 'packages', pkg, 'node_modules'));
  }
  return dir;
}

/** A copy of a built copy: same sources, dist and build info, timestamps kept so `tsc -b` is a no-op. */
function cloneTree(built: string): string {
  const dir = newTempDir('stepbind-mutants-');
  cpSync(built, dir, {
    recursive: true,
    preserveTimestamps: true,
    verbatimSymlinks: true,
    filter: (src) => !/[/\\](\.vite|coverage)([/\\]|$)/.test(src.slice(built.length)),
  });
  return dir;
}

function childTmpFor(dir: string): string {
  let tmp = childTmp.get(dir);
  if (tmp === undefined) {
    tmp = newTempDir('stepbind-m-');
    // Passable (not listable) by others: a test's own PostgreSQL cluster runs as the postgres user
    // in a directory below (test/support/postgres.ts), as under the test run's private TMPDIR.
    chmodSync(tmp, 0o711);
    childTmp.set(dir, tmp);
  }
  return tmp;
}

/** Runs a command in its own process group; resolves with its exit code and combined output. */
function run(
  dir: string,
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; output: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(command, args, {
      cwd: dir,
      env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1', TMPDIR: childTmpFor(dir), ...env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    const done = (code: number, extra = ''): void => {
      children.delete(child);
      resolvePromise({ code, output: Buffer.concat(chunks).toString('utf8') + extra });
    };
    child.on('error', (error) => done(1, `\n${error.message}`));
    child.on('close', (code) => done(code ?? 1));
  });
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The compiler options of the packages' builds (`tsconfig.base.json`: `isolatedModules` and
 * `verbatimModuleSyntax`, so a file's JavaScript depends on that file alone).
 */
const EMIT_OPTIONS: ts.CompilerOptions = (() => {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, 'packages/binding/tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
  );
  if (parsed === undefined) throw new Error('packages/binding/tsconfig.json does not parse');
  const { rootDir: _rootDir, outDir: _outDir, tsBuildInfoFile: _info, ...options } = parsed.options;
  return {
    ...options,
    // The packages are ESM only ("type": "module"); alone, a NodeNext file would be taken as CJS.
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    sourceMap: false,
    declaration: false,
    declarationMap: false,
    composite: false,
  };
})();

/** The built file of a package source: `packages/P/src/x.ts` → `packages/P/dist/x.js`. */
function distOf(file: string): string {
  const match = /^packages\/([^/]+)\/src\/(.+)\.ts$/.exec(file);
  if (match === null) throw new Error(`a mutant's file must be a package source: ${file}`);
  return `packages/${match[1]}/dist/${match[2]}.js`;
}

/**
 * The mutated file's JavaScript, compiled alone (what `tsc -b` would emit for it, since every file
 * compiles in isolation), or its syntax errors. A whole `tsc -b` per mutant took most of the
 * stage's time: type-checking the packages that import the file, for a change inside one body.
 */
function emitOne(source: string, fileName: string): { js: string } | { errors: string } {
  const out = ts.transpileModule(source, {
    compilerOptions: EMIT_OPTIONS,
    fileName,
    reportDiagnostics: true,
  });
  const errors = (out.diagnostics ?? []).map((d) =>
    ts.flattenDiagnosticMessageText(d.messageText, '\n'),
  );
  return errors.length > 0 ? { errors: errors.join('; ') } : { js: out.outputText };
}

const tsc = (dir: string) =>
  run(dir, process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b']);
const vitest = (dir: string, m: Mutant) =>
  run(
    dir,
    m.node === undefined ? process.execPath : privateNode(m.node, 'a mutant needs it').node,
    [
      join(root, 'node_modules/vitest/vitest.mjs'),
      'run',
      m.testFile,
      // One project: a file the modern-era project also runs would count the test twice.
      '--project',
      m.project ?? 'default',
      '-t',
      // vitest reads -t as a regular expression; the name must match literally.
      escapeRegExp(m.testName),
    ],
    // On another Node only that Node's drivers exist (this tree's better-sqlite3 is built for ours).
    m.node === undefined ? {} : { STEPBIND_REQUIRE_JOURNAL_DRIVERS: '' },
  );

/** The parts of vitest's JSON report read here. */
interface JsonReport {
  readonly testResults: readonly {
    readonly name: string;
    readonly status: string;
    readonly assertionResults: readonly { readonly fullName: string; readonly status: string }[];
  }[];
}

/**
 * The mutants a whole-suite run of this tree already vouches for: `STEPBIND_MUTANTS_BASELINE`
 * names the JSON report of `vitest run` over the whole suite (`.ci/run` runs it just before, on
 * the same clean checkout). The report is used only when it started after the newest change to any
 * tracked file, so a report of an earlier tree never vouches. A mutant is vouched for under the
 * batched rule below, applied to every entry of its test file (a file of two projects appears
 * twice, unnamed: each must hold). Mutants it does not vouch for get the batched run.
 */
function reportedBaseline(mutants: readonly Mutant[]): Set<Mutant> {
  const good = new Set<Mutant>();
  const path = process.env['STEPBIND_MUTANTS_BASELINE'];
  if (path === undefined || path === '' || !existsSync(path)) return good;
  const report = JSON.parse(readFileSync(path, 'utf8')) as JsonReport & { startTime?: number };
  const tracked = spawnSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' });
  if (tracked.status !== 0 || typeof report.startTime !== 'number') return good;
  const newest = Math.max(
    ...tracked.stdout
      .split('\0')
      .filter((file) => file !== '' && existsSync(join(root, file)))
      .map((file) => statSync(join(root, file)).mtimeMs),
  );
  if (!(report.startTime > newest)) {
    console.log(`baseline report ${path} is older than the tree: not used`);
    return good;
  }
  for (const m of mutants) {
    const files = report.testResults.filter((r) => r.name === join(root, m.testFile));
    const holds = (file: JsonReport['testResults'][number]): boolean => {
      if (file.status !== 'passed') return false;
      const ran = file.assertionResults.filter(
        (t) => (t.status === 'passed' || t.status === 'failed') && t.fullName.includes(m.testName),
      );
      return ran.length === 1 && ran[0]?.status === 'passed';
    };
    if (files.length > 0 && files.every(holds)) good.add(m);
  }
  return good;
}

/**
 * One vitest run per project of every named test on the unmutated copy (JSON reporter). A mutant's
 * baseline holds when the run passed as a whole, its test file passed, and exactly one test of that
 * file whose name contains the mutant's test name ran (the set the mutant's own `-t` run selects)
 * and passed. Mutants it does not vouch for get the single-test baseline run instead.
 */
async function batchedBaseline(dir: string, mutants: readonly Mutant[]): Promise<Set<Mutant>> {
  const good = new Set<Mutant>();
  const projects = [...new Set(mutants.map((m) => m.project ?? 'default'))];
  for (const project of projects) {
    const group = mutants.filter((m) => (m.project ?? 'default') === project);
    const reportFile = join(dir, `baseline-${project}.json`);
    const result = await run(
      dir,
      process.execPath,
      [
        join(root, 'node_modules/vitest/vitest.mjs'),
        'run',
        ...new Set(group.map((m) => m.testFile)),
        '--project',
        project,
        '-t',
        [...new Set(group.map((m) => escapeRegExp(m.testName)))].join('|'),
        '--reporter=json',
        `--outputFile=${reportFile}`,
      ],
      // With CI set, vitest.config.ts names its own JSON report file, which wins over --outputFile.
      { CI: '' },
    );
    if (result.code !== 0 || !existsSync(reportFile)) {
      console.log(
        `baseline run of project ${project} vouched for none (exit ${result.code}${existsSync(reportFile) ? '' : ', no report'})`,
      );
      continue;
    }
    const report = JSON.parse(readFileSync(reportFile, 'utf8')) as JsonReport;
    for (const m of group) {
      const file = report.testResults.find((r) => r.name === join(dir, m.testFile));
      if (file === undefined || file.status !== 'passed') continue;
      const ran = file.assertionResults.filter(
        (t) => (t.status === 'passed' || t.status === 'failed') && t.fullName.includes(m.testName),
      );
      if (ran.length === 1 && ran[0]?.status === 'passed') good.add(m);
    }
  }
  return good;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;
/** How long the mutant's build and test run took, for the progress line. */
const times = new Map<Mutant, string>();

/** The verdict on one mutant in a worker's copy; the copy's sources are unmutated on return. */
async function judge(dir: string, m: Mutant, baselineHolds: boolean): Promise<string> {
  const path = join(dir, m.file);
  const original = readFileSync(path, 'utf8');
  if (!baselineHolds) {
    // The batched run did not vouch for it: the single-test run decides, on a dist that matches
    // the sources (an earlier mutant's build may still be in place).
    const build = await tsc(dir);
    const baseline = build.code === 0 ? await vitest(dir, m) : build;
    if (baseline.code !== 0 || !/1 passed/.test(baseline.output)) {
      return 'INVALID (named test does not pass on the unmutated code)';
    }
  }
  const sites = original.split(m.find).length - 1;
  if (sites === 0) return 'INVALID (mutation site not found)';
  // A second match would mutate whichever comes first, perhaps not the code the test guards.
  if (sites > 1) return `INVALID (mutation site matches ${sites} places)`;
  const mutated = original.replace(m.find, m.replace);
  const distPath = join(dir, distOf(m.file));
  const built = readFileSync(distPath);
  writeFileSync(path, mutated);
  try {
    // The mutated file alone goes into dist (spawned processes run dist); restored below.
    const t0 = performance.now();
    if (m.build === 'tsc') {
      const compiled = await tsc(dir);
      if (compiled.code !== 0) return 'NOT KILLED (does not compile)';
    } else {
      const compiled = emitOne(mutated, path);
      if ('errors' in compiled) return `NOT KILLED (does not compile: ${compiled.errors})`;
      writeFileSync(distPath, compiled.js);
    }
    const t1 = performance.now();
    const t = await vitest(dir, m);
    times.set(m, `build ${seconds(t1 - t0)}, test ${seconds(performance.now() - t1)}`);
    const failedNamed = t.code !== 0 && /1 failed/.test(t.output);
    if (failedNamed && t.output.includes(m.diagnostic)) return 'KILLED';
    if (failedNamed) return `NOT KILLED (failed without "${m.diagnostic}")`;
    return 'SURVIVED';
  } finally {
    writeFileSync(path, original);
    writeFileSync(distPath, built);
    // Declarations a whole build wrote for the mutant are rebuilt from the restored source.
    if (m.build === 'tsc') await tsc(dir);
  }
}

async function main(): Promise<number> {
  const started = performance.now();
  const selected = MUTANTS.filter((m) => only.length === 0 || only.some((o) => m.name.includes(o)));
  const jobs = Math.max(1, Math.min(requestedJobs, selected.length));
  // Every mutant's site, not only the selected ones': a change that moves one shows in any run.
  const misplaced = MUTANTS.flatMap((m) => {
    const sites = readFileSync(join(root, m.file), 'utf8').split(m.find).length - 1;
    return sites === 1 ? [] : [`${m.name}: ${m.file} has ${sites} matches`];
  });
  if (misplaced.length > 0) {
    throw new Error(`every mutation site must match exactly once:\n${misplaced.join('\n')}`);
  }
  const first = copyTree();
  const buildStarted = performance.now();
  const build = await tsc(first);
  if (build.code !== 0) throw new Error(`the unmutated copy does not build:\n${build.output}`);
  const dirs = [first];
  while (dirs.length < jobs) dirs.push(cloneTree(first));
  console.log(`copies built: ${seconds(performance.now() - buildStarted)}`);
  const baselineStarted = performance.now();
  const reported = reportedBaseline(selected);
  const batched = await batchedBaseline(
    first,
    selected.filter((m) => !reported.has(m)),
  );
  const vouched = new Set([...reported, ...batched]);
  console.log(
    `baseline: ${vouched.size} of ${selected.length} named tests pass on the unmutated code ` +
      `(${reported.size} by the whole suite's report, ${batched.size} in a batched run; ` +
      `${seconds(performance.now() - baselineStarted)}); ${jobs} worker${jobs === 1 ? '' : 's'}`,
  );

  const verdicts = new Map<Mutant, string>();
  let next = 0;
  const worker = async (dir: string): Promise<void> => {
    for (let i = next++; i < selected.length; i = next++) {
      const m = selected[i];
      if (m === undefined) break;
      const t0 = performance.now();
      const verdict = await judge(dir, m, vouched.has(m));
      verdicts.set(m, verdict);
      const parts = times.get(m);
      const took = `${seconds(performance.now() - t0)}${parts === undefined ? '' : `: ${parts}`}`;
      console.log(`${verdict.padEnd(9)} ${m.name} (${took})`);
    }
  };
  await Promise.all(dirs.map(worker));

  let survived = 0;
  console.log('');
  console.log('| mutant | killed by | verdict |');
  console.log('| --- | --- | --- |');
  for (const m of selected) {
    const verdict = verdicts.get(m) ?? 'NOT RUN';
    if (verdict !== 'KILLED') survived++;
    const test = `${m.testFile.replace(/^packages\//, '')} › ${m.testName}`;
    console.log(`| ${m.name} | ${test} | ${verdict} |`);
  }
  console.log('');
  console.log(`${selected.length - survived} of ${selected.length} mutants killed`);
  console.log(`total ${seconds(performance.now() - started)} with ${jobs} worker(s)`);
  return survived === 0 ? 0 : 1;
}

try {
  process.exitCode = await main();
} finally {
  cleanUp();
}
