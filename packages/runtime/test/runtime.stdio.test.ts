import type { McpBinding, StepbindError } from '@stepbind/binding';
import { McpRuntime, type McpRuntimeOptions } from '@stepbind/runtime';
import {
  isProcessAlive,
  readAuditTrail,
  stdioServerParams,
  tempAudit,
  type TempAudit,
  type AuditEntry,
  type ServerFixture,
  type ScriptedServerOptions,
} from '@stepbind/testkit';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { expectGone } from './support/processes.js';
import { failure } from './support/errors.js';
import { expectTestEra, itInEra } from './support/era.js';
import { eventLog, nextEvent, type EventLog } from './support/events.js';

const runtimes: McpRuntime[] = [];
const pids = new Set<number>();
const trails: TempAudit[] = [];

afterEach(async () => {
  for (const r of runtimes.splice(0)) {
    for (const pid of r.pids()) pids.add(pid);
    await r.close();
  }
  // close() resolves once the servers are gone: nothing to wait for.
  expectGone(pids);
  pids.clear();
  await Promise.all(trails.splice(0).map((trail) => trail.dispose()));
});

interface Server {
  readonly options: Omit<ScriptedServerOptions, 'auditPath'>;
  readonly extra?: Record<string, unknown>;
}

async function open(
  servers: Record<string, Server>,
  options: McpRuntimeOptions = {},
): Promise<{
  runtime: McpRuntime;
  audit: (name: string) => Promise<AuditEntry[]>;
  log: EventLog;
}> {
  const paths: Record<string, string> = {};
  const mcpServers: Record<string, unknown> = {};
  for (const [name, server] of Object.entries(servers)) {
    const trail = tempAudit(name);
    trails.push(trail);
    paths[name] = trail.path;
    mcpServers[name] = {
      ...stdioServerParams({ ...server.options, auditPath: paths[name] }),
      ...server.extra,
    };
  }
  const log = eventLog();
  const runtime = await McpRuntime.open(
    { mcpServers },
    { approval: 'none', onEvent: log.onEvent, ...options },
  );
  runtimes.push(runtime);
  expectTestEra(runtime);
  return { runtime, audit: (name) => readAuditTrail(paths[name] ?? ''), log };
}

const listsAndCalls = (audit: readonly AuditEntry[]): string[] =>
  audit
    .filter((e) => e.method === 'tools/list' || e.method === 'tools/call')
    .map((e) =>
      e.method === 'tools/list'
        ? `list(${e.cursor === null ? 'null' : JSON.stringify(e.cursor)})`
        : `call(${e.tool})`,
    );

const tool = (name: string, outputSchema?: object): Record<string, unknown> => ({
  name,
  inputSchema: { type: 'object' },
  ...(outputSchema === undefined ? {} : { outputSchema }),
});
const S = {
  type: 'object',
  properties: { value: { type: 'string' } },
  required: ['value'],
  additionalProperties: false,
};
const I = {
  type: 'object',
  properties: { value: { type: 'integer' } },
  required: ['value'],
  additionalProperties: false,
};

