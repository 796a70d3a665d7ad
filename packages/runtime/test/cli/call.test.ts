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

  it('rejects --args that are not a JSON object with exit code 2', async () => {
    for (const args of ['{', '[1]']) {
      const { code, err } = await cli([
        'call',
        'ops',
        'status',
        '--config',
        'x.json',
        '--args',
        args,
      ]);
      expect(code).toBe(2);
      expect(err).toMatch(/--args (is not valid JSON|must be a JSON object)/);
    }
  });
});
