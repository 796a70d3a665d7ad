import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isStepbindError, type InputRounds, type StepbindError } from '@stepbind/binding';
import { tempDir } from '@stepbind/testkit';
import { runCli } from '../src/cli/run.js';
import { McpRuntime, openSqliteJournal } from '../src/index.js';

const RAW = fileURLToPath(new URL('../../testkit/dist/era/raw-server.js', import.meta.url));
const SECRET = 'TOP-SECRET-ANSWER-7f3a';
const SAMPLED = 'SAMPLED-SECRET-91c2';

function config(log: string): unknown {
  return {
    mcpServers: {
      s: {
        command: process.execPath,
        args: [RAW, 'modern'],
        env: { RAW_SERVER_LOG: log },
        approval: 'none',
      },
    },
  };
}

async function cli(args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await runCli(args, { stdout: (t) => (out += t), stderr: () => undefined });
  return { code, out };
}

/** Every byte the journal left in `dir` (the database and any side files). */
async function journalBytes(dir: string): Promise<string> {
  const names = await readdir(dir);
  const texts = await Promise.all(
    names.filter((n) => n.startsWith('journal')).map((n) => readFile(`${dir}/${n}`, 'latin1')),
  );
  return texts.join('\n');
}

async function receiptsOf(path: string): Promise<Record<string, unknown>[]> {
  const store = openSqliteJournal({ path, readOnly: true });
  try {
    return (await store.readReceipts()).map((r) => JSON.parse(r.text) as Record<string, unknown>);
  } finally {
    await store.close();
  }
}

