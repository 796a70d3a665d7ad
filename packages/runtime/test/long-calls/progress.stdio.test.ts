import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isStepbindError, type CallProgress, type StepbindError } from '@stepbind/binding';
import {
  hostileServerParams,
  scriptedTool,
  stdioServerParams,
  tempDir,
  type FixtureProgress,
  type ScriptedServerEra,
} from '@stepbind/testkit';
import { describe, expect, it } from 'vitest';
import { McpRuntime } from '../../src/index.js';
import { auditEntry } from '../support/audit.js';

/** testkit's raw era server (`node raw-server.js modern`: 2026-07-28 only). */
const RAW = fileURLToPath(new URL('../../../testkit/dist/era/raw-server.js', import.meta.url));

/** One tool, `work`, whose call sends `progress` (for the call's token) before its result. */
function config(era: ScriptedServerEra, progress: readonly FixtureProgress[], auditPath?: string) {
  return {
    mcpServers: {
      s: {
        ...stdioServerParams({
          scenario: 'fixture',
          era,
          fixture: {
            generations: [{ pages: [{ tools: [scriptedTool('work')] }] }],
            calls: { work: { text: 'done', progress } },
          },
          ...(auditPath === undefined ? {} : { auditPath }),
        }),
        approval: 'none',
      },
    },
  };
}

async function failure(promise: Promise<unknown>): Promise<StepbindError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isStepbindError(error)) throw new Error(`expected a StepbindError, got ${String(error)}`);
  return error;
}

/** Steps of `gapMs` each, `count` of them: the whole call takes about count × gapMs. */
function steady(count: number, gapMs: number): FixtureProgress[] {
  return Array.from({ length: count }, (_, i) => ({
    progress: i + 1,
    total: count,
    delayMs: gapMs,
  }));
}

describe.each(['legacy', 'modern'] as const)('long calls over stdio (%s era)', (era) => {
  it('delivers each progress report in order with its total and message, and sends a token only when asked', async () => {
    await using dir = tempDir('progress');
    const audit = dir.file('audit.jsonl');
    const runtime = await McpRuntime.open(
      config(
        era,
        [
          { progress: 1, total: 3, message: 'reading' },
          { progress: 2, total: 3, message: 'thinking' },
          { progress: 3, total: 3 },
        ],
        audit,
      ),
    );
    try {
      await using step = await runtime.captureBinding();
      const seen: CallProgress[] = [];
      const { result } = await step
        .prepareCall('s__work')
        .run({}, { onProgress: (p) => seen.push(p) });
      expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
      expect(seen).toEqual([
        { progress: 1, total: 3, message: 'reading' },
        { progress: 2, total: 3, message: 'thinking' },
        { progress: 3, total: 3 },
      ]);
      await step.prepareCall('s__work').run({});
      const calls = readFileSync(audit, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { method: string; meta?: Record<string, unknown> })
        .filter((e) => e.method === 'tools/call');
      expect(calls).toHaveLength(2);
      expect(typeof calls[0]?.meta?.['progressToken']).toBe('string');
      expect(calls[1]?.meta?.['progressToken']).toBeUndefined();
    } finally {
      await runtime.close();
    }
  });

  it('bounds hostile progress: a huge message is cut, bad numbers and non-increasing values are dropped, a flood of 3000 does not stall the call', async () => {
    const runtime = await McpRuntime.open(
      config(era, [
        { progress: 5, message: 'x'.repeat(20_000) },
        { progress: 4 },
        { progress: 5 },
        { progress: 'six' },
        { progress: null },
        { progress: 6, total: 'ten', message: 42 },
        { progress: 10, repeat: 3000 },
      ]),
    );
    try {
      await using step = await runtime.captureBinding();
      const seen: CallProgress[] = [];
      const { result } = await step.prepareCall('s__work').run(
        {},
        {
          onProgress: (p) => {
            seen.push(p);
            throw new Error('a listener that throws does not break the call');
          },
        },
      );
      expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
      expect(seen[0]?.message).toHaveLength(1000);
      expect(seen[1]).toEqual({ progress: 6 });
      expect(seen).toHaveLength(2 + 3000);
      expect(seen.at(-1)).toEqual({ progress: 3009 });
      const values = seen.map((p) => p.progress);
      expect(values.every((v, i) => i === 0 || v > (values[i - 1] as number))).toBe(true);
    } finally {
      await runtime.close();
    }
  });

  it('a timeout shorter than the call but longer than the gaps between reports succeeds with resetTimeoutOnProgress and fails TIMEOUT (sent) without it', async () => {
    const runtime = await McpRuntime.open(config(era, steady(12, 100)));
    try {
      await using step = await runtime.captureBinding();
      const call = step.prepareCall('s__work');
      const seen: number[] = [];
      const { result } = await call.run(
        {},
        { timeoutMs: 700, resetTimeoutOnProgress: true, onProgress: (p) => seen.push(p.progress) },
      );
      expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);

      const error = await failure(call.run({}, { timeoutMs: 700, onProgress: () => undefined }));
      expect(error.code).toBe('TIMEOUT');
      expect(error.detail).toMatchObject({ delivery: 'sent', timeoutMs: 700 });
    } finally {
      await runtime.close();
    }
  });

  it('maxTotalTimeoutMs ends a call that keeps reporting progress: TIMEOUT naming the cap', async () => {
    const runtime = await McpRuntime.open(config(era, steady(40, 50)));
    try {
      await using step = await runtime.captureBinding();
      const seen: number[] = [];
      const error = await failure(
        step.prepareCall('s__work').run(
          {},
          {
            timeoutMs: 600,
            resetTimeoutOnProgress: true,
            maxTotalTimeoutMs: 900,
            onProgress: (p) => seen.push(p.progress),
          },
        ),
      );
      expect(error.code).toBe('TIMEOUT');
      expect(error.detail).toMatchObject({ delivery: 'sent', maxTotalTimeoutMs: 900 });
      expect(error.message).toContain('maxTotalTimeoutMs of 900 ms');
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.length).toBeLessThan(40);
    } finally {
      await runtime.close();
    }
  });

  it('an abort after sending is ABORTED (sent) and the server receives notifications/cancelled; no progress is delivered after that', async () => {
    await using dir = tempDir('progress-abort');
    const audit = dir.file('audit.jsonl');
    const runtime = await McpRuntime.open(config(era, steady(50, 40), audit));
    try {
      await using step = await runtime.captureBinding();
      const controller = new AbortController();
      const seen: number[] = [];
      const error = await failure(
        step.prepareCall('s__work').run(
          {},
          {
            signal: controller.signal,
            onProgress: (p) => {
              seen.push(p.progress);
              if (p.progress === 2) controller.abort();
            },
          },
        ),
      );
      expect(error.code).toBe('ABORTED');
      expect(error.detail['delivery']).toBe('sent');
      // The server's trail, written as each message arrives, records the cancellation.
      await auditEntry(audit, (e) => e.method === 'notifications/cancelled');
      expect(seen).toEqual([1, 2]);
    } finally {
      await runtime.close();
    }
  });

  it('progress the server sends after the result is not delivered', async () => {
    const runtime = await McpRuntime.open(
      config(era, [
        { progress: 1, total: 3 },
        { progress: 2, total: 3, afterResult: true },
        { progress: 3, total: 3, afterResult: true },
      ]),
    );
    try {
      await using step = await runtime.captureBinding();
      const seen: number[] = [];
      await step.prepareCall('s__work').run({}, { onProgress: (p) => seen.push(p.progress) });
      // The late reports are written right after the result; a second call's round trip follows them.
      await step.prepareCall('s__work').run({}, { onProgress: () => undefined });
      expect(seen).toEqual([1]);
    } finally {
      await runtime.close();
    }
  });
});

