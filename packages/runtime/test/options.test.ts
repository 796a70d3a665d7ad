/**
 * Every options bag is checked at run time (DESIGN §17.1): a table of wrong bags, each refused
 * with `INVALID_OPTIONS` naming the function, the path and, for a typo, the nearest key, before
 * anything is started, opened, connected or sent. Real stdio servers, a real SQLite path.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  CallJournal,
  isStepbindError,
  MemoryJournalStore,
  type RunOptions,
  type StepbindError,
} from '@stepbind/binding';
import { McpRuntime, openSqliteJournal, type McpRuntimeOptions } from '@stepbind/runtime';
import { stepToAiSdkTools } from '@stepbind/runtime/ai-sdk';
import { attachFleet } from '@stepbind/runtime/fleet';
import { readAuditTrail, stdioServerParams, tempAuditPath, tempDir } from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureTool } from './support/fixtures.js';
import { trackRuntimes } from './support/runtimes.js';

const { runtimes, auditFiles } = trackRuntimes();

const FIXTURE = { generations: [{ pages: [{ tools: [fixtureTool('send')] }] }] };

/** A JavaScript caller: no compiler between the bag and the function. */
const js = <T>(bag: unknown): T => bag as T;

/** The error `act` throws or rejects with (fails the test when it succeeds). */
async function refusal(act: () => unknown, what = ''): Promise<StepbindError> {
  try {
    await act();
  } catch (error) {
    expect(isStepbindError(error, 'INVALID_OPTIONS'), `${what} ${String(error)}`).toBe(true);
    return error as StepbindError;
  }
  throw new Error('expected INVALID_OPTIONS, but the options were accepted');
}

/** Asserts the refusal names `fn`, `path` (message and detail) and the did-you-mean. */
function expectNamed(
  error: StepbindError,
  fn: string,
  path: string,
  didYouMean: string | undefined,
): void {
  expect(error.message).toContain(`${fn}: `);
  expect(error.message).toContain(path);
  expect(error.detail['function']).toBe(fn);
  expect(error.detail['path']).toBe(path);
  expect(error.detail['didYouMean']).toBe(didYouMean);
  if (didYouMean !== undefined) {
    expect(error.message).toContain(`did you mean "${didYouMean}"?`);
    expect(error.detail['allowed']).toContain(didYouMean);
  }
  const problems = error.detail['problems'] as readonly { path: string }[];
  expect(problems[0]?.path).toBe(path);
}

const noop = (): void => undefined;
const store = new MemoryJournalStore();