describe('McpRuntime over real stdio servers', () => {
  it('close() leaves no child process: every recorded pid is gone', async () => {
    const { runtime } = await open({
      a: { options: { scenario: 'normal' } },
      b: { options: { scenario: 'single' } },
    });
    const recorded = runtime.pids();
    expect(recorded).toHaveLength(2);
    await using binding = await runtime.captureBinding();
    await binding.prepareCall('a__gamma').run({});
    await runtime.close();
    for (const pid of recorded) expect(isProcessAlive(pid)).toBe(false);
    expect(runtime.status().liveConnections).toBe(0);
  });

  it('gives OUTCOME_UNKNOWN (delivery sent) for a server that crashes mid-call, and the next refresh reconnects it', async () => {
    const fixture: ServerFixture = {
      generations: [{ pages: [{ tools: [tool('work'), tool('crash')] }] }],
      triggers: [{ on: { method: 'tools/call', tool: 'crash' }, exit: 7 }],
    };
    const { runtime, audit } = await open({ s: { options: { scenario: 'fixture', fixture } } });
    const firstPid = runtime.pids()[0];
    const binding = await runtime.captureBinding();
    const error = await failure(binding.prepareCall('s__crash').run({}));
    expect(error.code).toBe('OUTCOME_UNKNOWN');
    expect(error.detail['delivery']).toBe('sent');
    binding.release();
    await using next = await runtime.captureBinding();
    expect(runtime.pids()).not.toContain(firstPid);
    await next.prepareCall('s__work').run({});
    const calls = (await audit('s')).filter((e) => e.method === 'tools/call');
    expect(calls.map((e) => [e.tool, e.pid === firstPid])).toEqual([
      ['crash', true],
      ['work', false],
    ]);
  });

  it('sees list_changed tools at the next capture and refuses the old prepared call with zero tools/call', async () => {
    const fixture: ServerFixture = {
      generations: [
        { pages: [{ tools: [tool('plan'), tool('deploy')] }] },
        { pages: [{ tools: [tool('plan'), tool('deploy'), tool('rollback')] }] },
      ],
      triggers: [{ on: { method: 'tools/call', tool: 'plan' }, setGeneration: 1, notify: 'after' }],
    };
    const { runtime, audit, log } = await open(
      { ops: { options: { scenario: 'fixture', fixture } } },
      { listChangedDebounceMs: 20 },
    );
    await using step1 = await runtime.captureBinding();
    const deploy = step1.prepareCall('ops__deploy');
    const swapped = nextEvent(log, 'catalog-swapped');
    await step1.prepareCall('ops__plan').run({});
    await swapped;
    const error = await failure(deploy.run({}));
    expect(error.code).toBe('STALE_CATALOG');
    await using step2 = await runtime.captureBinding();
    expect(step2.tools.map((t) => t.name)).toContain('ops__rollback');
    expect(
      (await audit('ops')).filter((e) => e.method === 'tools/call').map((e) => e.tool),
    ).toEqual(['plan']);
  });

  it('leaves an optional server that is still starting out of the step after one bounded grace', async () => {
    const { runtime } = await open(
      {
        a: { options: { scenario: 'single' } },
        mute: {
          options: { scenario: 'single' },
          extra: {
            command: process.execPath,
            args: ['-e', 'setInterval(() => {}, 1000)'],
            required: false,
            startupTimeoutMs: 20_000,
          },
        },
      },
      { optionalGraceMs: 100 },
    );
    await using binding = await runtime.captureBinding();
    expect(binding.servers.find((s) => s.name === 'mute')).toMatchObject({
      bound: false,
      reason: 'starting',
    });
    expect(binding.tools.map((t) => t.name)).toEqual(['a__alpha', 'a__beta']);
    expect(runtime.status().servers.find((s) => s.name === 'mute')?.state).toBe('starting');
    // close() must also end the child that never finished initialize.
  });
});

describe('no child process outlives a failed start', () => {
  const once = itInEra('legacy', 'its server is no scripted server, so the era changes nothing');
  once(
    'leaves no child when open() rejects because a server never answers initialize',
    async () => {
      const pidFile = join(tmpdir(), `stepbind-mute-${process.pid}-${Date.now()}.pid`);
      const script = `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`;
      const error: unknown = await McpRuntime.open({
        mcpServers: {
          mute: { command: process.execPath, args: ['-e', script], startupTimeoutMs: 300 },
        },
      }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'REQUIRED_SERVERS_FAILED' });
      const pid = Number(await readFile(pidFile, 'utf8'));
      await rm(pidFile, { force: true });
      expect(pid).toBeGreaterThan(0);
      expect(isProcessAlive(pid)).toBe(false);
    },
  );
});