describe('progress written with the answer', () => {
  it('a report after the result in the same write as the answer is not delivered (raw 2025 server)', async () => {
    const runtime = await McpRuntime.open({
      mcpServers: {
        h: {
          ...hostileServerParams({ replies: { 'tools/call': { kind: 'progress-around' } } }),
          approval: 'none',
        },
      },
    });
    try {
      await using step = await runtime.captureBinding();
      const seen: number[] = [];
      const { result } = await step
        .prepareCall('h__echo')
        .run({}, { onProgress: (p) => seen.push(p.progress) });
      expect(result.content).toEqual([{ type: 'text', text: 'ok' }]);
      expect(seen).toEqual([1]);
    } finally {
      await runtime.close();
    }
  });
  it('a report after the result in the same write as the answer is not delivered (raw 2026-07-28 server)', async () => {
    const runtime = await McpRuntime.open({
      mcpServers: { s: { command: process.execPath, args: [RAW, 'modern'], approval: 'none' } },
    });
    try {
      await using step = await runtime.captureBinding();
      const seen: number[] = [];
      await step
        .prepareCall('s__echo')
        .run({ progress: true }, { onProgress: (p) => seen.push(p.progress) });
      expect(seen).toEqual([1]);
    } finally {
      await runtime.close();
    }
  });
});

describe('long-call options', () => {
  it('refuses maxTotalTimeoutMs below timeoutMs and a non-function onProgress with INVALID_OPTIONS before anything is sent', async () => {
    const runtime = await McpRuntime.open(config('legacy', []));
    try {
      await using step = await runtime.captureBinding();
      const call = step.prepareCall('s__work');
      const below = await failure(
        call.run({}, { timeoutMs: 1000, resetTimeoutOnProgress: true, maxTotalTimeoutMs: 999 }),
      );
      expect(below.code).toBe('INVALID_OPTIONS');
      expect(below.detail).toMatchObject({ option: 'maxTotalTimeoutMs', delivery: 'not-sent' });
      expect(below.message).toContain('must be at least timeoutMs (1000)');
      const notFn = await failure(call.run({}, { onProgress: 'yes' as never }));
      expect(notFn.detail).toMatchObject({ option: 'onProgress' });
      const typo = await failure(call.run({}, { resetTimeoutOnProgres: true } as never));
      expect(typo.detail['didYouMean']).toBe('resetTimeoutOnProgress');
    } finally {
      await runtime.close();
    }
  });
});