/** [what, bag, path of the first problem, did-you-mean]. */
const OPEN_BAGS: readonly [string, unknown, string, string?][] = [
  ['a misspelt journal (issue 22)', { jornal: { path: 'j.db' } }, 'options.jornal', 'journal'],
  [
    'journal.synchronous "off" (issue 22)',
    { journal: { path: 'j.db', synchronous: 'off' } },
    'options.journal.synchronous',
  ],
  ['approval "never" (issue 22)', { approval: 'never' }, 'options.approval'],
  ['journal.pth (issue 22)', { journal: { pth: 'j.db' } }, 'options.journal.pth', 'path'],
  ['a journal with neither path nor store', { journal: {} }, 'options.journal'],
  [
    'a journal with both path and store',
    { journal: { path: 'j.db', store } },
    'options.journal.store',
  ],
  [
    'synchronous on a store journal',
    { journal: { store, synchronous: 'normal' } },
    'options.journal.synchronous',
  ],
  [
    'a negative busyTimeoutMs',
    { journal: { path: 'j.db', busyTimeoutMs: -1 } },
    'options.journal.busyTimeoutMs',
  ],
  ['retentionMs 0', { journal: { path: 'j.db', retentionMs: 0 } }, 'options.journal.retentionMs'],
  ['a journal store without methods', { journal: { store: {} } }, 'options.journal.store'],
  ['a store URL of another database', { store: 'mysql://h/db' }, 'options.store'],
  ['a store that is a number', { store: 42 }, 'options.store'],
  [
    'store.poolsize',
    { store: { url: 'postgres://h/db', poolsize: 3 } },
    'options.store.poolsize',
    'poolSize',
  ],
  [
    'store.reconnect.initialMS',
    { store: { url: 'postgres://h/db', reconnect: { initialMS: 5 } } },
    'options.store.reconnect.initialMS',
    'initialMs',
  ],
  [
    'reconnect.maxAttemps',
    { reconnect: { maxAttemps: 3 } },
    'options.reconnect.maxAttemps',
    'maxAttempts',
  ],
  [
    'a fractional reconnect delay',
    { reconnect: { initialDelayMs: 1.5 } },
    'options.reconnect.initialDelayMs',
  ],
  [
    'validation.compile "sometimes"',
    { validation: { compile: 'sometimes' } },
    'options.validation.compile',
  ],
  [
    'an unknown schema dialect',
    { validation: { allowedDialects: ['draft-04'] } },
    'options.validation.allowedDialects[0]',
  ],
  [
    'validation.maxSchemaByte',
    { validation: { maxSchemaByte: 10 } },
    'options.validation.maxSchemaByte',
    'maxSchemaBytes',
  ],
  ['a clock without timers', { clock: { now: () => 0 } }, 'options.clock'],
  ['onevent', { onevent: noop }, 'options.onevent', 'onEvent'],
  ['optionalGraceMs Infinity', { optionalGraceMs: Infinity }, 'options.optionalGraceMs'],
  [
    'listChangedDebounceMs a string',
    { listChangedDebounceMs: '100' },
    'options.listChangedDebounceMs',
  ],
  ['a negative policyEpoch', { policyEpoch: -1 }, 'options.policyEpoch'],
  ['a signal that is not an AbortSignal', { signal: { aborted: false } }, 'options.signal'],
  ['connect a string', { connect: 'stdio' }, 'options.connect'],
  ['a tokenStore without methods', { tokenStore: {} }, 'options.tokenStore'],
  ['authorise', { authorise: noop }, 'options.authorise', 'authorize'],
  ['options that are not an object', 'j.db', 'options'],
];

describe('McpRuntime.open refuses a wrong options bag before starting anything', () => {
  it.each(OPEN_BAGS)('refuses %s', async (_, bag, path, didYouMean) => {
    using dir = tempDir('options');
    const auditPath = tempAuditPath('options');
    auditFiles.push(auditPath);
    const config = {
      mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) },
    };
    const error = await refusal(() =>
      McpRuntime.open(
        config,
        js<McpRuntimeOptions>(
          typeof bag === 'object' && bag !== null && 'journal' in bag
            ? rebase(bag as { journal: Record<string, unknown> }, dir.path)
            : bag,
        ),
      ),
    );
    expectNamed(error, 'McpRuntime.open', path, didYouMean);
    expect(error.message).toMatch(/Nothing was started, opened or journaled/);
    // No server process ever ran (it would have written its audit trail) and no journal file.
    expect(existsSync(auditPath)).toBe(false);
    expect(existsSync(join(dir.path, 'j.db'))).toBe(false);
  });

  it('reports every problem of the bag at once, the first in the message plus "and N more"', async () => {
    const error = await refusal(() =>
      McpRuntime.open(
        { mcpServers: {} },
        js<McpRuntimeOptions>({ jornal: {}, approval: 'never', reconnect: { maxAttempts: -1 } }),
      ),
    );
    const problems = error.detail['problems'] as readonly { path: string }[];
    expect(problems.map((p) => p.path)).toEqual([
      'options.jornal',
      'options.approval',
      'options.reconnect.maxAttempts',
    ]);
    expect(error.message).toContain('(and 2 more: options.approval');
  });

  it('never echoes a string value (a URL may hold a password), only its kind', async () => {
    const error = await refusal(() =>
      McpRuntime.open(
        { mcpServers: {} },
        js<McpRuntimeOptions>({
          store: 'mysql://user:hunter2@h/db',
          redirectUri: 'http://127.0.0.1:1/cb#hunter2',
        }),
      ),
    );
    expect(error.message).not.toContain('hunter2');
    expect(JSON.stringify(error.detail)).not.toContain('hunter2');
    expect(error.message).toContain('got a string');
  });
});