describe('a failed re-list never touches the active catalog or its validation (seed 000, six scenarios)', () => {
  // gen 0: alpha with output schema S; gen 1 (after the first listing): a candidate catalog.
  function fixture(
    candidate: readonly (readonly Record<string, unknown>[])[],
    output: Record<string, unknown>,
  ): ServerFixture {
    return {
      generations: [
        { pages: [{ tools: [tool('alpha', S)] }] },
        {
          pages: candidate.map((tools, i) => ({
            tools,
            ...(i + 1 < candidate.length ? { nextCursor: 'next' } : {}),
          })),
        },
      ],
      calls: { alpha: { structuredContent: output } },
      triggers: [{ on: { method: 'tools/list', nth: 1 }, setGeneration: 1 }],
    };
  }
  const duplicateInteger = [[tool('alpha', I)], [tool('alpha', I)]];
  const duplicateNoSchema = [[tool('alpha')], [tool('alpha')]];
  const accepted = [[tool('alpha', I)], [tool('beta', I)]];

  type Outcome = { ok: true; value: unknown } | { ok: false; error: StepbindError };
  const callAlpha = (binding: McpBinding): Promise<Outcome> =>
    binding
      .prepareCall('s__alpha')
      .run({})
      .then(
        (r): Outcome => ({ ok: true, value: r.result.structuredContent }),
        (e: unknown): Outcome => ({ ok: false, error: e as StepbindError }),
      );

  async function scenario(
    candidate: typeof accepted,
    output: Record<string, unknown>,
    callBefore = false,
  ) {
    const opened = await open({
      s: { options: { scenario: 'fixture', fixture: fixture(candidate, output) } },
    });
    const before = await opened.runtime.captureBinding();
    const first = callBefore ? await callAlpha(before) : undefined;
    const refresh = await opened.runtime.hardRefresh('s').then(
      () => undefined,
      (e: unknown) => e as StepbindError,
    );
    const after = await opened.runtime.captureBinding();
    const call = await callAlpha(after);
    return { ...opened, refresh, first, call, after, before };
  }

  it('1. duplicate candidate with an integer schema: old string schema still accepts "old"', async () => {
    const r = await scenario(duplicateInteger, { value: 'old' });
    expect(r.refresh?.code).toBe('DUPLICATE_TOOL_NAME');
    expect(r.call).toEqual({ ok: true, value: { value: 'old' } });
    expect(listsAndCalls(await r.audit('s'))).toEqual([
      'list(null)',
      'list(null)',
      'list("next")',
      'call(alpha)',
    ]);
  });

  it('2. duplicate candidate without output schema: old string schema still rejects 7', async () => {
    const r = await scenario(duplicateNoSchema, { value: 7 });
    expect(r.refresh?.code).toBe('DUPLICATE_TOOL_NAME');
    expect(r.call.ok).toBe(false);
    expect(!r.call.ok && r.call.error.code).toBe('INVALID_TOOL_OUTPUT');
    expect(!r.call.ok && r.call.error.message).toContain(
      'Invalid structured content returned by tool alpha',
    );
    expect(listsAndCalls(await r.audit('s'))).toEqual([
      'list(null)',
      'list(null)',
      'list("next")',
      'call(alpha)',
    ]);
  });

  it('3. isolated failed candidate: conforming output is accepted before and after', async () => {
    const r = await scenario(duplicateInteger, { value: 'old' }, true);
    expect(r.first).toEqual({ ok: true, value: { value: 'old' } });
    expect(r.refresh?.code).toBe('DUPLICATE_TOOL_NAME');
    expect(r.call).toEqual({ ok: true, value: { value: 'old' } });
    expect(r.after.servers[0]).toMatchObject({ bound: true, generation: 1, revision: 1 });
    expect(listsAndCalls(await r.audit('s'))).toEqual([
      'list(null)',
      'call(alpha)',
      'list(null)',
      'list("next")',
      'call(alpha)',
    ]);
  });

  it('4. isolated failed candidate keeps rejecting non-conforming output (negative control)', async () => {
    const r = await scenario(duplicateInteger, { value: 7 }, true);
    expect(!r.first?.ok && r.first?.error.code).toBe('INVALID_TOOL_OUTPUT');
    expect(r.refresh?.code).toBe('DUPLICATE_TOOL_NAME');
    expect(!r.call.ok && r.call.error.code).toBe('INVALID_TOOL_OUTPUT');
  });

  it('5. an accepted candidate validates with its own integer schema: 7 is accepted', async () => {
    const r = await scenario(accepted, { value: 7 });
    expect(r.refresh).toBeUndefined();
    expect(r.after.tools.map((t) => t.name)).toEqual(['s__alpha', 's__beta']);
    expect(r.call).toEqual({ ok: true, value: { value: 7 } });
    expect(listsAndCalls(await r.audit('s'))).toEqual([
      'list(null)',
      'list(null)',
      'list("next")',
      'call(alpha)',
    ]);
  });

  it('6. an accepted candidate validates with its own integer schema: "old" is rejected', async () => {
    const r = await scenario(accepted, { value: 'old' });
    expect(r.refresh).toBeUndefined();
    expect(!r.call.ok && r.call.error.code).toBe('INVALID_TOOL_OUTPUT');
    expect(listsAndCalls(await r.audit('s'))).toEqual([
      'list(null)',
      'list(null)',
      'list("next")',
      'call(alpha)',
    ]);
  });
});
