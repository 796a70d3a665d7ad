import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isProcessAlive, type ServerFixture } from '@stepbind/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli, cliSandbox, tool, type CliSandbox } from './support.js';

/**
 * `status` says it only reads, but the catalog is unproven and the config does not vouch for its
 * annotations (`trustAnnotations`): calling it takes `--approve`, as `deploy` does.
 */
const OPS: ServerFixture = {
  generations: [
    {
      pages: [
        {
          tools: [
            tool('status', {
              annotations: { readOnlyHint: true },
              inputSchema: {
                type: 'object',
                properties: { env: { type: 'string' } },
                required: ['env'],
              },
            }),
            tool('deploy'),
          ],
        },
      ],
    },
  ],
  calls: {
    status: { text: 'prod is healthy', structuredContent: { healthy: true } },
    deploy: { text: 'deployed' },
  },
};

let sandbox: CliSandbox;
beforeEach(async () => {
  sandbox = await cliSandbox();
});
afterEach(async () => {
  await sandbox.cleanup();
});

const sent = async (name: string): Promise<(string | undefined)[]> =>
  (await sandbox.audit(name)).filter((e) => e.method === 'tools/call').map((e) => e.tool);

describe('stepbind call', () => {
  it('runs one call and prints its result and receipt, leaving no server process', async () => {
    const config = await sandbox.config('ok', { ops: OPS });
    const { code, out } = await cli([
      'call',
      'ops',
      'status',
      '--approve',
      '--config',
      config,
      '--args',
      '{"env":"prod"}',
    ]);
    expect(code).toBe(0);
    expect(out).toContain('result (ok):\n  prod is healthy\n');
    expect(out).toContain('structured content: {"healthy":true}');
    expect(out).toMatch(/receipt:\n {2}step {8}step-1\n {2}server {6}ops\n/);
    expect(out).toContain('  tool        status (model name ops__status)');
    expect(out).toContain('  effect      read');
    expect(out).toContain('  catalog     UNVERSIONED_OBSERVATION, generation 1, revision 1');
    expect(out).toMatch(/ {2}descriptor {2}sha256:[0-9a-f]{64}/);
    expect(await sent('ops')).toEqual(['status']);
    const pids = new Set((await sandbox.audit('ops')).map((e) => e.pid));
    for (const pid of pids) expect(isProcessAlive(pid)).toBe(false);
  });

  it('prints { ok, result, receipt } with --json', async () => {
    const config = await sandbox.config('json', { ops: OPS });
    const { code, out } = await cli([
      'call',
      'ops',
      'status',
      '--approve',
      '--config',
      config,
      '--args={"env":"dev"}',
      '--json',
    ]);
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({
      ok: true,
      result: { content: [{ type: 'text', text: 'prod is healthy' }] },
      receipt: { server: 'ops', tool: 'status', modelName: 'ops__status', outcome: 'ok' },
    });
  });

  it('refuses a write-class call on an unproven catalog without --approve, sending nothing', async () => {
    const config = await sandbox.config('approve', { ops: OPS });
    const refused = await cli(['call', 'ops', 'deploy', '--config', config]);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('APPROVAL_REQUIRED');
    expect(refused.err).toContain('--approve');
    expect(await sent('ops')).toEqual([]);

    const approved = await cli(['call', 'ops', 'deploy', '--config', config, '--approve']);
    expect(approved.code).toBe(0);
    expect(approved.out).toContain('  deployed');
    expect(await sent('ops')).toEqual(['deploy']);
  });

  it('refuses arguments that do not match the input schema, sending nothing', async () => {
    const config = await sandbox.config('bad-args', { ops: OPS });
    const { code, out } = await cli([
      'call',
      'ops',
      'status',
      '--approve',
      '--config',
      config,
      '--args',
      '{"env":7}',
      '--json',
    ]);
    expect(code).toBe(1);
    expect(JSON.parse(out)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_ARGUMENTS', detail: { server: 'ops', tool: 'status' } },
    });
    expect(await sent('ops')).toEqual([]);
  });

  it('starts only the named server', async () => {
    const config = await sandbox.config('only', {
      ops: OPS,
      broken: { command: process.execPath, args: ['-e', 'process.exit(3)'] },
    });
    const { code } = await cli([
      'call',
      'ops',
      'status',
      '--approve',
      '--config',
      config,
      '--args',
      '{"env":"x"}',
    ]);
    expect(code).toBe(0);
  });

  it('names unknown servers (exit 2) and unknown tools (exit 1) with what exists', async () => {
    const config = await sandbox.config('unknown', { ops: OPS });
    const server = await cli(['call', 'nope', 'status', '--config', config]);
    expect(server).toMatchObject({ code: 2, err: expect.stringContaining('(configured: ops)') });
    const toolResult = await cli(['call', 'ops', 'nope', '--config', config]);
    expect(toolResult).toMatchObject({
      code: 1,
      err: expect.stringContaining('has no tool "nope" (it has: status, deploy)'),
    });
  });

  it('sends a keyed call once: the repeat is answered from the configured journal', async () => {
    const config = await sandbox.config('keyed', { ops: OPS }, { journal: { path: 'calls.db' } });
    const call = ['call', config, 'ops', 'deploy', '--approve', '--key', 'deploy-42'];

    const first = await cli(call);
    const second = await cli([...call, '--json']);

    expect(first.code).toBe(0);
    expect(first.out).toContain('  key         deploy-42');
    expect(first.out).not.toContain('replayed');
    expect(second.code).toBe(0);
    expect(JSON.parse(second.out)).toMatchObject({
      ok: true,
      replayed: true,
      result: { content: [{ type: 'text', text: 'deployed' }] },
      receipt: { idempotencyKey: 'deploy-42', modelName: 'ops__deploy' },
    });
    expect(await sent('ops')).toEqual(['deploy']);
    const receipts = await cli(['receipts', 'list', config, '--key', 'deploy-42', '--json']);
    expect((JSON.parse(receipts.out) as { replayed: boolean }[]).map((r) => r.replayed)).toEqual([
      false,
      true,
    ]);
  });

  it('keeps the receipt of an unkeyed call in the configured journal', async () => {
    const config = await sandbox.config('receipt', { ops: OPS }, { journal: { path: 'calls.db' } });
    expect((await cli(['call', config, 'ops', 'deploy', '--approve'])).code).toBe(0);
    const { out } = await cli(['receipts', 'list', config, '--json']);
    expect(JSON.parse(out)).toEqual([
      expect.objectContaining({ modelName: 'ops__deploy', outcome: 'ok', delivery: 'sent' }),
    ]);
  });

  it('refuses --key without a durable journal in the configuration, starting nothing', async () => {
    const config = await sandbox.config('no-journal', { ops: OPS });
    const { code, err } = await cli(['call', config, 'ops', 'deploy', '--key', 'k']);
    expect(code).toBe(2);
    expect(err).toContain('--key needs a durable journal');
    expect(err).toContain('"journal": { "path": "stepbind.db" }');
    expect(await sandbox.audit('ops')).toEqual([]);
  });

  it('checks --args and --key before any server starts: a bad one spawns nothing', async () => {
    const marker = join(sandbox.dir, 'started');
    const config = await sandbox.config('marker', {
      // Writes the marker the moment it starts (then exits, failing the start).
      ops: {
        command: process.execPath,
        args: ['-e', `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'x')`],
      },
    });
    for (const [extra, message] of [
      [['--args', '{'], '--args is not valid JSON'],
      [['--args', '[1]'], '--args must be a JSON object (got an array)'],
      [['--args', '"x"'], '--args must be a JSON object (got string)'],
      [['--key', ''], '--key must be 1 to 512 characters'],
      [['--key', 'a\u0001b'], 'without control characters'],
      [['--key', 'k'.repeat(513)], '(got 513 characters)'],
    ] as const) {
      const { code, err } = await cli(['call', config, 'ops', 'status', ...extra]);
      expect(code, extra.join(' ')).toBe(2);
      expect(err).toContain(message);
      expect(existsSync(marker)).toBe(false);
    }
    // The control: with good arguments the same command does start the server.
    const started = await cli(['call', config, 'ops', 'status', '--args', '{}']);
    expect(started.code).toBe(1);
    expect(existsSync(marker)).toBe(true);
  });

  it("hints the server's tool name for a near miss, and takes the model name as TOOL", async () => {
    const config = await sandbox.config('near', { ops: OPS });
    const near = await cli(['call', config, 'ops', 'stats', '--approve']);
    expect(near.code).toBe(1);
    expect(near.err).toContain('Did you mean "status" (model name ops__status)?');
    const byModelName = await cli([
      'call',
      config,
      'ops',
      'ops__status',
      '--approve',
      '--args',
      '{"env":"prod"}',
    ]);
    expect(byModelName.code).toBe(0);
    expect(await sent('ops')).toEqual(['status']);
  });
});