async function toolCalls(log: string): Promise<{ id: unknown; requestState?: unknown }[]> {
  return (await readFile(log, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { id?: unknown; method?: string; params?: unknown })
    .filter((m) => m.method === 'tools/call')
    .map((m) => ({
      id: m.id,
      requestState: (m.params as { requestState?: unknown }).requestState,
    }));
}

describe('MRTR rounds are recorded in receipts', () => {
  it('per round the keys, kinds and outcomes, in the CallReceipt and the journal receipt, which verifies; no answer reaches either', async () => {
    await using dir = tempDir('mrtr');
    const log = dir.file('requests.jsonl');
    const path = dir.file('journal.db');
    let round = 0;
    const runtime = await McpRuntime.open(config(log), {
      journal: { path },
      onElicitation: () => {
        round++;
        return Promise.resolve(
          round === 1 ? { action: 'accept', content: { secret: SECRET } } : { action: 'decline' },
        );
      },
      onSampling: () =>
        Promise.resolve({
          role: 'assistant',
          content: { type: 'text', text: SAMPLED },
          model: 'm',
        }),
    });
    let rounds: InputRounds | undefined;
    try {
      await using step = await runtime.captureBinding();
      const { result, receipt } = await step
        .prepareCall('s__ask')
        .run({ rounds: 2, kinds: ['elicitation', 'sampling', 'roots'] }, { idempotencyKey: 'k1' });
      expect(result.content).toEqual([
        { type: 'text', text: 'answered 2 rounds: elicitation,sampling,roots' },
      ]);
      rounds = receipt.inputRounds;
      const plain = await step.prepareCall('s__echo').run({});
      expect('inputRounds' in plain.receipt).toBe(false);
    } finally {
      await runtime.close();
    }
    const asked = (outcome: string) => [
      { key: 'elicitation', kind: 'elicitation', outcome },
      { key: 'sampling', kind: 'sampling', outcome: 'answered' },
      { key: 'roots', kind: 'roots', outcome: 'answered' },
    ];
    const expected = {
      count: 2,
      rounds: [{ requests: asked('answered') }, { requests: asked('declined') }],
    };
    expect(rounds).toEqual(expected);
    const bodies = await receiptsOf(path);
    expect(bodies.map((b) => [b['key'], b['outcome'], b['inputRounds']])).toEqual([
      ['k1', 'ok', expected],
      [null, 'ok', undefined],
    ]);
    const verify = await cli(['receipts', 'verify', '--journal', path]);
    expect(verify.code).toBe(0);
    expect(verify.out).toMatch(/2 receipts verified from the start/);
    const bytes = await journalBytes(dir.path);
    expect(bytes).toContain('"inputRounds"');
    for (const secret of [SECRET, SAMPLED, 'Round 1: confirm?', 'Round 2: confirm?']) {
      expect(bytes).not.toContain(secret);
      expect(JSON.stringify(rounds)).not.toContain(secret);
    }
    // Never cached: every round is a new request with its own id, carrying the server's state.
    const calls = (await toolCalls(log)).slice(0, 3);
    expect(calls.map((c) => c.requestState)).toEqual([undefined, 'round-1', 'round-2']);
    expect(new Set(calls.map((c) => c.id)).size).toBe(3);
  });

  it('a call stopped at the 8-round bound records all 8 rounds in its failure receipt, the last stopped at the limit', async () => {
    await using dir = tempDir('mrtr');
    const log = dir.file('requests.jsonl');
    const path = dir.file('journal.db');
    const runtime = await McpRuntime.open(config(log), {
      journal: { path },
      onElicitation: () => Promise.resolve({ action: 'accept', content: { secret: SECRET } }),
    });
    let error: unknown;
    try {
      await using step = await runtime.captureBinding();
      error = await step
        .prepareCall('s__ask')
        .run({ rounds: 1000 }, { idempotencyKey: 'k-forever' })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
    } finally {
      await runtime.close();
    }
    expect(isStepbindError(error, 'INPUT_REQUIRED')).toBe(true);
    expect((error as Error).message).toContain('8 times');
    expect(await toolCalls(log)).toHaveLength(8);
    const [body] = await receiptsOf(path);
    const recorded = body?.['inputRounds'] as InputRounds;
    expect(body?.['outcome']).toBe('INPUT_REQUIRED');
    expect(recorded.count).toBe(8);
    expect(recorded.rounds).toHaveLength(8);
    const answered = { key: 'elicitation', kind: 'elicitation', outcome: 'answered' };
    expect(recorded.rounds.slice(0, 7)).toEqual(Array(7).fill({ requests: [answered] }));
    expect(recorded.rounds[7]).toEqual({
      requests: [{ ...answered, outcome: 'unanswered' }],
      stopped: 'round-limit',
    });
    // The application sees in the error what the journal records.
    expect((error as { detail: { inputRounds?: unknown } }).detail.inputRounds).toEqual(recorded);
    expect(JSON.stringify((error as { detail: unknown }).detail)).not.toContain(SECRET);
    expect((await cli(['receipts', 'verify', '--journal', path])).code).toBe(0);
    const bytes = await journalBytes(dir.path);
    expect(bytes).not.toContain(SECRET);
    expect(bytes).not.toContain('confirm?');
  });

  it('a round the application cannot answer in full asks nothing of its handlers and is recorded unanswered', async () => {
    await using dir = tempDir('mrtr');
    const path = dir.file('journal.db');
    let sampled = 0;
    const runtime = await McpRuntime.open(config(dir.file('requests.jsonl')), {
      journal: { path },
      onSampling: () => {
        sampled++;
        return Promise.resolve({
          role: 'assistant',
          content: { type: 'text', text: 'x' },
          model: 'm',
        });
      },
    });
    let error: unknown;
    try {
      await using step = await runtime.captureBinding();
      error = await step
        .prepareCall('s__ask')
        .run({ rounds: 1, kinds: ['sampling', 'elicitation'] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
    } finally {
      await runtime.close();
    }
    expect(isStepbindError(error, 'INPUT_REQUIRED')).toBe(true);
    expect(sampled).toBe(0);
    // The server's message is for the application (detail), not the error text the journal keeps.
    expect((error as StepbindError).detail['requests']).toEqual([
      { key: 'sampling', method: 'sampling/createMessage' },
      { key: 'elicitation', method: 'elicitation/create', message: 'Round 1: confirm?' },
    ]);
    expect((error as Error).message).not.toContain('confirm?');
    const [body] = await receiptsOf(path);
    expect(body?.['inputRounds']).toEqual({
      count: 1,
      rounds: [
        {
          requests: [
            { key: 'sampling', kind: 'sampling', outcome: 'unanswered' },
            { key: 'elicitation', kind: 'elicitation', outcome: 'unanswered' },
          ],
          stopped: 'unanswerable',
        },
      ],
    });
  });

  it('a handler that throws stops the call; the round records what was answered before it', async () => {
    await using dir = tempDir('mrtr');
    const path = dir.file('journal.db');
    const runtime = await McpRuntime.open(config(dir.file('requests.jsonl')), {
      journal: { path },
      onElicitation: () => Promise.resolve({ action: 'cancel' }),
      onSampling: () => Promise.reject(new Error('no model available')),
    });
    let error: unknown;
    try {
      await using step = await runtime.captureBinding();
      error = await step
        .prepareCall('s__ask')
        .run({ rounds: 1, kinds: ['elicitation', 'sampling'] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
    } finally {
      await runtime.close();
    }
    expect(error).toBeInstanceOf(Error);
    const [body] = await receiptsOf(path);
    expect(body?.['inputRounds']).toEqual({
      count: 1,
      rounds: [
        {
          requests: [
            { key: 'elicitation', kind: 'elicitation', outcome: 'cancelled' },
            { key: 'sampling', kind: 'sampling', outcome: 'unanswered' },
          ],
          stopped: 'handler-failed',
        },
      ],
    });
  });
});

describe('MRTR delivery across rounds', () => {
  it('a later round lost after round 1 reached the server is OUTCOME_UNKNOWN, delivery sent (never not-sent)', async () => {
    await using dir = tempDir('mrtr-lost');
    let closed: () => void = () => undefined;
    const gone = new Promise<void>((resolve) => (closed = resolve));
    let runtime: McpRuntime | undefined;
    runtime = await McpRuntime.open(config(dir.file('requests.jsonl')), {
      onEvent: (event) => {
        if (event.type === 'connection-closed' && event.server === 's') closed();
      },
      // Round 1 reached the server (it answered input_required); the server dies before round 2.
      onElicitation: async () => {
        const pid = runtime?.status().servers.find((s) => s.name === 's')?.pid;
        if (pid === undefined) throw new Error('no pid');
        process.kill(pid, 'SIGKILL');
        await gone;
        return { action: 'accept', content: { ok: true } };
      },
    });
    let error: unknown;
    try {
      await using step = await runtime.captureBinding();
      error = await step
        .prepareCall('s__ask')
        .run({ rounds: 2, kinds: ['elicitation'] })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
    } finally {
      await runtime.close();
      runtime = undefined;
    }
    expect(isStepbindError(error)).toBe(true);
    const failure = error as StepbindError;
    expect([failure.code, failure.detail['delivery']]).toEqual(['OUTCOME_UNKNOWN', 'sent']);
    expect(failure.message).toContain('may or may not have run');
  });
});