describe('the other options bags are refused the same way', () => {
  it('captureBinding, stepToAiSdkTools and PreparedCall.run name the path and the nearest key', async () => {
    const auditPath = tempAuditPath('options');
    auditFiles.push(auditPath);
    const runtime = await McpRuntime.open({
      mcpServers: { s: stdioServerParams({ scenario: 'fixture', fixture: FIXTURE, auditPath }) },
    });
    runtimes.push(runtime);
    const cases: readonly [string, () => unknown, string, string, string?][] = [
      [
        'captureBinding stepID',
        () => runtime.captureBinding(js({ stepID: 'x' })),
        'McpRuntime.captureBinding',
        'options.stepID',
        'stepId',
      ],
      [
        'captureBinding requiredServers a string',
        () => runtime.captureBinding(js({ requiredServers: 's' })),
        'McpRuntime.captureBinding',
        'options.requiredServers',
      ],
      [
        'captureBinding an empty server name',
        () => runtime.captureBinding(js({ requiredServers: [''] })),
        'McpRuntime.captureBinding',
        'options.requiredServers[0]',
      ],
    ];
    for (const [what, act, fn, path, near] of cases) {
      expectNamed(await refusal(act, what), fn, path, near);
    }
    const step = await runtime.captureBinding();
    try {
      const aiCases: readonly [unknown, string, string?][] = [
        [{ timeout: 5 }, 'options.timeout', 'timeoutMs'],
        [{ onCall: 'log' }, 'options.onCall'],
        [{ timeoutMs: 0 }, 'options.timeoutMs'],
      ];
      for (const [bag, path, near] of aiCases) {
        expectNamed(
          await refusal(() => stepToAiSdkTools(step, js(bag))),
          'stepToAiSdkTools',
          path,
          near,
        );
      }
      const run = await refusal(() =>
        step.prepareCall('s__send').run({}, js<RunOptions>({ idempotencyKy: 'k1' })),
      );
      expectNamed(run, 'PreparedCall.run', 'options.idempotencyKy', 'idempotencyKey');
      expect(run.message).toMatch(/"s__send" of server "s"/);
      expect(run.detail['delivery']).toBe('not-sent');
    } finally {
      step.release();
    }
    expect((await readAuditTrail(auditPath)).filter((e) => e.method === 'tools/call')).toEqual([]);
  });

  it('openSqliteJournal refuses a misspelt option and creates no file', async () => {
    using dir = tempDir('options');
    const path = join(dir.path, 'j.db');
    const error = await refusal(() => openSqliteJournal(js({ path, synchronus: 'normal' })));
    expectNamed(error, 'openSqliteJournal', 'options.synchronus', 'synchronous');
    const missing = await refusal(() => openSqliteJournal(js({ pth: path })));
    expect((missing.detail['problems'] as readonly { path: string }[]).map((p) => p.path)).toEqual([
      'options.pth',
      'options.path',
    ]);
    expect(existsSync(path)).toBe(false);
  });

  it('the journal constructors refuse a misspelt or wrong option', async () => {
    expectNamed(
      await refusal(() => new MemoryJournalStore(js({ maxRecord: 5 }))),
      'new MemoryJournalStore',
      'options.maxRecord',
      'maxRecords',
    );
    expectNamed(
      await refusal(() => new CallJournal(new MemoryJournalStore(), js({ retentionMS: 1 }))),
      'new CallJournal',
      'options.retentionMS',
      'retentionMs',
    );
    expectNamed(
      await refusal(() => new CallJournal(new MemoryJournalStore(), js({ receipts: 'some' }))),
      'new CallJournal',
      'options.receipts',
      undefined,
    );
  });

  it('attachFleet refuses a misspelt or wrong store option before connecting', async () => {
    // Port 1 refuses connections: a store that got past the check would fail STORE_UNAVAILABLE.
    const misspelt = await refusal(() =>
      attachFleet(js({ url: 'postgres://127.0.0.1:1/db', maxAtempts: 2 })),
    );
    expectNamed(misspelt, 'attachFleet', 'store.maxAtempts', 'maxAttempts');
    const schema = await refusal(() =>
      attachFleet(js({ url: 'postgres://127.0.0.1:1/db', schema: 'Bad-Schema' })),
    );
    expectNamed(schema, 'attachFleet', 'store.schema', undefined);
  });
});

/** The bag with a relative journal `path` moved into `dir` (so no stray file can appear). */
function rebase(bag: { journal: Record<string, unknown> }, dir: string): unknown {
  const path = bag.journal['path'];
  return typeof path === 'string'
    ? { ...bag, journal: { ...bag.journal, path: join(dir, path) } }
    : bag;
}
